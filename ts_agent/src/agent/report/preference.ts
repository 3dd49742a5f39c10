/**
 * A ranked-preference run's held-out numbers (its "reward" is pairwise accuracy): start and end
 * pairwise accuracy with the paired change, group win rate, win margin and consistency, each
 * with an interval over its units, TRL's DPO training metrics first vs last, the held-out curve
 * per logged step (preference-curve.ts draws it) and the settings the report's top shows.
 */
import { TrainMode, type Run } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { bootstrapMeanCI, pairedBootstrapCI, wilsonInterval, type Interval } from "../core/stats/index.js";
import type { StepMetrics } from "./curve-features.js";
import { preferenceCurve, type PreferencePoint } from "./preference-curve.js";

/** A ranked-preference run's held-out numbers (its "reward" is pairwise accuracy). */
export interface PreferenceAnalysis {
  groups: number;
  startPairwise: number;
  endPairwise: number;
  endPairwiseCi: Interval;
  /** end - start pairwise accuracy, paired percentile bootstrap over groups */
  change: number;
  changeCi: Interval | null;
  groupWinRate: number | null;
  /** percentile bootstrap over the groups' wins (ties as their expectation); Wilson (ties rounded)
   *  for a run from a sidecar that did not send the per-group values */
  groupWinRateCi: Interval | null;
  groupWinRateMethod: string;
  winMargin: number | null;
  /** percentile bootstrap over the groups' margins */
  winMarginCi: Interval | null;
  consistency: number | null;
  /** percentile bootstrap over the consistency prompts' sds */
  consistencyCi: Interval | null;
  /** TRL's DPO training metrics, first vs last logged step */
  trainCurve: Array<{ key: string; first: number; last: number; steps: number }>;
  /** held-out pairwise accuracy (and the training batch's) per logged step: the run's own curve */
  curve: PreferencePoint[];
  beta: number;
  /** the settings line of the report's top: what a ranked-preference run is trained with */
  settings: Array<[string, string]>;
}

/** The knobs a ranked-preference run trains with (DPO's beta, not GRPO's G / beta / max_completion_length). */
function preferenceSettings(run: Run, groups: number): Array<[string, string]> {
  const g = run.request?.grpo;
  const p = run.request?.preference;
  const opt = (x: number | bigint | undefined) => (x === undefined ? "-" : String(x));
  return [
    ["beta", String(p?.beta ?? 0.1)],
    ["lr", opt(g?.learningRate)],
    ["max_steps", opt(g?.maxSteps)],
    ["batch", opt(g?.perDeviceTrainBatchSize)],
    ["held-out groups", groups > 0 ? String(groups) : opt(p?.numHeldOutGroups)],
  ];
}

export function isPreferenceRun(run: Run | null): boolean {
  return run?.request?.mode === TrainMode.RANKED_PREFERENCE;
}

/** The ranked-preference section's numbers, from run.json and the logged steps. */
export function preferenceAnalysis(run: Run | null, steps: ReadonlyArray<StepMetrics>): PreferenceAnalysis | null {
  if (!isPreferenceRun(run)) return null;
  const r = run!.result;
  const start = r?.startReward;
  const end = r?.endReward;
  const pm = r?.preferenceMetrics;
  const groups = end?.numPrompts ?? 0;
  let changeCi: Interval | null = null;
  if (start && end && start.perPrompt.length === end.perPrompt.length && start.perPrompt.length >= 2) {
    const a = [...start.perPrompt];
    const b = [...end.perPrompt];
    if (a.every(Number.isFinite) && b.every(Number.isFinite)) changeCi = pairedBootstrapCI(a, b, { resamples: 2000, seed: 0 });
  }
  let winCi: Interval | null = null;
  let winMethod = "";
  const unitCi = (xs: ReadonlyArray<number> | undefined): Interval | null => (xs && xs.length >= 2 ? bootstrapMeanCI(xs, { seed: 0, resamples: 2000 }) : null);
  if (pm && pm.perGroupWin.length >= 2) {
    winCi = unitCi(pm.perGroupWin);
    winMethod = `percentile bootstrap over ${pm.perGroupWin.length} groups, 2000 resamples, seed 0`;
  } else if (pm && groups > 0 && Number.isFinite(pm.groupWinRate)) {
    const w = wilsonInterval(Math.min(groups, Math.max(0, Math.round(pm.groupWinRate * groups))), groups);
    winCi = { lower: w.lower, upper: w.upper };
    winMethod = `Wilson over ${groups} groups, ties rounded`;
  }
  const trainCurve: PreferenceAnalysis["trainCurve"] = [];
  for (const key of ["rewards/accuracies", "rewards/margins", "loss"]) {
    const xs = steps.map((s) => s.metrics[key]).filter((x): x is number => typeof x === "number" && Number.isFinite(x));
    if (xs.length > 0) trainCurve.push({ key, first: xs[0], last: xs[xs.length - 1], steps: xs.length });
  }
  return {
    groups,
    startPairwise: start?.mean ?? NaN,
    endPairwise: end?.mean ?? NaN,
    endPairwiseCi: { lower: end?.ciLow ?? NaN, upper: end?.ciHigh ?? NaN },
    change: (end?.mean ?? NaN) - (start?.mean ?? NaN),
    changeCi,
    groupWinRate: pm ? pm.groupWinRate : null,
    groupWinRateCi: winCi,
    groupWinRateMethod: winMethod,
    winMargin: pm ? pm.winMargin : null,
    winMarginCi: unitCi(pm?.perGroupMargin),
    consistency: pm ? pm.preferenceConsistency : null,
    consistencyCi: unitCi(pm?.perPromptConsistency),
    trainCurve,
    curve: preferenceCurve(steps),
    beta: run!.request?.preference?.beta ?? 0.1,
    settings: preferenceSettings(run!, groups),
  };
}
