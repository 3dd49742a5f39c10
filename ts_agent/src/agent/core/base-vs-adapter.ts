/**
 * The base-vs-adapter comparison (named so beside `agent compare`, which compares runs:
 * run-comparison/): candidate vs base per-task scores, paired by task id, candidate minus base
 * (stats convention d = b - a), all as FRACTIONS (0.05 = +5 percentage points; the report prints
 * pp). compareScores is the one implementation of a paired comparison of per-task scores; its
 * callers pair different things: the eval's base and adapter (verdict.ts, eval/build-eval-log.ts),
 * baseline.json's and the eval's base (verdict.ts), two checkpoints (verdict/checkpoint-selection-rule.ts), two
 * runs (run-comparison/), and each slice (sliceBreakdown here).
 *
 * The decision: for 0/1 per-task scores, Tango's score interval with the exact McNemar test
 * governing "excludes 0" (so the verdict never flips with a bootstrap seed); for per-task means
 * (K > 1 samples), the paired t interval and t test. The percentile bootstrap over tasks
 * (10 000 resamples, seed 0) and the paired t interval are shown beside it and never decide; the
 * SE clustered by narrative template is a sensitivity row.
 */
import {
  clusteredMeanSE,
  holmAdjust,
  mcnemarExactP,
  minimumDetectableEffect,
  pairedBootstrapCI,
  pairedComparison,
  requiredNForDelta,
  tangoScoreInterval,
  type BootstrapInterval,
  type ClusteredMean,
  type PairedComparison,
} from "./stats/index.js";
import type { TaskRow } from "./task-format.js";

/** Variant name of the adapter under test in an Evaluate request and in the eval log. */
export const ADAPTER_VARIANT = "adapter";
/** Variant name of the warm-started adapter a GRPO run started from (TrainRequest.init_adapter),
 *  evaluated beside the run's adapter (verdict/warm-start.ts). */
export const WARM_START_VARIANT = "warm-start";

/** Percentile-bootstrap resamples and seed for the paired CI (fixed, so reports are reproducible). */
export const BOOTSTRAP_RESAMPLES = 10_000;
export const BOOTSTRAP_SEED = 0;

export const CI_METHOD = `paired percentile bootstrap over tasks, ${BOOTSTRAP_RESAMPLES} resamples, seed ${BOOTSTRAP_SEED}`;

/** Candidate vs base, paired by task id. Every difference is candidate - base, as a FRACTION. */
export interface Comparison {
  baseLabel: string;
  candidateLabel: string;
  /** tasks with a scorable score on both sides */
  n: number;
  /** candidate tasks left out: no scorable base score, or no candidate score */
  unpaired: number;
  /** paired ids, in candidate order */
  taskIds: string[];
  /** stats.pairedComparison(base, candidate); null when n < 2 */
  paired: PairedComparison | null;
  /** percentile bootstrap CI of the mean difference (the milestone's CI); null when n < 2 */
  bootstrap: BootstrapInterval | null;
  /** pairs needed to detect the observed difference (alpha .05 two-sided, power .8); null + reason when undefined */
  requiredN: number | null;
  requiredNNote: string;
  /** minimum detectable |difference| at this n (fraction); null when n < 2 or the differences have no spread */
  mde: number | null;
  /** the interval and test the milestone decides on; null when n < 2 */
  decision: Decision | null;
  /** sensitivity row: the mean difference's SE with tasks clustered by narrative template (Miller
   *  2024) and the normal 95% interval with it; null without templates or with fewer than 2 */
  clustered: (ClusteredMean & { clusteredBy: string; lower: number; upper: number }) | null;
}

/** The decision interval for the mean difference and the test that governs "excludes 0". */
export interface Decision {
  /** e.g. "Tango score interval" */
  method: string;
  /** e.g. "exact McNemar test" */
  test: string;
  lower: number;
  upper: number;
  /** the test's two-sided p (exact McNemar, the paired t test's, or the exact sign test's when
   *  per-task means have no spread); null when every difference is 0 (no variance: nothing to test) */
  p: number | null;
  /** the test rejects a difference of 0 at alpha .05 */
  rejects: boolean;
}

/** Alpha of the governing test (two-sided), matching the 95% intervals. */
export const DECISION_ALPHA = 0.05;

/** The governing test when per-task means (K > 1 samples) differ by the same amount on every task. */
export const NO_VARIANCE_TEST = "exact sign test";
/** The governing test's name when every difference is 0: there is nothing to test. */
export const UNDEFINED_TEST = "undefined (no variance)";

/**
 * 0/1 per-task scores: Tango's score interval (its Z(0) is McNemar's z) with the exact McNemar
 * test governing whether the difference excludes 0, so a bootstrap seed can never flip it. Per-task
 * means (K > 1 samples): the paired t interval and the t test (the interval excludes 0 exactly
 * when the test rejects). When those differences have no spread, t would read certainty (p = 0 for
 * two tasks that both go 0/2 -> 1/2): all 0 leaves p undefined (null, rejects false); all the same
 * non-zero amount is judged by the exact sign test (mcnemarExactP on falls vs rises), as the
 * reward's heldOutTest does.
 */
export function decisionFor(p: PairedComparison): Decision {
  if (p.binary && p.discordant && p.mcnemarP !== null) {
    const t = tangoScoreInterval(p.discordant.b, p.discordant.c, p.n);
    return { method: "Tango score interval", test: "exact McNemar test", lower: t.lower, upper: t.upper, p: p.mcnemarP, rejects: p.mcnemarP < DECISION_ALPHA };
  }
  const interval = { method: "paired t interval", lower: p.ciT.lower, upper: p.ciT.upper };
  if (p.sdDiff === 0) {
    if (p.meanDiff === 0) return { ...interval, test: UNDEFINED_TEST, p: null, rejects: false };
    // no spread: every difference equals the mean, so all n are rises, or all n are falls
    const sign = p.meanDiff > 0 ? mcnemarExactP(0, p.n) : mcnemarExactP(p.n, 0);
    return { ...interval, test: NO_VARIANCE_TEST, p: sign, rejects: sign < DECISION_ALPHA };
  }
  return { ...interval, test: "paired t test", p: p.tTestP, rejects: p.ciT.lower > 0 || p.ciT.upper < 0 };
}

/** Pair `candidate` with `base` by task id (candidate's order) and compute every statistic. */
export function compareScores(
  base: ReadonlyMap<string, number>,
  candidate: ReadonlyMap<string, number>,
  labels: { base: string; candidate: string } = { base: "base", candidate: ADAPTER_VARIANT },
  /** task id -> narrative template, for the template-clustered SE */
  templates?: ReadonlyMap<string, string>,
  /** bootstrap: false leaves out the percentile bootstrap (a sensitivity row that never decides;
   *  selection compares many checkpoints and needs only the decision) */
  options: { bootstrap?: boolean } = {},
): Comparison {
  const a: number[] = [];
  const b: number[] = [];
  const taskIds: string[] = [];
  let unpaired = 0;
  for (const [id, y] of candidate) {
    const x = base.get(id);
    if (x === undefined || Number.isNaN(x) || Number.isNaN(y)) {
      unpaired++;
      continue;
    }
    a.push(x);
    b.push(y);
    taskIds.push(id);
  }
  const n = a.length;
  const out: Comparison = {
    baseLabel: labels.base,
    candidateLabel: labels.candidate,
    n,
    unpaired,
    taskIds,
    paired: null,
    bootstrap: null,
    requiredN: null,
    requiredNNote: "",
    mde: null,
    decision: null,
    clustered: null,
  };
  if (n < 2) {
    out.requiredNNote = `n=${n} pairs: too few for any interval`;
    return out;
  }
  out.paired = pairedComparison(a, b);
  out.bootstrap = options.bootstrap === false ? null : pairedBootstrapCI(a, b, { resamples: BOOTSTRAP_RESAMPLES, seed: BOOTSTRAP_SEED });
  out.decision = decisionFor(out.paired);
  if (templates) {
    const clusters = taskIds.map((id) => templates.get(id) ?? `(no template) ${id}`);
    if (new Set(clusters).size >= 2) {
      const d = a.map((x, i) => b[i] - x);
      const cm = clusteredMeanSE(d, clusters);
      const m = out.paired.meanDiff;
      // normal 95% interval around the mean difference with the clustered SE
      out.clustered = { ...cm, clusteredBy: "narrative template", lower: m - 1.96 * cm.se, upper: m + 1.96 * cm.se };
    }
  }
  out.mde = out.paired.sdDiff > 0 ? minimumDetectableEffect(n, out.paired.sdDiff) : null; // no spread: no MDE to speak of
  if (out.paired.meanDiff === 0) {
    out.requiredNNote = "observed difference is 0: no finite n detects it";
  } else if (out.paired.sdDiff === 0) {
    out.requiredNNote = "every pair differs by the same amount (sd of differences 0)";
    out.requiredN = requiredNForDelta(out.paired.meanDiff, 0);
  } else {
    out.requiredN = requiredNForDelta(out.paired.meanDiff, out.paired.sdDiff);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Per slice

/** Adapter - base on one slice's tasks (the task set's slice field: docs/tasks.md). */
export interface SliceComparison {
  slice: string;
  n: number;
  /** null without a paired task (JSON has no NaN) */
  baseAccuracy: number | null;
  adapterAccuracy: number | null;
  delta: number | null;
  /** the decision interval (Tango for 0/1, paired t otherwise); null when n < 2, or when per-task
   *  means have no spread (a zero-width t interval would read certainty) */
  lower: number | null;
  upper: number | null;
  test: string;
  /** the governing test's p (exact McNemar for 0/1; paired t otherwise, or the exact sign test
   *  when the differences have no spread); null when n < 2 or every difference is 0 (undefined) */
  p: number | null;
  /** Holm-adjusted across the slices with a defined p; null where p is */
  pHolm: number | null;
}

/** Per-slice adapter - base with the governing test's p, Holm-adjusted across slices; rows
 *  without a slice value are left out (a task set without a slice field gets no rows). */
export function sliceBreakdown(
  base: ReadonlyMap<string, number>,
  candidate: ReadonlyMap<string, number>,
  rows: ReadonlyArray<Pick<TaskRow, "id" | "slice">>,
): SliceComparison[] {
  const bySlice = new Map<string, string[]>();
  for (const r of rows) if (r.slice !== undefined) bySlice.set(r.slice, [...(bySlice.get(r.slice) ?? []), r.id]);
  const out: SliceComparison[] = [];
  for (const [slice, ids] of [...bySlice].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) {
    const pick = (m: ReadonlyMap<string, number>) => new Map(ids.filter((id) => m.has(id)).map((id) => [id, m.get(id)!]));
    const c = compareScores(pick(base), pick(candidate));
    const p = c.paired;
    // means over the paired tasks (also for a single pair, where there is no comparison object)
    let sa = 0;
    let sb = 0;
    for (const id of c.taskIds) {
      sa += base.get(id)!;
      sb += candidate.get(id)!;
    }
    const mean = (x: number) => (c.n > 0 ? x / c.n : null);
    const noSpreadT = !!p && !p.binary && p.sdDiff === 0;
    out.push({
      slice,
      n: c.n,
      baseAccuracy: mean(sa),
      adapterAccuracy: mean(sb),
      delta: c.n > 0 ? (p ? p.meanDiff : sb / c.n - sa / c.n) : null,
      lower: c.decision && !noSpreadT ? c.decision.lower : null,
      upper: c.decision && !noSpreadT ? c.decision.upper : null,
      test: c.decision ? c.decision.test : "-",
      p: c.decision ? c.decision.p : null,
      pHolm: null,
    });
  }
  const withP = out.filter((t) => t.p !== null);
  if (withP.length > 0) {
    const adj = holmAdjust(withP.map((t) => t.p!));
    withP.forEach((t, i) => (t.pHolm = adj[i]));
  }
  return out;
}
