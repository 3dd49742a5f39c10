/**
 * The milestone rules (docs/verdict.md): end reward >= +20% over step-0 on the fixed held-out prompts,
 * AND a downstream delta (adapter - base, test split, paired by task id) >= +5 percentage points
 * whose decision interval excludes 0, judged on at least 200 test tasks. A missing or mismatching
 * baseline.json gates the verdict.
 *
 * Levels: CONFIRMED (the interval's lower bound clears the threshold itself), PASS (the point
 * estimate clears the threshold and the interval excludes 0: a point-estimate gate, so at a true
 * effect equal to the threshold it passes about half the time; the report prints that
 * probability), FAIL (the interval's upper bound is below the threshold), INCONCLUSIVE (anything
 * else, with the reason).
 *
 * Rules, in the order applied:
 *   reward     no held-out result                                       -> INCONCLUSIVE
 *              fewer than MIN_HELDOUT_PROMPTS scorable prompts          -> INCONCLUSIVE (too small for a CI)
 *              relative change undefined (start 0) or CI undefined (NaN) -> INCONCLUSIVE
 *              CI upper < +20%                                          -> FAIL
 *              CI lower >= +20% and the test rejects 0                  -> CONFIRMED
 *              relative change >= +20% and the paired test rejects 0    -> PASS (the test governs
 *                                                                          "excludes 0", not the seeded CI)
 *              the CI excludes 0 but the test does not reject it        -> INCONCLUSIVE (names both)
 *   both       a test that governs and its interval disagree about 0: the test decides, the reason
 *              names both (governedExcludesZero, one rule for both criteria)
 *              otherwise                                                -> INCONCLUSIVE
 *              (a CI bound of +-Infinity is "unbounded" and judged as such, never dropped)
 *   downstream no paired comparison (no eval, or n < 2 pairs)          -> INCONCLUSIVE
 *              n < 200 tasks                                            -> INCONCLUSIVE
 *              CI undefined                                             -> INCONCLUSIVE
 *              CI upper < +5 pp                                         -> FAIL
 *              the interval excludes 0 but the test does not reject it  -> INCONCLUSIVE (names both)
 *              CI lower >= +5 pp                                        -> CONFIRMED
 *              delta >= +5 pp and the test rejects 0 (CI lower > 0)      -> PASS
 *              otherwise                                                -> INCONCLUSIVE
 *   overall    eval.json scored another adapter than the run's          -> INCONCLUSIVE, "rerun `agent eval <run_id>`"
 *   overall    baseline missing or mismatching                          -> INCONCLUSIVE, "GATED on baseline.json"
 *              any criterion FAIL                                       -> FAIL
 *              both CONFIRMED                                           -> CONFIRMED
 *              both PASS or CONFIRMED                                   -> PASS
 *              otherwise                                                -> INCONCLUSIVE
 * The downstream interval and test (core/base-vs-adapter.ts compareScores' `decision`): for 0/1 per-task
 * scores, Tango's score interval with the exact McNemar test governing "excludes 0" (so the
 * verdict never flips with a bootstrap seed); for per-task means (K > 1 samples), the paired t
 * interval and t test. Every verdict carries its reason in words and numbers.
 *
 * This file holds the rules only; verdict.ts builds their evidence (held-out-reward.ts,
 * core/base-vs-adapter.ts) once and is what the report and the commands call. Field names are
 * those of the evidence's source: the wire's relativeChange / relativeChangeCiLow / relativeChangeCiHigh, base-vs-adapter.ts's meanDiff and
 * its Decision's lower / upper / method / test / p / rejects.
 *
 * Units: the reward criterion is a relative change as a FRACTION (0.2 = +20%); the downstream
 * criterion works in FRACTIONS internally (0.05) and speaks percentage points in its reasons,
 * printed to 0.1 pp (finer digits would be noise at any n this project sees).
 */
import { parseBaseModel } from "../core/base-model.js";
import type { BaselineMatch } from "../eval/baseline-record.js";

/** End held-out reward must be at least this relative change over step 0 (fraction: +20%). */
export const REWARD_MIN_RELATIVE_CHANGE = 0.2;
/** Downstream adapter - base must be at least this, in percentage points. */
export const DOWNSTREAM_MIN_DELTA_PP = 5;
/** The same threshold as a fraction of tasks. */
export const DOWNSTREAM_MIN_DELTA = DOWNSTREAM_MIN_DELTA_PP / 100;
/** The eval behind the verdict must cover at least this many test tasks. */
export const MIN_MILESTONE_TASKS = 200;
/** The held-out reward criterion needs at least this many prompts: below it a bootstrap over
 *  prompts has too few distinct resamples to be a CI (1 prompt gives a zero-width "CI"). */
export const MIN_HELDOUT_PROMPTS = 20;

export type Verdict = "CONFIRMED" | "PASS" | "FAIL" | "INCONCLUSIVE";

export interface CriterionResult {
  verdict: Verdict;
  reason: string;
}

/** The held-out reward numbers from run.json's RunResult. */
export interface RewardEvidence {
  startMean: number;
  endMean: number;
  /** (end - start) / |start|, fraction, with its 95% paired bootstrap CI over prompts */
  relativeChange: number;
  relativeChangeCiLow: number;
  relativeChangeCiHigh: number;
  numPrompts: number;
  /** prompts with a score at both ends (what MIN_HELDOUT_PROMPTS counts); null when unknown
   *  (the sidecar's numbers only), then numPrompts counts */
  scorablePrompts?: number | null;
  samplesPerPrompt: number;
  /** the deterministic test that governs "excludes 0" (held-out-reward.ts heldOutTest: paired t on the
   *  per-prompt end - start, exact sign test when they have no spread); absent for the sidecar's
   *  numbers, where the CI decides */
  test?: string;
  p?: number | null;
  rejects?: boolean | null;
  /** P(PASS | true relative change = +20%) at this many prompts (normal approximation from the
   *  CI's width); null when unknown */
  pPassAtThreshold?: number | null;
  /** where the relative change and its CI were computed (held-out-reward.ts); "" when not said */
  computedFrom?: string;
}

/** The paired downstream comparison, all FRACTIONS except n. */
export interface DownstreamEvidence {
  n: number;
  /** mean(adapter - base) */
  meanDiff: number;
  /** the decision interval */
  lower: number;
  upper: number;
  /** name of the interval, e.g. "Tango score interval" */
  method: string;
  /** the test that decides whether the delta excludes 0, e.g. "exact McNemar test" */
  test?: string;
  /** its two-sided p; null when it has none to show */
  p?: number | null;
  /** whether it rejects delta = 0 at alpha .05; null = decided by the interval alone */
  rejects?: boolean | null;
  /** pairs needed to detect `delta` (alpha .05, power .8); null when undefined */
  requiredN: number | null;
  /** minimum detectable effect at n (fraction); null when undefined */
  mde: number | null;
  /** P(PASS | true delta = threshold) at this n; null when unknown */
  pPassAtThreshold?: number | null;
  /** P(CONFIRMED | true delta = threshold) at this n; null when unknown */
  pConfirmAtThreshold?: number | null;
  /** how those two were computed: "simulated" (0/1 scores: stats.simulatedOperatingCharacteristic,
   *  the real Tango + exact McNemar gate) or "normal approximation" (per-task means) */
  powerMethod?: "simulated" | "normal approximation";
  /** where the base scores came from */
  baseSource: string;
  /** what the difference is of, in the reasons (default "adapter - base") */
  contrast?: string;
}

export interface MilestoneInput {
  reward: RewardEvidence | null;
  /** why the reward criterion does not apply to this run (e.g. ranked preference); it is then
   *  INCONCLUSIVE with this reason */
  rewardNotApplicable?: string;
  downstream: DownstreamEvidence | null;
  baseline: BaselineMatch;
  /** the baseline.json the guard read, as the user names it (default agent-evals/baseline.json) */
  baselineFile?: string;
  /** the command that sets this run's baseline (baselineSetCommand; default `agent baseline set`) */
  baselineCommand?: string;
  /** set when eval.json scored another adapter than the run's current one (verdict.ts
   *  adapterCheck): the downstream criterion and the verdict are INCONCLUSIVE with this reason */
  adapterChanged?: string;
}

export interface MilestoneVerdict {
  verdict: Verdict;
  /** true when baseline.json is missing or does not match: the verdict is INCONCLUSIVE for that reason */
  gated: boolean;
  reason: string;
  reward: CriterionResult;
  downstream: CriterionResult;
}

/** +12.3% from a fraction 0.123; "unbounded" / "-unbounded" for infinities, "undefined" for NaN. */
export function pct(fraction: number, digits = 1): string {
  if (Number.isNaN(fraction)) return "undefined";
  if (!Number.isFinite(fraction)) return fraction > 0 ? "+unbounded" : "-unbounded";
  const v = fraction * 100;
  return `${v >= 0 ? "+" : ""}${v.toFixed(digits)}%`;
}

/** +4.2 pp from a fraction 0.042 ("undefined" for NaN). */
export function pp(fraction: number, digits = 1): string {
  if (Number.isNaN(fraction)) return "undefined";
  if (!Number.isFinite(fraction)) return fraction > 0 ? "+unbounded" : "-unbounded";
  const v = fraction * 100;
  return `${v >= 0 ? "+" : ""}${v.toFixed(digits)} pp`;
}

/** A signed reward difference to 3 decimals, e.g. +0.150. */
function signed3(x: number): string {
  return `${x >= 0 ? "+" : ""}${x.toFixed(3)}`;
}

/**
 * The one rule when a criterion's governing test and its printed interval disagree about 0
 * (docs/verdict.md), shared by the reward and the downstream criteria: the test governs "excludes
 * 0" (it is deterministic; the reward's CI is a seeded bootstrap that moves with the seed, issue 21),
 * the verdict follows it, and the reason names the disagreement. The interval excludes 0 when
 * lower > 0 or upper < 0. With no test (rejects null/undefined) the interval decides alone.
 * Returns whether 0 is excluded, and "" or the words naming the disagreement.
 */
export function governedExcludesZero(
  ci: { lower: number; upper: number },
  rejects: boolean | null | undefined,
  names: { interval: string; test: string },
): { excludes: boolean; disagreement: string } {
  const ciExcludes = ci.lower > 0 || ci.upper < 0;
  if (rejects === null || rejects === undefined || rejects === ciExcludes) return { excludes: rejects ?? ciExcludes, disagreement: "" };
  return {
    excludes: rejects,
    disagreement: `the ${names.interval} ${ciExcludes ? "excludes" : "includes"} 0 but the ${names.test} (which governs) ${rejects ? "rejects" : "does not reject"} it`,
  };
}

const POINT_GATE = "PASS is a point-estimate gate with an interval excluding 0";

export function judgeReward(r: RewardEvidence | null): CriterionResult {
  if (!r) return { verdict: "INCONCLUSIVE", reason: "the run has no held-out start/end reward (run.json result)" };
  const absolute = r.endMean - r.startMean;
  const prompts = r.scorablePrompts ?? r.numPrompts;
  const scorable =
    r.scorablePrompts !== undefined && r.scorablePrompts !== null && r.scorablePrompts !== r.numPrompts ? ` (${r.scorablePrompts} scorable)` : "";
  const size = `${r.numPrompts} prompt${r.numPrompts === 1 ? "" : "s"}${scorable} x ${r.samplesPerPrompt}`;
  if (prompts < MIN_HELDOUT_PROMPTS) {
    return {
      verdict: "INCONCLUSIVE",
      reason:
        `held-out reward ${r.startMean.toFixed(3)} -> ${r.endMean.toFixed(3)} (absolute ${signed3(absolute)}) on ${size}: ` +
        `too few scorable prompts to carry a CI (the reward criterion needs >= ${MIN_HELDOUT_PROMPTS}; raise held_out.num_prompts)`,
    };
  }
  if (!Number.isFinite(r.relativeChange)) {
    return {
      verdict: "INCONCLUSIVE",
      reason: `step-0 held-out reward is ${r.startMean.toFixed(3)}: the relative change is undefined (end ${r.endMean.toFixed(3)}, absolute ${signed3(absolute)}, ${size})`,
    };
  }
  const testText = r.test && r.p !== undefined && r.p !== null ? `; ${r.test} on the per-prompt end - start p=${r.p.toPrecision(2)}` : "";
  const est =
    `held-out reward ${r.startMean.toFixed(3)} -> ${r.endMean.toFixed(3)}, absolute ${signed3(absolute)}, relative ${pct(r.relativeChange)} ` +
    `(95% CI ${pct(r.relativeChangeCiLow)} to ${pct(r.relativeChangeCiHigh)}, ${size}${testText})`;
  if (Number.isNaN(r.relativeChangeCiLow) || Number.isNaN(r.relativeChangeCiHigh)) return { verdict: "INCONCLUSIVE", reason: `${est}: the CI is undefined` };
  const need = pct(REWARD_MIN_RELATIVE_CHANGE, 0);
  if (r.relativeChangeCiHigh < REWARD_MIN_RELATIVE_CHANGE)
    return { verdict: "FAIL", reason: `${est}: CI upper bound ${pct(r.relativeChangeCiHigh)} < ${need}` };
  // the deterministic test governs "excludes 0" when there is one; the seeded CI only describes
  const zero = governedExcludesZero({ lower: r.relativeChangeCiLow, upper: r.relativeChangeCiHigh }, r.rejects, { interval: "CI", test: r.test ?? "test" });
  const note = zero.disagreement ? `; ${zero.disagreement}` : "";
  if (zero.excludes && r.relativeChangeCiLow >= REWARD_MIN_RELATIVE_CHANGE)
    return { verdict: "CONFIRMED", reason: `${est}: the CI's lower bound clears ${need}${note}` };
  const oc =
    r.pPassAtThreshold === undefined || r.pPassAtThreshold === null ? "" : `; P(PASS | true ${need}) = ${r.pPassAtThreshold.toFixed(2)} at ${prompts} prompts`;
  const which = r.rejects === undefined || r.rejects === null ? "the CI" : `the ${r.test} (which governs)`;
  if (r.relativeChange >= REWARD_MIN_RELATIVE_CHANGE && zero.excludes) {
    return { verdict: "PASS", reason: `${est}: >= ${need} and ${which} excludes 0 (${POINT_GATE}${oc})${note}` };
  }
  if (zero.disagreement) return { verdict: "INCONCLUSIVE", reason: `${est}: ${zero.disagreement}${oc}` };
  if (r.relativeChange >= REWARD_MIN_RELATIVE_CHANGE) return { verdict: "INCONCLUSIVE", reason: `${est}: >= ${need} but ${which} does not exclude 0` };
  return { verdict: "INCONCLUSIVE", reason: `${est}: below ${need} but the CI reaches ${pct(r.relativeChangeCiHigh)}` };
}

export function downstreamCriterion(d: DownstreamEvidence | null): CriterionResult {
  if (!d) return { verdict: "INCONCLUSIVE", reason: "no base-vs-adapter comparison on the test split (run `agent eval <run_id>`)" };
  if (!Number.isFinite(d.meanDiff)) return { verdict: "INCONCLUSIVE", reason: `n=${d.n} paired task(s): too few for a difference and its CI` };
  const need = pp(DOWNSTREAM_MIN_DELTA, 0);
  const test = d.test ?? "the interval";
  const testText = d.p === undefined || d.p === null ? "" : `; ${test} p=${d.p.toPrecision(2)}`;
  const est = `${d.contrast ?? "adapter - base"} ${pp(d.meanDiff)} (95% CI ${pp(d.lower)} to ${pp(d.upper)}, ${d.method}${testText}; n=${d.n}; base from ${d.baseSource})`;
  const reqN = d.requiredN === null ? "" : `; required n=${d.requiredN} for the observed delta`;
  const mde = d.mde === null ? "" : `; MDE at n=${d.n} is ${pp(d.mde).replace("+", "")}`;
  const oc =
    d.pPassAtThreshold === undefined || d.pPassAtThreshold === null
      ? ""
      : `; P(PASS | true delta = ${need}) = ${d.pPassAtThreshold.toFixed(2)} at n=${d.n}${d.powerMethod ? ` (${d.powerMethod})` : ""}`;
  if (d.n < MIN_MILESTONE_TASKS) {
    return { verdict: "INCONCLUSIVE", reason: `n=${d.n} < ${MIN_MILESTONE_TASKS} test tasks the milestone needs; ${est}${reqN}${oc}` };
  }
  if (Number.isNaN(d.lower) || Number.isNaN(d.upper)) return { verdict: "INCONCLUSIVE", reason: `${est}: the CI is undefined` };
  if (d.upper < DOWNSTREAM_MIN_DELTA) return { verdict: "FAIL", reason: `${est}: CI upper bound ${pp(d.upper)} < ${need}` };
  const zero = governedExcludesZero(d, d.rejects, { interval: d.method, test });
  const rejects = zero.excludes;
  const note = zero.disagreement ? `; ${zero.disagreement}` : "";
  if (!rejects && zero.disagreement) return { verdict: "INCONCLUSIVE", reason: `${est}: ${zero.disagreement}${oc}` };
  // per-task means that all moved by the same amount give a t interval of width 0: it bounds
  // nothing, so it cannot confirm; the governing test (exact sign test) may still say PASS
  const zeroWidth = d.lower === d.upper;
  if (rejects && d.lower >= DOWNSTREAM_MIN_DELTA && !zeroWidth)
    return { verdict: "CONFIRMED", reason: `${est}: the CI's lower bound clears ${need} (${test} governs)` };
  const noWidth = zeroWidth
    ? "; the interval has zero width (every task's difference is the same, no spread): it bounds nothing, so it cannot confirm; " +
      "more samples per task or more tasks would give it a width"
    : "";
  if (d.meanDiff >= DOWNSTREAM_MIN_DELTA && rejects) {
    return { verdict: "PASS", reason: `${est}: >= ${need} and the ${test} rejects 0 (${POINT_GATE}${oc})${note}${noWidth}` };
  }
  if (!rejects) {
    const power = d.requiredN !== null && d.requiredN > d.n ? `n=${d.n} < required n=${d.requiredN} for the observed delta` : `the CI includes 0`;
    return { verdict: "INCONCLUSIVE", reason: `${power}: ${est}${mde}${oc}` };
  }
  return { verdict: "INCONCLUSIVE", reason: `${est}: below ${need} but the CI reaches ${pp(d.upper)}${mde}${oc}` };
}

/** The words a gated verdict carries, everywhere it is printed. */
export const GATED = "GATED on baseline.json";

/** "PASS", or "INCONCLUSIVE (GATED on baseline.json)": the verdict as every headline prints it. */
export function verdictLabel(m: Pick<MilestoneVerdict, "verdict" | "gated">): string {
  return `${m.verdict}${m.gated ? ` (${GATED})` : ""}`;
}

/** The reason to print after `verdictLabel`: a gated reason without its leading "GATED on
 *  baseline.json: " (the label already says it), any other reason as it is. */
export function reasonAfterLabel(m: Pick<MilestoneVerdict, "gated" | "reason">): string {
  return m.gated && m.reason.startsWith(`${GATED}: `) ? m.reason.slice(GATED.length + 2) : m.reason;
}

/** "milestone: PASS", with "(GATED on baseline.json)" when the baseline did not match (verdictLabel). */
export function milestoneLine(m: Pick<MilestoneVerdict, "verdict" | "gated">): string {
  return `milestone: ${verdictLabel(m)}`;
}

/** The `agent baseline set` of an eval's task file and base: bare for the AML file on the default
 *  model; --tasks F for another file (its embedded model is then the default); --base-model M for
 *  any other base. */
export function baselineSetCommand(taskFile: string, baseModel: string): string {
  const aml = /(^|\/)agent-evals\/tasks\/aml_typology\.jsonl$/.test(taskFile);
  const tasks = aml ? "" : ` --tasks ${taskFile}`;
  const base = parseBaseModel(baseModel);
  const rel = base.kind === "embedded" ? base.path : null;
  const ownEmbedded = base.kind === "default" ? aml : rel !== null && !aml && (taskFile.endsWith(rel) || rel.endsWith(taskFile));
  return `agent baseline set${tasks}${ownEmbedded ? "" : ` --base-model ${baseModel === "" ? '""' : baseModel}`}`;
}

export function judgeMilestone(input: MilestoneInput): MilestoneVerdict {
  const reward: CriterionResult = input.rewardNotApplicable
    ? { verdict: "INCONCLUSIVE", reason: `not applicable: ${input.rewardNotApplicable}` }
    : judgeReward(input.reward);
  const downstream: CriterionResult = input.adapterChanged ? { verdict: "INCONCLUSIVE", reason: input.adapterChanged } : downstreamCriterion(input.downstream);
  const parts = (pred: (c: CriterionResult) => boolean) =>
    [
      ["reward", reward],
      ["downstream", downstream],
    ]
      .filter(([, c]) => pred(c as CriterionResult))
      .map(([name, c]) => `${name}: ${(c as CriterionResult).reason}`)
      .join("; ");
  if (input.adapterChanged) return { verdict: "INCONCLUSIVE", gated: false, reason: `downstream: ${input.adapterChanged}`, reward, downstream };
  if (input.baseline.status === "missing" || input.baseline.status === "mismatch") {
    const file = input.baselineFile ?? "agent-evals/baseline.json";
    const why =
      input.baseline.status === "missing"
        ? `${file} is missing (run \`${input.baselineCommand ?? "agent baseline set"}\`)`
        : `${file} does not match this eval (${input.baseline.reasons.join("; ")})`;
    return { verdict: "INCONCLUSIVE", gated: true, reason: `${GATED}: ${why}`, reward, downstream };
  }
  if (reward.verdict === "FAIL" || downstream.verdict === "FAIL") {
    return { verdict: "FAIL", gated: false, reason: parts((c) => c.verdict === "FAIL"), reward, downstream };
  }
  if (reward.verdict === "CONFIRMED" && downstream.verdict === "CONFIRMED") {
    return { verdict: "CONFIRMED", gated: false, reason: parts(() => true), reward, downstream };
  }
  const passed = (c: CriterionResult) => c.verdict === "PASS" || c.verdict === "CONFIRMED";
  if (passed(reward) && passed(downstream)) {
    return { verdict: "PASS", gated: false, reason: parts(() => true), reward, downstream };
  }
  return { verdict: "INCONCLUSIVE", gated: false, reason: parts((c) => c.verdict === "INCONCLUSIVE"), reward, downstream };
}
