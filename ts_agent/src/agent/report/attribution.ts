/**
 * Attribution: DESIGN.md's "reading the curves" table as data, applied to one run.
 *
 * Features come from the run's TrainStep metrics (TRL's keys verbatim): the per-step `reward`
 * series gives the curve shape (stats.hamedRaoTrend = Mann-Kendall with the Hamed-Rao
 * autocorrelation correction + Sen's slope, since per-step rewards are autocorrelated and the
 * plain test calls 12-20% of trendless AR(1) curves a trend; stats.startVsEnd = first vs last
 * window with a moving-block bootstrap CI), `kl` its level and spikes,
 * `frac_reward_zero_std` its level and direction, `completions/clipped_ratio` truncation; the
 * downstream comparison says whether a rise carried over. Every row is a conjunction of its
 * columns ("any" = no condition); the report lists every row that fired with the numbers that
 * made it fire. The thresholds are heuristics for reading curves, not tests; each is a named
 * constant with its reason (those the sidecar's live warnings share live in thresholds.ts).
 *
 * Before any curve row fires (DESIGN.md): a curve too short or too noisy to carry a trend is
 * "undetermined" (its own row, nothing else about the curve fires); a downstream CI that includes
 * 0 at n below the required n is "underpowered", not reward hacking; a significant downstream
 * regression is its own row and rules out "healthy", as do KL spikes.
 */
import { hamedRaoTrend, startVsEnd, type Interval } from "../eval/stats.js";
import { CURVE_THRESHOLDS } from "./thresholds.js";

// ---------------------------------------------------------------------------------------------
// Thresholds

/** Curves shorter than this many logged steps are "undetermined": with fewer, the start/end
 *  windows hold <= 3 steps and blocks of 2 leave the moving-block bootstrap 1-2 block starts, a
 *  CI of (near) zero width that would make noise look like a shape. */
export const MIN_STEPS_FOR_SHAPE = 20;
/** The moving-block bootstrap needs at least this many distinct block starts per window. */
export const MIN_BLOCK_STARTS = 3;
/** "Flat": the change's CI lies within -/+ this (reward units); a CI wider than that which shows
 *  neither a rise nor a fall is "undetermined" (too noisy), not flat. */
export const FLAT_MAX_CHANGE = 0.05;
/** Start/end windows are this share of the logged steps (at least 2 steps each). */
export const WINDOW_SHARE = 0.2;
/** "Rises": end-window mean exceeds the start window by at least this (reward units; rewards are
 *  fractions, so 0.02 is 2 points of exact-match accuracy) with a bootstrap CI above 0. */
export const RISE_MIN_CHANGE = 0.02;
/** "Early plateau": at least this share of the total rise is already there at the midpoint (the
 *  window ending there), so the second half adds at most the rest. */
export const PLATEAU_MID_SHARE = 0.8;
/** Significance level for the Mann-Kendall trend tests used here. */
export const TREND_ALPHA = 0.05;
/** "Collapses": the rolling mean peaked at least this far above the start (reward units)... */
export const COLLAPSE_MIN_PEAK_GAIN = 0.05;
/** ...and the end fell back by at least this share of that gain (or the end is significantly
 *  below the start). */
export const COLLAPSE_DROP_SHARE = 0.5;
/** "Oscillates": no significant trend, but the rolling mean swings over at least this range. */
export const OSCILLATION_MIN_RANGE = 0.15;
/** KL "~0": the end-window mean KL is below this (nats/token; the adapter has barely moved). */
export const KL_NEAR_ZERO = 1e-3;
/** KL "high": the end-window mean KL is above this (policy far from the reference for beta ~0.04). */
export const KL_HIGH = 0.1;
// The next four are shared with the sidecar's live warnings, so they come from thresholds.ts.
/** A KL "spike": a step whose KL is over this multiple of the run's median KL... */
export const KL_SPIKE_FACTOR = CURVE_THRESHOLDS.kl_spike_factor;
/** ...and above this absolute floor (so noise around ~0 is not a spike). */
export const KL_SPIKE_MIN = CURVE_THRESHOLDS.kl_spike_min;
/** frac_reward_zero_std "~1": at least this run mean (almost every group has no reward variance). */
export const FRAC_ZERO_STD_HIGH = CURVE_THRESHOLDS.zero_std_warn;
/** frac_reward_zero_std "low": at most this run mean. */
export const FRAC_ZERO_STD_LOW = 0.5;
/** completions/clipped_ratio "~1": end-window mean at least this (almost every completion truncated). */
export const CLIPPED_HIGH = CURVE_THRESHOLDS.clipped_ratio_warn;

// ---------------------------------------------------------------------------------------------
// Features

/** One logged optimizer step (structurally a proto TrainStep with the step as a number). */
export interface StepMetrics {
  step: number;
  metrics: { readonly [key: string]: number };
}

export type CurveShape = "rising" | "flat" | "early plateau" | "collapses / oscillates" | "undetermined";

export interface RewardCurve {
  shape: CurveShape;
  /** why the shape is "undetermined" ("" otherwise) */
  undeterminedWhy: string;
  n: number;
  window: number;
  startMean: number;
  endMean: number;
  /** endMean - startMean, with its moving-block bootstrap CI */
  change: number;
  changeCi: Interval;
  trendZ: number;
  trendP: number;
  /** Sen's slope, reward per step */
  senSlope: number;
  /** share of the total change already reached by the window ending at the midpoint */
  midShare: number | null;
  /** Hamed-Rao modified Mann-Kendall p of the second half (shown as evidence) */
  secondHalfP: number | null;
  /** max rolling mean - start mean */
  peakGain: number;
  /** max rolling mean - end mean */
  dropFromPeak: number;
  /** max - min of the rolling mean */
  rollingRange: number;
}

export interface LevelStats {
  n: number;
  mean: number;
  startMean: number;
  endMean: number;
  max: number;
  median: number;
  /** Hamed-Rao modified Mann-Kendall over the series; null with fewer than 3 points */
  trendP: number | null;
  trendS: number | null;
}

export interface CurveFeatures {
  steps: number;
  window: number;
  reward: RewardCurve | null;
  kl: (LevelStats & { spikes: number; spikeSteps: number[] }) | null;
  fracZeroStd: (LevelStats & { direction: "falling" | "rising" | "flat" }) | null;
  clippedRatio: LevelStats | null;
}

function meanOf(xs: ReadonlyArray<number>): number {
  let s = 0;
  for (const x of xs) s += x;
  return s / xs.length;
}

function medianOf(xs: ReadonlyArray<number>): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length;
  return m % 2 ? s[(m - 1) / 2] : (s[m / 2 - 1] + s[m / 2]) / 2;
}

function seriesOf(steps: ReadonlyArray<StepMetrics>, key: string): { steps: number[]; values: number[] } {
  const out = { steps: [] as number[], values: [] as number[] };
  for (const s of steps) {
    const v = s.metrics[key];
    if (typeof v === "number" && Number.isFinite(v)) {
      out.steps.push(s.step);
      out.values.push(v);
    }
  }
  return out;
}

function windowFor(n: number): number {
  return Math.max(2, Math.floor(n * WINDOW_SHARE));
}

function levelStats(xs: number[], w: number): LevelStats | null {
  if (xs.length === 0) return null;
  const ww = Math.min(w, xs.length);
  const tr = xs.length >= 3 ? hamedRaoTrend(xs) : null;
  return {
    n: xs.length,
    mean: meanOf(xs),
    startMean: meanOf(xs.slice(0, ww)),
    endMean: meanOf(xs.slice(xs.length - ww)),
    max: Math.max(...xs),
    median: medianOf(xs),
    trendP: tr ? tr.p : null,
    trendS: tr ? tr.s : null,
  };
}

function rollingMeans(xs: ReadonlyArray<number>, w: number): number[] {
  const out: number[] = [];
  for (let i = 0; i + w <= xs.length; i++) out.push(meanOf(xs.slice(i, i + w)));
  return out;
}

/** A rise to the rolling-mean peak (window at `at`) and the fall after it, each shown by the same
 *  moving-block bootstrap as the start-vs-end change: start window -> peak window has a CI above
 *  0, and peak window -> end window a CI below 0. Without this, the highest of ~n overlapping
 *  window means of a flat noisy curve sits above the start and the end often enough to call
 *  noise a collapse (simulated flat curves, per-step sd 0.08, 60 steps, 300 each: 19% of iid and
 *  35% of AR(1) phi 0.5 curves before this check, 7% and 20% after; the test in
 *  `test/attribution.test.ts` holds the iid case). Needs two windows of room on each side. */
function peakIsReal(r: ReadonlyArray<number>, at: number, w: number): boolean {
  if (at < w || r.length - at < 2 * w) return false;
  const rise = startVsEnd(r.slice(0, at + w), { window: w, seed: 0 });
  const drop = startVsEnd(r.slice(at), { window: w, seed: 0 });
  return rise.changeCi.lower > 0 && drop.changeCi.upper < 0;
}

/** Classify the per-step reward curve (rules in the thresholds above). */
export function rewardCurve(r: ReadonlyArray<number>): RewardCurve | null {
  const n = r.length;
  if (n < 2) return null;
  const w = Math.min(windowFor(n), Math.floor(n / 2));
  const sve = startVsEnd(r, { window: w, seed: 0 });
  const tr = n >= 3 ? hamedRaoTrend(r) : { z: 0, p: 1, senSlope: 0 };
  const rm = rollingMeans(r, w);
  const peak = Math.max(...rm);
  const trough = Math.min(...rm);
  const mid = Math.floor(n / 2);
  const midMean = mid >= w ? meanOf(r.slice(mid - w, mid)) : NaN;
  const midShare = sve.change !== 0 && !Number.isNaN(midMean) ? (midMean - sve.startMean) / sve.change : null;
  const secondHalfP = n - mid >= 3 ? hamedRaoTrend(r.slice(mid)).p : null;
  const curve: RewardCurve = {
    shape: "undetermined",
    undeterminedWhy: "",
    n,
    window: w,
    startMean: sve.startMean,
    endMean: sve.endMean,
    change: sve.change,
    changeCi: sve.changeCi,
    trendZ: tr.z,
    trendP: tr.p,
    senSlope: tr.senSlope,
    midShare,
    secondHalfP,
    peakGain: peak - sve.startMean,
    dropFromPeak: peak - sve.endMean,
    rollingRange: peak - trough,
  };
  if (n < MIN_STEPS_FOR_SHAPE) {
    curve.undeterminedWhy = `too short: ${n} logged step(s) < ${MIN_STEPS_FOR_SHAPE}`;
    return curve;
  }
  const starts = w - sve.blockLength + 1;
  if (starts < MIN_BLOCK_STARTS) {
    curve.undeterminedWhy = `too short: windows of ${w} steps leave ${starts} block start(s) for the bootstrap`;
    return curve;
  }
  const rose = sve.changeCi.lower > 0 && sve.change >= RISE_MIN_CHANGE;
  const fell = sve.changeCi.upper < 0;
  const collapsed = fell || (curve.peakGain >= COLLAPSE_MIN_PEAK_GAIN && curve.dropFromPeak >= COLLAPSE_DROP_SHARE * curve.peakGain &&
    peakIsReal(r, rm.indexOf(peak), w));
  const oscillates = !rose && tr.p >= TREND_ALPHA && curve.rollingRange >= OSCILLATION_MIN_RANGE;
  const plateau = rose && midShare !== null && midShare >= PLATEAU_MID_SHARE;
  const flat = sve.changeCi.lower > -FLAT_MAX_CHANGE && sve.changeCi.upper < FLAT_MAX_CHANGE;
  if (collapsed || oscillates) curve.shape = "collapses / oscillates";
  else if (plateau) curve.shape = "early plateau";
  else if (rose) curve.shape = "rising";
  else if (flat) curve.shape = "flat";
  else {
    curve.shape = "undetermined";
    curve.undeterminedWhy =
      `too noisy: the change's 95% CI ${sve.changeCi.lower.toFixed(3)} to ${sve.changeCi.upper.toFixed(3)} shows no rise ` +
      `(>= ${RISE_MIN_CHANGE} above 0) and no fall, and is wider than flat (within -/+${FLAT_MAX_CHANGE})`;
  }
  return curve;
}

/** Everything the table's predicates read, from the run's logged steps. */
export function curveFeatures(steps: ReadonlyArray<StepMetrics>): CurveFeatures {
  const sorted = [...steps].sort((a, b) => a.step - b.step);
  const reward = seriesOf(sorted, "reward").values;
  const w = windowFor(reward.length || sorted.length);
  const kl = seriesOf(sorted, "kl");
  const klStats = levelStats(kl.values, w);
  const frac = levelStats(seriesOf(sorted, "frac_reward_zero_std").values, w);
  let klOut: CurveFeatures["kl"] = null;
  if (klStats) {
    const spikeSteps = kl.steps.filter((_, i) => kl.values[i] > KL_SPIKE_FACTOR * klStats.median && kl.values[i] > KL_SPIKE_MIN);
    klOut = { ...klStats, spikes: spikeSteps.length, spikeSteps };
  }
  let fracOut: CurveFeatures["fracZeroStd"] = null;
  if (frac) {
    const sig = frac.trendP !== null && frac.trendP < TREND_ALPHA;
    const direction = sig && frac.trendS! < 0 ? "falling" : sig && frac.trendS! > 0 ? "rising" : "flat";
    fracOut = { ...frac, direction };
  }
  return {
    steps: sorted.length,
    window: w,
    reward: rewardCurve(reward),
    kl: klOut,
    fracZeroStd: fracOut,
    clippedRatio: levelStats(seriesOf(sorted, "completions/clipped_ratio").values, w),
  };
}

// ---------------------------------------------------------------------------------------------
// The table

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
  delta?: number | null;
  ciLower?: number | null;
  ciUpper?: number | null;
  /** pairs needed for 80% power at the larger of |delta| and the milestone threshold; null when unknown */
  requiredN?: number | null;
}

/** The eval is too small to tell: its CI includes 0 and n < the required n. */
export function underpowered(d: DownstreamSignal): boolean {
  return d.significant === false && d.n != null && d.requiredN != null && d.n < d.requiredN;
}

/** A significant downstream regression: the decision excludes 0 on the negative side. */
export function regressed(d: DownstreamSignal): boolean {
  return d.significant === true && d.ciUpper != null && d.ciUpper < 0;
}

export interface Check {
  fired: boolean;
  /** each condition of the row, "yes:" or "no:", with the numbers it was decided on */
  evidence: string;
  /** how many of the row's conditions held */
  met: number;
  /** the conditions that did not hold, with their numbers */
  missed: string[];
}

export interface AttributionRow {
  curve: string;
  kl: string;
  fracZeroStd: string;
  likelyCause: string;
  nextChange: string;
  check: (f: CurveFeatures, d: DownstreamSignal) => Check;
}

const f3 = (x: number) => x.toFixed(3);
const f4 = (x: number) => (Math.abs(x) < 1e-3 && x !== 0 ? x.toExponential(1) : x.toFixed(4));

/** The curves in words and numbers (the report prints this once, above the table). */
export function describeFeatures(f: CurveFeatures): string[] {
  const r = f.reward;
  const lines: string[] = [];
  lines.push(
    r
      ? `reward: ${r.shape}${r.undeterminedWhy ? ` (${r.undeterminedWhy})` : ""}; start ${f3(r.startMean)} -> end ${f3(r.endMean)} (change ${f3(r.change)}, 95% moving-block bootstrap CI ${f3(r.changeCi.lower)} to ${f3(r.changeCi.upper)}); ` +
          `Hamed-Rao modified Mann-Kendall z=${r.trendZ.toFixed(2)}, p=${r.trendP.toPrecision(2)}, Sen slope ${r.senSlope.toExponential(2)}/step` +
          (r.midShare === null ? "" : `; ${(r.midShare * 100).toFixed(0)}% of the change reached by mid-run`) +
          (r.secondHalfP === null ? "" : `, second-half p=${r.secondHalfP.toPrecision(2)}`) +
          `; rolling-mean peak gain ${f3(r.peakGain)}, drop from peak ${f3(r.dropFromPeak)}, range ${f3(r.rollingRange)}; windows of ${r.window} of ${r.n} steps`
      : "reward: not logged",
  );
  lines.push(
    f.kl
      ? `kl: end-window mean ${f4(f.kl.endMean)}, run mean ${f4(f.kl.mean)}, median ${f4(f.kl.median)}, max ${f4(f.kl.max)}, ${f.kl.spikes} spike(s)` +
          (f.kl.spikes ? ` at step(s) ${f.kl.spikeSteps.slice(0, 5).join(", ")}` : "")
      : "kl: not logged (TRL logs it only when beta > 0)",
  );
  const z = f.fracZeroStd;
  lines.push(
    z
      ? `frac_reward_zero_std: run mean ${z.mean.toFixed(2)}, ${z.startMean.toFixed(2)} -> ${z.endMean.toFixed(2)}, ${z.direction}${z.trendP === null ? "" : ` (Mann-Kendall p=${z.trendP.toPrecision(2)})`}`
      : "frac_reward_zero_std: not logged",
  );
  lines.push(
    f.clippedRatio
      ? `completions/clipped_ratio: end-window mean ${f.clippedRatio.endMean.toFixed(2)}, run mean ${f.clippedRatio.mean.toFixed(2)}`
      : "completions/clipped_ratio: not logged",
  );
  return lines;
}

type Condition = [boolean, string];

function all(...conditions: Condition[]): Check {
  return {
    fired: conditions.every(([ok]) => ok),
    evidence: conditions.map(([ok, s]) => `${ok ? "yes" : "no"}: ${s}`).join("; "),
    met: conditions.filter(([ok]) => ok).length,
    missed: conditions.filter(([ok]) => !ok).map(([, s]) => s),
  };
}

/** The reward rose: on the training curve, or on the held-out prompts. */
const roseCondition = (f: CurveFeatures, d: DownstreamSignal): Condition => {
  const curveRose = f.reward !== null && (f.reward.shape === "rising" || f.reward.shape === "early plateau");
  const heldOut = d.heldOutRose === null ? "no held-out result" : `held-out reward CI ${d.heldOutRose ? "above 0" : "includes 0"}`;
  return [curveRose || d.heldOutRose === true, `curve ${f.reward?.shape ?? "not logged"}, ${heldOut}`];
};

const shapeIs = (f: CurveFeatures, ...shapes: CurveShape[]): Condition => [
  f.reward !== null && shapes.includes(f.reward.shape),
  f.reward ? `curve ${f.reward.shape}` : "no reward logged",
];

/** A KL condition on the end-window mean: `test` decides, `want` says the threshold in words. */
const klIs = (f: CurveFeatures, test: (kl: number) => boolean, want: string): Condition =>
  f.kl ? [test(f.kl.endMean), `kl ${f4(f.kl.endMean)} (want ${want})`] : [false, "kl not logged"];

const fracIs = (f: CurveFeatures, test: (z: NonNullable<CurveFeatures["fracZeroStd"]>) => boolean, what: string): Condition =>
  f.fracZeroStd ? [test(f.fracZeroStd), what.replace("$", f.fracZeroStd.mean.toFixed(2)).replace("#", f.fracZeroStd.direction)] : [false, "frac_reward_zero_std not logged"];

/** DESIGN.md's attribution table, one entry per row, in its order. */
export const ATTRIBUTION_TABLE: readonly AttributionRow[] = [
  {
    curve: "rises steadily",
    kl: "moderate",
    fracZeroStd: "falling",
    likelyCause: "healthy",
    nextChange: "more data / steps",
    check: (f, d) =>
      all(
        shapeIs(f, "rising"),
        klIs(f, (kl) => kl >= KL_NEAR_ZERO && kl <= KL_HIGH, `${KL_NEAR_ZERO} to ${KL_HIGH}`),
        fracIs(f, (z) => z.direction === "falling", "frac_reward_zero_std #"),
        f.kl ? [f.kl.spikes === 0, `${f.kl.spikes} KL spike(s) (want 0)`] : [false, "kl not logged"],
        [!regressed(d), regressed(d) ? `downstream ${d.text}: a significant regression` : "no significant downstream regression"],
      ),
  },
  {
    curve: "flat from step 0",
    kl: "~0",
    fracZeroStd: "~1",
    likelyCause: "reward too sparse, G too small, task too hard",
    nextChange: "raise G, partial credit, easier curriculum",
    check: (f) =>
      all(
        shapeIs(f, "flat"),
        klIs(f, (kl) => kl < KL_NEAR_ZERO, `< ${KL_NEAR_ZERO}`),
        fracIs(f, (z) => z.mean >= FRAC_ZERO_STD_HIGH, `frac_reward_zero_std mean $ (want >= ${FRAC_ZERO_STD_HIGH})`),
      ),
  },
  {
    curve: "flat from step 0",
    kl: "~0",
    fracZeroStd: "low",
    likelyCause: "lr too low, beta too high, adapter not training",
    nextChange: "raise lr, lower beta, check trainable params",
    check: (f) =>
      all(
        shapeIs(f, "flat"),
        klIs(f, (kl) => kl < KL_NEAR_ZERO, `< ${KL_NEAR_ZERO}`),
        fracIs(f, (z) => z.mean <= FRAC_ZERO_STD_LOW, `frac_reward_zero_std mean $ (want <= ${FRAC_ZERO_STD_LOW})`),
      ),
  },
  {
    curve: "early plateau",
    kl: "low",
    fracZeroStd: "rising",
    likelyCause: "grader too strict, saturation",
    nextChange: "check grader, harder tasks",
    check: (f) =>
      all(shapeIs(f, "early plateau"), klIs(f, (kl) => kl <= KL_HIGH, `<= ${KL_HIGH}`), fracIs(f, (z) => z.direction === "rising", "frac_reward_zero_std #")),
  },
  {
    curve: "early plateau",
    kl: "high",
    fracZeroStd: "any",
    likelyCause: "policy drifting, reward hacking",
    nextChange: "raise beta, tighten grader",
    check: (f) => all(shapeIs(f, "early plateau"), klIs(f, (kl) => kl > KL_HIGH, `> ${KL_HIGH}`)),
  },
  {
    curve: "rises, downstream delta not significant",
    kl: "any",
    fracZeroStd: "any",
    likelyCause: "reward hacking or loose grader",
    nextChange: "kappa check, tighten grader",
    check: (f, d) =>
      all(
        roseCondition(f, d),
        [d.significant === false, d.significant === null ? "no downstream eval" : `downstream ${d.text}: CI ${d.significant ? "excludes" : "includes"} 0`],
        [
          !underpowered(d),
          underpowered(d)
            ? `n=${d.n} < required n=${d.requiredN}: underpowered, not evidence of hacking`
            : d.n != null && d.requiredN != null
              ? `n=${d.n} >= required n=${d.requiredN}`
              : "power unknown",
        ],
      ),
  },
  {
    curve: "rises, downstream CI includes 0 at n < required n",
    kl: "any",
    fracZeroStd: "any",
    likelyCause: "underpowered: the test split is too small to tell",
    nextChange: "more test tasks (n >= the required n; see `agent plan`), not a grader change",
    check: (f, d) =>
      all(
        roseCondition(f, d),
        [underpowered(d), d.significant === null ? "no downstream eval" : `downstream ${d.text}: n=${d.n ?? "?"} vs required n=${d.requiredN ?? "?"}`],
      ),
  },
  {
    curve: "any, downstream delta significantly below 0",
    kl: "any",
    fracZeroStd: "any",
    likelyCause: "regression: the adapter is worse than the base on the test split",
    nextChange: "read the tasks it lost; check the grader and the train/test template overlap; fewer steps or a lower lr",
    check: (_f, d) =>
      all([regressed(d), d.significant === null ? "no downstream eval" : `downstream ${d.text}: ${regressed(d) ? "significantly below 0" : "not a significant regression"}`]),
  },
  {
    curve: "too short / too noisy to tell",
    kl: "any",
    fracZeroStd: "any",
    likelyCause: "undetermined: the curve cannot carry a trend",
    nextChange: `more logged steps (>= ${MIN_STEPS_FOR_SHAPE}) or less noise per step (larger batch, more generations)`,
    check: (f) =>
      all([f.reward !== null && f.reward.shape === "undetermined", f.reward ? `curve ${f.reward.shape}${f.reward.undeterminedWhy ? ` (${f.reward.undeterminedWhy})` : ""}` : "no reward logged"]),
  },
  {
    curve: "collapses / oscillates",
    kl: "spikes",
    fracZeroStd: "any",
    likelyCause: "lr too high, clip too loose",
    nextChange: "lower lr, epsilon",
    check: (f) =>
      all(
        shapeIs(f, "collapses / oscillates"),
        f.kl ? [f.kl.spikes > 0, `${f.kl.spikes} KL spike(s) (> ${KL_SPIKE_FACTOR}x the median and > ${KL_SPIKE_MIN})`] : [false, "kl not logged"],
      ),
  },
  {
    curve: "clipped_ratio ~ 1",
    kl: "any",
    fracZeroStd: "any",
    likelyCause: "completions truncated",
    nextChange: "raise max_completion_length",
    check: (f) =>
      all(
        f.clippedRatio
          ? [f.clippedRatio.endMean >= CLIPPED_HIGH, `clipped_ratio ${f.clippedRatio.endMean.toFixed(2)} (want >= ${CLIPPED_HIGH})`]
          : [false, "completions/clipped_ratio not logged"],
      ),
  },
];

export interface RowResult extends Check {
  row: AttributionRow;
}

/** Apply every row of the table; the result keeps the table's order. */
export function attribute(f: CurveFeatures, d: DownstreamSignal): RowResult[] {
  return ATTRIBUTION_TABLE.map((row) => ({ row, ...row.check(f, d) }));
}

/** Curve-pattern rows (a KL column other than "any": the shape, KL and frac_reward_zero_std
 *  rows) that did not fire but held every condition except one. The downstream, undetermined
 *  and clipped rows are alarms: missing their condition means the alarm is quiet, not that the
 *  run is near them. When no row fires, the near rows say what the run looks like: a rising
 *  curve with KL spikes misses "healthy" only on the spikes and "lr too high, clip too loose"
 *  only on the curve shape. */
export function nearMisses(results: readonly RowResult[]): RowResult[] {
  return results.filter((r) => !r.fired && r.row.kl !== "any" && r.missed.length === 1 && r.met >= 1);
}
