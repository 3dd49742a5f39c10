/**
 * The verdict, computed once: from run.json (the held-out per-prompt scores), eval.json (the
 * per-task scores) and baseline.json, every number the milestone and the report use. The report
 * renders a Verdict, `agent report` and `agent demo` print its headline, and `agent eval` prints
 * its decision interval (judgeDownstream), so all three show the same numbers.
 *
 * - Reward half: reward.ts, from the per-prompt scores (equal to the sidecar's by `make parity`).
 * - Downstream half: the adapter's per-task scores paired with baseline.json's when it matches
 *   the eval (model, task set, grader, decoding, seed, tasks), else with the eval's own base
 *   variant, and then the verdict is GATED on baseline.json. compare.ts computes the comparison
 *   (decision interval and governing test, required n, MDE, template-clustered SE).
 * - The rules: milestone.ts. docs/verdict.md explains them for a reader.
 */
import type { Run } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { matchBaseline, type Baseline, type BaselineMatch } from "../eval/baseline.js";
import { ADAPTER_VARIANT } from "../eval/evaluate.js";
import { scoresOf } from "../eval/grading.js";
import { operatingCharacteristic, requiredNForDelta } from "../eval/stats.js";
import { CI_METHOD, compareScores, type Comparison, type Decision } from "./compare.js";
import type { EvalLog } from "./eval-log.js";
import {
  DOWNSTREAM_MIN_DELTA,
  MIN_HELDOUT_PROMPTS,
  judgeMilestone,
  pp,
  verdictLabel,
  type DownstreamEvidence,
  type MilestoneVerdict,
  type RewardEvidence,
} from "./milestone.js";
import { rewardEvidence } from "./reward.js";

// ---------------------------------------------------------------------------------------------
// The downstream half

/** The comparison the milestone judges: which base scores, and how they compare. */
export interface JudgedComparison {
  baselineMatch: BaselineMatch;
  /** adapter vs the base scores the milestone uses; null without an eval with both variants */
  comparison: Comparison | null;
  /** where those base scores came from */
  baseSource: string;
  /** tasks where baseline.json and the eval's own base variant disagree (when both exist) */
  baseDisagreements: number | null;
}

/** Pair the eval's adapter with baseline.json's base scores when the baseline matches the eval,
 *  else with the eval's own base variant. `runBaseModel` judges the baseline when there is no eval. */
export function judgeDownstream(log: EvalLog | null, baseline: Baseline | null, runBaseModel = ""): JudgedComparison {
  const adapter = log?.variants.find((v) => v.name === ADAPTER_VARIANT) ?? null;
  const evalBase = log?.variants.find((v) => v.name === "base") ?? null;
  let baselineMatch: BaselineMatch;
  if (log && adapter) {
    baselineMatch = matchBaseline(baseline, { model: log.model, taskSet: log.taskSet, settings: log.settings, taskIds: Object.keys(adapter.perTask) });
  } else if (!baseline) {
    baselineMatch = { status: "missing" };
  } else {
    baselineMatch =
      baseline.model.requested === runBaseModel
        ? { status: "match" }
        : { status: "mismatch", reasons: [`model: baseline ${JSON.stringify(baseline.model.requested)}, run ${JSON.stringify(runBaseModel)}`] };
  }
  const out: JudgedComparison = { baselineMatch, comparison: null, baseSource: "", baseDisagreements: null };
  if (!log || !adapter) return out;
  const cand = scoresOf(adapter.perTask);
  const templates = log.tasks ? new Map(Object.entries(log.tasks).map(([id, t]) => [id, t.template])) : undefined;
  const base =
    baselineMatch.status === "match" && baseline
      ? { perTask: baseline.perTask, label: "baseline.json", source: "baseline.json" }
      : evalBase
        ? { perTask: evalBase.perTask, label: "base (this eval)", source: "the eval's own base variant (baseline.json not usable)" }
        : null;
  if (base) {
    out.baseSource = base.source;
    out.comparison = compareScores(scoresOf(base.perTask), cand, { base: base.label, candidate: ADAPTER_VARIANT }, templates);
  }
  if (baseline && evalBase) {
    let n = 0;
    for (const [id, x] of Object.entries(evalBase.perTask)) {
      if (Object.prototype.hasOwnProperty.call(baseline.perTask, id) && baseline.perTask[id] !== x) n++;
    }
    out.baseDisagreements = n;
  }
  return out;
}

/** "+22.3 pp to +32.9 pp": the decision interval as every printout shows it. */
export function decisionInterval(d: Pick<Decision, "lower" | "upper">): string {
  return `${pp(d.lower)} to ${pp(d.upper)}`;
}

/** The milestone's downstream evidence: the comparison's decision interval and governing test,
 *  and P(PASS) / P(CONFIRMED) at a true delta equal to the threshold at this n. */
export function downstreamEvidence(c: Comparison | null, baseSource: string): DownstreamEvidence | null {
  if (!c) return null;
  const d = c.decision;
  const oc = c.paired ? operatingCharacteristic(DOWNSTREAM_MIN_DELTA, c.paired.sdDiff, c.n, { threshold: DOWNSTREAM_MIN_DELTA }) : null;
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
    reward && reward.numPrompts >= MIN_HELDOUT_PROMPTS ? Number.isFinite(reward.relativeChangeCiLow) && reward.relativeChangeCiLow > 0 : null;
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

/** Why the reward criterion does not apply to a ranked-preference run. */
export const PREFERENCE_REWARD_NOT_APPLICABLE =
  "a ranked-preference run's held-out reward is pairwise accuracy, 0.5 by construction at step 0 (see the ranked-preference section)";

export interface VerdictInput {
  run: Run | null;
  evalLog: EvalLog | null;
  baseline: Baseline | null;
  /** a ranked-preference run: its held-out "reward" is pairwise accuracy, and the +20% criterion does not apply */
  preference: boolean;
}

export interface RunVerdict extends JudgedComparison {
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
  const judged = judgeDownstream(input.evalLog, input.baseline, input.run?.request?.baseModel ?? "");
  const reward = input.preference ? null : rewardEvidence(input.run);
  const downstream = downstreamEvidence(judged.comparison, judged.baseSource);
  const milestone = judgeMilestone({
    reward,
    rewardNotApplicable: input.preference ? PREFERENCE_REWARD_NOT_APPLICABLE : undefined,
    downstream,
    baseline: judged.baselineMatch,
  });
  return { ...judged, reward, downstream, signal: downstreamSignal(judged.comparison, reward), milestone, label: verdictLabel(milestone) };
}
