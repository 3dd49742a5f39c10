/**
 * The verdict, computed once: from run.json (the held-out per-prompt scores), eval.json (the
 * per-task scores) and baseline.json, every number the milestone and the report use. The report
 * renders a Verdict, `agent report` and `agent demo` print its headline, and `agent eval` prints
 * its decision interval (judgeEvalComparison), so all three show the same numbers.
 *
 * - Reward half: held-out-reward.ts, from the per-prompt scores (equal to the sidecar's by `make parity`).
 * - Downstream half: the adapter's per-task scores paired with the eval's OWN base variant, always
 *   (same load, same runtime). baseline.json is the guard against a moved baseline: the verdict is
 *   GATED when its fingerprint differs from the eval's in a field that gates (eval/fingerprint.ts,
 *   each named), or when its per-task scores disagree with the eval's own base variant more than
 *   the decoding allows (0 tasks for greedy; for sampling, the paired test must not reject 0).
 *   core/base-vs-adapter.ts computes the comparison (decision interval and governing test, required n, MDE,
 *   template-clustered SE).
 * - The eval must describe the run's adapter as it is now: an eval.json whose adapter sha256 or
 *   step differs from run.json's is refused (INCONCLUSIVE, "rerun `agent eval <run_id>`").
 * - The rules: milestone.ts. docs/verdict.md explains them for a reader.
 */
import type { Run } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { compareWithBaseline, evalTaskIds, type Baseline, type BaselineMatch } from "../eval/baseline-record.js";
import { fingerprintGates, type FingerprintRow } from "../eval/fingerprint.js";
import { ADAPTER_VARIANT } from "../core/base-vs-adapter.js";
import { scoresOf } from "../eval/grading.js";
import { operatingCharacteristic, requiredNForDelta, simulatedOperatingCharacteristic } from "../core/stats/index.js";
import { CI_METHOD, compareScores, sliceBreakdown, type Comparison, type Decision, type SliceComparison } from "../core/base-vs-adapter.js";
import type { EvalLog, LoggedTask, TaskSetRef, VariantSummary } from "../core/eval-log.js";
import {
  DOWNSTREAM_MIN_DELTA,
  MIN_HELDOUT_PROMPTS,
  baselineSetCommand,
  downstreamCriterion,
  judgeMilestone,
  pp,
  verdictLabel,
  type CriterionResult,
  type DownstreamEvidence,
  type MilestoneVerdict,
  type RewardEvidence,
} from "./milestone.js";
import { rewardEvidence } from "./held-out-reward.js";

// ---------------------------------------------------------------------------------------------
// The downstream half

/** baseline.json's per-task scores against the eval's own base variant, on the tasks both hold. */
export interface BaseConsistency {
  /** tasks both hold */
  compared: number;
  /** task ids whose per-task score differs, in id order */
  disagreeing: string[];
  /** what the decoding allows, in words */
  allowed: string;
  /** the disagreement exceeds what the decoding allows: the verdict is GATED */
  gates: boolean;
  /** one sentence naming the count and the first few ids */
  text: string;
}

/** How many disagreeing task ids a sentence names before "+N more". */
const IDS_SHOWN = 5;

/** Greedy decoding is deterministic, so the same model and prompts give the same scores: no
 *  task may disagree. With sampling, a task may, but the two must not differ as a whole: the
 *  governing paired test of baseline.json vs the eval's base must not reject 0. */
export function baseConsistency(
  baselinePerTask: Record<string, number | null>,
  evalBasePerTask: Record<string, number | null>,
  greedy: boolean,
): BaseConsistency {
  const ids = Object.keys(evalBasePerTask)
    .filter((id) => Object.prototype.hasOwnProperty.call(baselinePerTask, id))
    .sort();
  const disagreeing = ids.filter((id) => baselinePerTask[id] !== evalBasePerTask[id]);
  let gates: boolean;
  let allowed: string;
  if (greedy) {
    allowed = "0 with greedy decoding";
    gates = disagreeing.length > 0;
  } else {
    const pick = (m: Record<string, number | null>) => Object.fromEntries(ids.map((id) => [id, m[id]]));
    const c = compareScores(scoresOf(pick(baselinePerTask)), scoresOf(pick(evalBasePerTask)), { base: "baseline.json", candidate: "base (this eval)" });
    const d = c.decision;
    allowed = `no systematic difference with sampling (${d ? `${d.test}${d.p === null ? "" : ` p=${d.p.toPrecision(2)}`}` : "no test"})`;
    gates = disagreeing.length > 0 && !!d && d.rejects;
  }
  const shown = disagreeing.slice(0, IDS_SHOWN).join(", ") + (disagreeing.length > IDS_SHOWN ? `, ... (+${disagreeing.length - IDS_SHOWN} more)` : "");
  const text =
    `baseline.json and this eval's own base variant disagree on ${disagreeing.length} of ${ids.length} task(s) (allowed: ${allowed})` +
    (disagreeing.length ? `: ${shown}` : "");
  return { compared: ids.length, disagreeing, allowed, gates, text };
}

/** One split of an eval compared: its own base vs its adapter, overall and per slice. */
export interface SplitComparison {
  taskSet: TaskSetRef;
  variants: VariantSummary[];
  /** null without both variants */
  comparison: Comparison | null;
  /** adapter vs base per slice, Holm-adjusted across slices (none without slice values) */
  bySlice: SliceComparison[];
}

/** The labels every eval split's comparison carries. */
const EVAL_LABELS = { base: "base (this eval)", candidate: ADAPTER_VARIANT };

/** A split's base vs adapter from its variants' per-task scores and its tasks (for the templates
 *  of the clustered SE, only when every task has one, and the slices). The one computation of an
 *  eval's comparison: eval.json stores none (core/eval-log.ts). */
export function compareSplit(
  split: { taskSet: TaskSetRef; variants: VariantSummary[] },
  tasks: ReadonlyArray<Pick<LoggedTask, "template" | "slice"> & { id: string }>,
): SplitComparison {
  const base = split.variants.find((v) => v.name === "base");
  const adapter = split.variants.find((v) => v.name === ADAPTER_VARIANT);
  if (!base || !adapter) return { taskSet: split.taskSet, variants: split.variants, comparison: null, bySlice: [] };
  // no clustered SE for a task set without templates (docs/tasks.md)
  const templates = tasks.length > 0 && tasks.every((t) => t.template !== undefined) ? new Map(tasks.map((t) => [t.id, t.template!])) : undefined;
  const [b, a] = [scoresOf(base.perTask), scoresOf(adapter.perTask)];
  return { taskSet: split.taskSet, variants: split.variants, comparison: compareScores(b, a, EVAL_LABELS, templates), bySlice: sliceBreakdown(b, a, tasks) };
}

/** The log's splits compared: the evaluated split first, then the held-out-template one when the
 *  eval has it. Each split's slices come from its own logged tasks. */
export function compareSplits(log: EvalLog): SplitComparison[] {
  const logged = Object.entries(log.tasks ?? {}).map(([id, t]) => ({ ...t, id }));
  const held = log.heldOutTemplate;
  return [log, ...(held ? [held] : [])].map((s) =>
    compareSplit(
      s,
      logged.filter((t) => t.split === s.taskSet.split),
    ),
  );
}

/** The comparison the milestone judges (adapter vs the eval's own base) and baseline.json's guard. */
export interface JudgedComparison {
  baselineMatch: BaselineMatch;
  /** adapter vs the eval's own base variant; null without an eval with both variants (splits[0]'s) */
  comparison: Comparison | null;
  /** every split of the eval compared (compareSplits; none without an eval) */
  splits: SplitComparison[];
  /** where those base scores came from */
  baseSource: string;
  /** tasks where baseline.json and the eval's own base variant disagree (when both exist) */
  baseDisagreements: number | null;
  /** the same, with the ids and whether it gates (when both exist) */
  consistency: BaseConsistency | null;
  /** baseline.json's fingerprint against the eval's, field by field (with both) */
  fingerprint: FingerprintRow[] | null;
}

/** The eval's own base variant vs its adapter; baseline.json judged as the guard (its fingerprint
 *  field by field, and its per-task scores against the eval's base). `runBaseModel` judges the
 *  baseline when there is no eval. */
export function judgeEvalComparison(log: EvalLog | null, baseline: Baseline | null, runBaseModel = ""): JudgedComparison {
  const adapter = log?.variants.find((v) => v.name === ADAPTER_VARIANT) ?? null;
  const evalBase = log?.variants.find((v) => v.name === "base") ?? null;
  const out: JudgedComparison = {
    baselineMatch: { status: "missing" },
    comparison: null,
    splits: [],
    baseSource: "",
    baseDisagreements: null,
    consistency: null,
    fingerprint: null,
  };
  if (log && adapter && baseline) {
    out.fingerprint = compareWithBaseline(baseline, {
      model: log.model,
      taskSet: log.taskSet,
      settings: log.settings,
      taskIds: evalTaskIds(log),
      fingerprint: log.fingerprint,
    });
    const reasons = fingerprintGates(out.fingerprint);
    if (evalBase) {
      out.consistency = baseConsistency(baseline.perTask, evalBase.perTask, log.settings.temperature === 0);
      out.baseDisagreements = out.consistency.disagreeing.length;
      if (out.consistency.gates) reasons.push(out.consistency.text);
    }
    out.baselineMatch = reasons.length ? { status: "mismatch", reasons } : { status: "match" };
  } else if (baseline) {
    out.baselineMatch =
      baseline.model.requested === runBaseModel
        ? { status: "match" }
        : { status: "mismatch", reasons: [`model.requested: ${JSON.stringify(baseline.model.requested)} vs ${JSON.stringify(runBaseModel)}`] };
  }
  if (!log) return out;
  out.splits = compareSplits(log);
  if (!adapter || !evalBase) return out;
  out.baseSource = "the eval's own base variant";
  out.comparison = out.splits[0].comparison;
  return out;
}

/** An eval judged on its own: its comparison (judgeEvalComparison) and the milestone's downstream
 *  criterion on it (GATED words when baseline.json does not match). The one judgement every eval
 *  prints, a task file's or an agent task's (`agent eval`, `agent demo`); the run's milestone
 *  (judgeRun) adds the reward criterion. */
export interface EvalJudgement {
  judged: JudgedComparison;
  downstream: CriterionResult;
}

export function judgeEval(log: EvalLog, baseline: Baseline | null): EvalJudgement {
  const judged = judgeEvalComparison(log, baseline);
  return { judged, downstream: downstreamCriterion(downstreamEvidence(judged.comparison, judged.baseSource)) };
}

// ---------------------------------------------------------------------------------------------
// The adapter the eval scored

/** The run's adapter file, as run.json lists it. */
export const ADAPTER_WEIGHTS = "adapter/adapter_model.safetensors";

/** Whether eval.json scored the run's adapter as it is now (run.json). */
export interface AdapterCheck {
  status: "same" | "changed" | "not recorded";
  /** one sentence: what was compared, or why it could not be */
  text: string;
}

function short(sha: string): string {
  return sha ? `sha256 ${sha.slice(0, 12)}…` : "sha256 unknown";
}

/** eval.json's adapter (sha256, step) against run.json's result; null without both files. */
export function adapterCheck(run: Run | null, log: EvalLog | null): AdapterCheck | null {
  if (!run || !log || !log.variants.some((v) => v.name === ADAPTER_VARIANT)) return null;
  const runSha = run.result?.artifacts.find((a) => a.path === ADAPTER_WEIGHTS)?.sha256 ?? "";
  const runStep = run.result && run.result.stepsCompleted > 0n ? Number(run.result.stepsCompleted) : null;
  const ev = log.adapter;
  if (!ev || (!ev.sha256 && ev.step === null)) {
    return {
      status: "not recorded",
      text: "eval.json does not record which adapter it scored (an older eval): whether the run's adapter changed since cannot be checked",
    };
  }
  const shaDiffers = !!ev.sha256 && !!runSha && ev.sha256 !== runSha;
  const stepDiffers = ev.step !== null && runStep !== null && ev.step !== runStep;
  const evalSide = `step ${ev.step ?? "?"}, ${short(ev.sha256)}`;
  const runSide = `step ${runStep ?? "?"}, ${short(runSha)}`;
  if (shaDiffers || stepDiffers) {
    return {
      status: "changed",
      text: `eval.json scored the adapter at ${evalSide}, but run ${run.runId}'s adapter is now at ${runSide}: the eval does not describe this adapter; rerun \`agent eval ${run.runId}\``,
    };
  }
  return { status: "same", text: `eval.json scored this run's adapter (${evalSide})` };
}

/** "+22.3 pp to +32.9 pp": the decision interval as every printout shows it. */
export function decisionInterval(d: Pick<Decision, "lower" | "upper">): string {
  return `${pp(d.lower)} to ${pp(d.upper)}`;
}

/** P(PASS) / P(CONFIRMED) at a true delta equal to the threshold at the comparison's n. 0/1 scores:
 *  simulated through the real gate (stats.simulatedOperatingCharacteristic, the eval's own
 *  discordance (b + c) / n, GATE_SIMULATION_DRAWS draws, seed GATE_SIMULATION_SEED: MC SE <= 0.005);
 *  per-task means (K > 1 samples), whose gate is the paired t test: the normal approximation. */
export function powerAtThreshold(c: Comparison): { pPass: number; pConfirm: number; method: "simulated" | "normal approximation" } | null {
  const p = c.paired;
  if (!p) return null;
  if (p.discordant) {
    const s = simulatedOperatingCharacteristic(DOWNSTREAM_MIN_DELTA, (p.discordant.b + p.discordant.c) / c.n, c.n, { threshold: DOWNSTREAM_MIN_DELTA });
    return { pPass: s.pPass, pConfirm: s.pConfirm, method: "simulated" };
  }
  const oc = operatingCharacteristic(DOWNSTREAM_MIN_DELTA, p.sdDiff, c.n, { threshold: DOWNSTREAM_MIN_DELTA });
  return { pPass: oc.pPass, pConfirm: oc.pConfirm, method: "normal approximation" };
}

/** The milestone's downstream evidence: the comparison's decision interval and governing test,
 *  and P(PASS) / P(CONFIRMED) at a true delta equal to the threshold at this n. */
export function downstreamEvidence(c: Comparison | null, baseSource: string): DownstreamEvidence | null {
  if (!c) return null;
  const d = c.decision;
  const oc = powerAtThreshold(c);
  return {
    n: c.n,
    meanDiff: c.paired ? c.paired.meanDiff : NaN,
    lower: d ? d.lower : NaN,
    upper: d ? d.upper : NaN,
    method: d ? d.method : CI_METHOD,
    test: d?.test,
    p: d?.p ?? null,
    rejects: d ? d.rejects : null,
    requiredN: c.requiredN,
    mde: c.mde,
    pPassAtThreshold: oc ? oc.pPass : null,
    pConfirmAtThreshold: oc ? oc.pConfirm : null,
    powerMethod: oc?.method,
    baseSource,
  };
}

/** Pairs for 80% power at the larger of the observed |delta| and the milestone threshold (the
 *  "required n" attribution's underpowered row compares n with); null when undefined. */
export function requiredNForVerdict(c: Comparison): number | null {
  if (!c.paired || c.paired.sdDiff === 0) return null;
  const target = Math.max(Math.abs(c.paired.meanDiff), DOWNSTREAM_MIN_DELTA);
  return requiredNForDelta(target, c.paired.sdDiff);
}

// ---------------------------------------------------------------------------------------------
// What attribution reads

/** Whether the reward rose on the held-out prompts and whether the downstream delta is significant. */
export interface DownstreamSignal {
  /** held-out relative-change CI lower bound > 0; null when the run has no result (or too few prompts) */
  heldOutRose: boolean | null;
  /** downstream decision (interval and governing test) excludes 0; null when there is no eval */
  significant: boolean | null;
  /** e.g. "+3.0 pp (95% CI -1.2 to +7.1 pp), n=264" */
  text: string;
  /** paired tasks */
  n?: number | null;
  /** adapter - base (fraction) */
  meanDiff?: number | null;
  /** the decision interval (fractions) */
  lower?: number | null;
  upper?: number | null;
  /** pairs needed for 80% power at the larger of |delta| and the milestone threshold; null when unknown */
  requiredN?: number | null;
}

/** What attribution reads about the downstream comparison and the held-out reward. */
export function downstreamSignal(c: Comparison | null, reward: RewardEvidence | null): DownstreamSignal {
  const heldOutRose =
    reward && (reward.scorablePrompts ?? reward.numPrompts) >= MIN_HELDOUT_PROMPTS
      ? reward.rejects !== undefined && reward.rejects !== null
        ? reward.rejects && reward.relativeChange > 0 // the deterministic test governs, as in judgeReward
        : Number.isFinite(reward.relativeChangeCiLow) && reward.relativeChangeCiLow > 0
      : null;
  const d = c?.decision ?? null;
  if (!c || !c.paired || !d) return { heldOutRose, significant: null, text: "" };
  return {
    heldOutRose,
    significant: d.rejects && (d.lower > 0 || d.upper < 0),
    text: `${pp(c.paired.meanDiff)} (95% CI ${pp(d.lower)} to ${pp(d.upper)}, ${d.method}), n=${c.n}`,
    n: c.n,
    meanDiff: c.paired.meanDiff,
    lower: d.lower,
    upper: d.upper,
    requiredN: requiredNForVerdict(c),
  };
}

// ---------------------------------------------------------------------------------------------
// The verdict

/** A ranked-preference run's own baseline: its held-out groups at step 0, scored by the reference
 *  policy (the base model). baseline.json holds a task file's test split, which such a run is not
 *  judged on (issue 32, item 6: it was GATED on a missing baseline.json and advised evaluating the
 *  AML model). */
export function preferenceBaseline(run: Run | null): string {
  const groups = run?.result?.startReward?.numPrompts ?? 0;
  const base = run?.request?.baseModel || "the embedded default model";
  return `step 0 of its ${groups} held-out groups (the reference policy: ${base}); baseline.json is not what a ranked-preference run is judged on`;
}

/** Why the reward criterion does not apply to a ranked-preference run. */
export const PREFERENCE_REWARD_NOT_APPLICABLE =
  "a ranked-preference run's held-out reward is pairwise accuracy, 0.5 by construction at step 0 (see the ranked-preference section)";

export interface VerdictInput {
  run: Run | null;
  evalLog: EvalLog | null;
  baseline: Baseline | null;
  /** where that baseline.json is (or was looked for), for the verdict's reason */
  baselineFile?: string;
  /** a ranked-preference run: its held-out "reward" is pairwise accuracy, and the +20% criterion does not apply */
  preference: boolean;
}

export interface RunVerdict extends JudgedComparison {
  /** eval.json's adapter against run.json's; null without both */
  adapter: AdapterCheck | null;
  /** the reward criterion's evidence; null for a ranked-preference run or without a held-out result */
  reward: RewardEvidence | null;
  /** the downstream criterion's evidence, from `comparison` */
  downstream: DownstreamEvidence | null;
  /** the attribution table's view of both halves */
  signal: DownstreamSignal;
  milestone: MilestoneVerdict;
  /** "PASS" / "INCONCLUSIVE (GATED on baseline.json)" */
  label: string;
}

export function judgeRun(input: VerdictInput): RunVerdict {
  const judged = judgeEvalComparison(input.evalLog, input.baseline, input.run?.request?.baseModel ?? "");
  if (input.preference && !input.evalLog) judged.baselineMatch = { status: "own", text: preferenceBaseline(input.run) };
  const reward = input.preference ? null : rewardEvidence(input.run);
  const downstream = downstreamEvidence(judged.comparison, judged.baseSource);
  const adapter = adapterCheck(input.run, input.evalLog);
  const milestone = judgeMilestone({
    reward,
    rewardNotApplicable: input.preference ? PREFERENCE_REWARD_NOT_APPLICABLE : undefined,
    downstream,
    baseline: judged.baselineMatch,
    baselineFile: input.baselineFile,
    baselineCommand: input.evalLog ? baselineSetCommand(input.evalLog.taskSet.path, input.evalLog.model.requested) : undefined,
    adapterChanged: adapter?.status === "changed" ? adapter.text : undefined,
  });
  return { ...judged, adapter, reward, downstream, signal: downstreamSignal(judged.comparison, reward), milestone, label: verdictLabel(milestone) };
}
