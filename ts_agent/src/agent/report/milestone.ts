/**
 * The milestone verdict (DESIGN.md): end reward >= +20% over step-0 on the fixed held-out prompts,
 * AND a downstream delta (adapter - base, test split, paired by task id) >= +5 percentage points
 * with a 95% CI that excludes 0, judged on at least 200 test tasks. A missing or mismatching
 * baseline.json gates the verdict.
 *
 * Rules, in the order applied (each criterion is PASS, FAIL or INCONCLUSIVE):
 *   reward     no held-out result, or relative change / CI not finite  -> INCONCLUSIVE
 *              CI upper < +20%                                          -> FAIL
 *              relative change >= +20% and CI lower > 0                 -> PASS
 *              otherwise                                                -> INCONCLUSIVE
 *   downstream no paired comparison (no eval, or n < 2 pairs)          -> INCONCLUSIVE
 *              n < 200 tasks                                            -> INCONCLUSIVE
 *              CI upper < +5 pp                                         -> FAIL
 *              delta >= +5 pp and CI lower > 0                          -> PASS
 *              otherwise                                                -> INCONCLUSIVE
 *   overall    baseline missing or mismatching                          -> INCONCLUSIVE, "GATED on baseline.json"
 *              any criterion FAIL                                       -> FAIL
 *              both PASS                                                -> PASS
 *              otherwise                                                -> INCONCLUSIVE
 * Every verdict carries its reason in words and numbers.
 *
 * Units: the reward criterion is a relative change as a FRACTION (0.2 = +20%); the downstream
 * criterion works in FRACTIONS internally (0.05) and speaks percentage points in its reasons.
 */
import type { BaselineMatch } from "../eval/baseline.js";

/** End held-out reward must be at least this relative change over step 0 (fraction: +20%). */
export const REWARD_MIN_RELATIVE_CHANGE = 0.2;
/** Downstream adapter - base must be at least this, in percentage points. */
export const DOWNSTREAM_MIN_DELTA_PP = 5;
/** The same threshold as a fraction of tasks. */
export const DOWNSTREAM_MIN_DELTA = DOWNSTREAM_MIN_DELTA_PP / 100;
/** The eval behind the verdict must cover at least this many test tasks. */
export const MIN_MILESTONE_TASKS = 200;

export type Verdict = "PASS" | "FAIL" | "INCONCLUSIVE";

export interface CriterionResult {
  verdict: Verdict;
  reason: string;
}

/** The held-out reward numbers from run.json's RunResult. */
export interface RewardEvidence {
  startMean: number;
  endMean: number;
  /** (end - start) / |start|, fraction */
  relativeChange: number;
  ciLow: number;
  ciHigh: number;
  numPrompts: number;
  samplesPerPrompt: number;
}

/** The paired downstream comparison, all FRACTIONS except n. */
export interface DownstreamEvidence {
  n: number;
  /** mean(adapter - base) */
  delta: number;
  ciLow: number;
  ciHigh: number;
  /** name of the CI method, e.g. "paired percentile bootstrap, 10000 resamples" */
  ciMethod: string;
  /** pairs needed to detect `delta` (alpha .05, power .8); null when undefined */
  requiredN: number | null;
  /** minimum detectable effect at n (fraction); null when undefined */
  mde: number | null;
  /** where the base scores came from */
  baseSource: string;
}

export interface MilestoneInput {
  reward: RewardEvidence | null;
  downstream: DownstreamEvidence | null;
  baseline: BaselineMatch;
}

export interface MilestoneVerdict {
  verdict: Verdict;
  /** true when baseline.json is missing or does not match: the verdict is INCONCLUSIVE for that reason */
  gated: boolean;
  reason: string;
  reward: CriterionResult;
  downstream: CriterionResult;
}

/** +12.3% from a fraction 0.123. */
export function pct(fraction: number, digits = 1): string {
  const v = fraction * 100;
  return `${v >= 0 ? "+" : ""}${v.toFixed(digits)}%`;
}

/** +4.2 pp from a fraction 0.042. */
export function pp(fraction: number, digits = 1): string {
  const v = fraction * 100;
  return `${v >= 0 ? "+" : ""}${v.toFixed(digits)} pp`;
}

export function judgeReward(r: RewardEvidence | null): CriterionResult {
  if (!r) return { verdict: "INCONCLUSIVE", reason: "the run has no held-out start/end reward (run.json result)" };
  if (!Number.isFinite(r.relativeChange)) {
    return {
      verdict: "INCONCLUSIVE",
      reason: `step-0 held-out reward is ${r.startMean.toFixed(3)}: the relative change is undefined (end ${r.endMean.toFixed(3)})`,
    };
  }
  const est = `held-out reward ${r.startMean.toFixed(3)} -> ${r.endMean.toFixed(3)}, ${pct(r.relativeChange)} (95% CI ${pct(r.ciLow)} to ${pct(r.ciHigh)}, ${r.numPrompts} prompts x ${r.samplesPerPrompt})`;
  if (!Number.isFinite(r.ciLow) || !Number.isFinite(r.ciHigh)) {
    return { verdict: "INCONCLUSIVE", reason: `${est}: the CI is undefined` };
  }
  const need = pct(REWARD_MIN_RELATIVE_CHANGE, 0);
  if (r.ciHigh < REWARD_MIN_RELATIVE_CHANGE) return { verdict: "FAIL", reason: `${est}: CI upper bound ${pct(r.ciHigh)} < ${need}` };
  if (r.relativeChange >= REWARD_MIN_RELATIVE_CHANGE && r.ciLow > 0) {
    return { verdict: "PASS", reason: `${est}: >= ${need} and the CI excludes 0` };
  }
  if (r.relativeChange >= REWARD_MIN_RELATIVE_CHANGE) return { verdict: "INCONCLUSIVE", reason: `${est}: >= ${need} but the CI includes 0` };
  return { verdict: "INCONCLUSIVE", reason: `${est}: below ${need} but the CI reaches ${pct(r.ciHigh)}` };
}

export function judgeDownstream(d: DownstreamEvidence | null): CriterionResult {
  if (!d) return { verdict: "INCONCLUSIVE", reason: "no base-vs-adapter comparison on the test split (run `agent eval <run_id>`)" };
  if (!Number.isFinite(d.delta)) return { verdict: "INCONCLUSIVE", reason: `n=${d.n} paired task(s): too few for a difference and its CI` };
  const need = pp(DOWNSTREAM_MIN_DELTA, 0);
  const est = `adapter - base ${pp(d.delta)} (95% CI ${pp(d.ciLow)} to ${pp(d.ciHigh)}, ${d.ciMethod}; n=${d.n}; base from ${d.baseSource})`;
  const reqN = d.requiredN === null ? "" : `; required n=${d.requiredN} for the observed delta`;
  const mde = d.mde === null ? "" : `; MDE at n=${d.n} is ${pp(d.mde).replace("+", "")}`;
  if (d.n < MIN_MILESTONE_TASKS) {
    return { verdict: "INCONCLUSIVE", reason: `n=${d.n} < ${MIN_MILESTONE_TASKS} test tasks the milestone needs; ${est}${reqN}` };
  }
  if (!Number.isFinite(d.ciLow) || !Number.isFinite(d.ciHigh)) return { verdict: "INCONCLUSIVE", reason: `${est}: the CI is undefined` };
  if (d.ciHigh < DOWNSTREAM_MIN_DELTA) return { verdict: "FAIL", reason: `${est}: CI upper bound ${pp(d.ciHigh)} < ${need}` };
  if (d.delta >= DOWNSTREAM_MIN_DELTA && d.ciLow > 0) return { verdict: "PASS", reason: `${est}: >= ${need} and the CI excludes 0` };
  if (d.ciLow <= 0) {
    const power = d.requiredN !== null && d.requiredN > d.n ? `n=${d.n} < required n=${d.requiredN} for the observed delta` : `the CI includes 0`;
    return { verdict: "INCONCLUSIVE", reason: `${power}: ${est}${mde}` };
  }
  return { verdict: "INCONCLUSIVE", reason: `${est}: below ${need} but the CI reaches ${pp(d.ciHigh)}${mde}` };
}

export function judgeMilestone(input: MilestoneInput): MilestoneVerdict {
  const reward = judgeReward(input.reward);
  const downstream = judgeDownstream(input.downstream);
  const parts = (pred: (c: CriterionResult) => boolean) =>
    [
      ["reward", reward],
      ["downstream", downstream],
    ]
      .filter(([, c]) => pred(c as CriterionResult))
      .map(([name, c]) => `${name}: ${(c as CriterionResult).reason}`)
      .join("; ");
  if (input.baseline.status !== "match") {
    const why =
      input.baseline.status === "missing"
        ? "agent-evals/baseline.json is missing (run `agent baseline set`)"
        : `agent-evals/baseline.json does not match this eval (${input.baseline.reasons.join("; ")})`;
    return { verdict: "INCONCLUSIVE", gated: true, reason: `GATED on baseline.json: ${why}`, reward, downstream };
  }
  if (reward.verdict === "FAIL" || downstream.verdict === "FAIL") {
    return { verdict: "FAIL", gated: false, reason: parts((c) => c.verdict === "FAIL"), reward, downstream };
  }
  if (reward.verdict === "PASS" && downstream.verdict === "PASS") {
    return { verdict: "PASS", gated: false, reason: parts(() => true), reward, downstream };
  }
  return { verdict: "INCONCLUSIVE", gated: false, reason: parts((c) => c.verdict === "INCONCLUSIVE"), reward, downstream };
}
