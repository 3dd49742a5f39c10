/**
 * The features of a GRPO training curve the attribution table reads, from the run's TrainStep
 * metrics (TRL's keys verbatim): the per-step `reward` series gives the curve shape
 * (stats.hamedRaoTrend = Mann-Kendall with the Hamed-Rao autocorrelation correction + Sen's slope,
 * since per-step rewards are autocorrelated and the plain test calls 12-20% of trendless AR(1)
 * curves a trend; stats.startVsEnd = first vs last window with a t interval that allows for AR(1)
 * autocorrelation), `kl`
 * its level and spikes, `frac_reward_zero_std` its level and direction,
 * `completions/clipped_ratio` truncation. The thresholds are heuristics for reading curves, not
 * tests; each is a named constant with its reason (those the sidecar's live warnings share live in
 * thresholds.ts). A curve too short or too noisy to carry a trend is "undetermined".
 */
import { hamedRaoTrend, startVsEnd, type Interval } from "../core/stats/index.js";
import { CURVE_THRESHOLDS, effectiveZeroStd, isKlSpike } from "./thresholds.js";

// ---------------------------------------------------------------------------------------------
// Thresholds

/** Curves shorter than this many logged steps are "undetermined": with fewer, the start/end
 *  windows hold <= 3 steps, too few to tell a shape from noise. The start-vs-end interval covers
 *  the true change of trendless iid and AR(1) (phi <= 0.5) curves >= 95% of the time from here on
 *  (test/attribution.test.ts simulates it). */
export const MIN_STEPS_FOR_SHAPE = 20;
/** "Flat": the change's CI lies within -/+ this (reward units); a CI wider than that which shows
 *  neither a rise nor a fall is "undetermined" (too noisy), not flat. */
export const FLAT_MAX_CHANGE = 0.05;
/** Start/end windows are this share of the logged steps (at least 2 steps each). */
export const WINDOW_SHARE = 0.2;
/** "Rises": end-window mean exceeds the start window by at least this (reward units; rewards are
 *  fractions, so 0.02 is 2 points of exact-match accuracy) with a CI above 0. */
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
/** The rise to the peak and the fall after it are each shown by a one-sided 95% bound (a 90%
 *  interval): both must hold, so noise passes both far less often than 5%, and a real bump of
 *  +0.2 at per-step sd 0.08 is found ~88% of the time (a two-sided 95% for each found ~79%). */
export const PEAK_CONFIDENCE = 0.9;
/** "Oscillates": no significant trend, but the rolling mean swings over at least this range... */
export const OSCILLATION_MIN_RANGE = 0.15;
/** ...and over at least this many standard errors of a window mean (startVsEnd's windowSe, which
 *  allows for autocorrelation): the highest and lowest of ~n overlapping window means of pure
 *  noise lie 3-5 of them apart, so without this check a trendless curve at the demo's noise (per-step
 *  sd 0.125, 40 steps) was called oscillating about a third of the time; with it "collapses /
 *  oscillates" fires on 1-5% of trendless iid and AR(1) (phi <= 0.9) curves (simulated, 2000 each). */
export const OSCILLATION_MIN_SE = 8;
// The spike thresholds are shared with the sidecar's live warnings, so they come from thresholds.ts.
/** A KL "spike": a step whose KL is over this multiple of the recent local level (the median of
 *  the previous KL_SPIKE_WINDOW steps; thresholds.ts)... */
export const KL_SPIKE_FACTOR = CURVE_THRESHOLDS.kl_spike_factor;
/** ...the level floored at this (so a KL rising from ~0 is not a spike)... */
export const KL_SPIKE_MIN = CURVE_THRESHOLDS.kl_spike_min;
/** ...and over the level by more than this many median absolute deviations of the window... */
export const KL_SPIKE_MADS = CURVE_THRESHOLDS.kl_spike_mads;
/** ...the local level being the median KL of the previous this many steps (none judged before). */
export const KL_SPIKE_WINDOW = CURVE_THRESHOLDS.kl_spike_window;
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
  /** endMean - startMean, with its t interval (stats.startVsEnd) */
  change: number;
  changeCi: Interval;
  trendZ: number;
  trendP: number;
  /** Sen's slope, reward per step */
  senSlope: number;
  /** share of the total change already reached by the window ending at the midpoint; null when
   *  the change's CI includes 0 (a ratio of a change indistinguishable from 0 means nothing) */
  midShare: number | null;
  /** Hamed-Rao modified Mann-Kendall p of the second half (shown as evidence) */
  secondHalfP: number | null;
  /** max rolling mean - start mean */
  peakGain: number;
  /** max rolling mean - end mean */
  dropFromPeak: number;
  /** max - min of the rolling mean */
  rollingRange: number;
  /** standard error of one window's mean (stats.startVsEnd windowSe) */
  windowSe: number;
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
 *  interval as the start-vs-end change: start window -> peak window has a CI above 0, and peak
 *  window -> end window a CI below 0. Without this, the highest of ~n overlapping
 *  window means of a flat noisy curve sits above the start and the end often enough to call
 *  noise a collapse (simulated flat curves, per-step sd 0.08, 60 steps, 300 each: 19% of iid and
 *  35% of AR(1) phi 0.5 curves before this check, 7% and 20% after, with the bootstrap of the time;
 *  the tests in `test/attribution.test.ts` hold the rates). Needs two windows of room on each side. */
function peakIsReal(r: ReadonlyArray<number>, at: number, w: number): boolean {
  if (at < w || r.length - at < 2 * w) return false;
  const rise = startVsEnd(r.slice(0, at + w), { window: w, confidence: PEAK_CONFIDENCE });
  const drop = startVsEnd(r.slice(at), { window: w, confidence: PEAK_CONFIDENCE });
  return rise.changeCi.lower > 0 && drop.changeCi.upper < 0;
}

/** Classify the per-step reward curve (rules in the thresholds above). */
export function rewardCurve(r: ReadonlyArray<number>): RewardCurve | null {
  const n = r.length;
  if (n < 3) return null;
  const w = Math.min(windowFor(n), Math.floor(n / 2));
  const sve = startVsEnd(r, { window: w });
  const tr = n >= 3 ? hamedRaoTrend(r) : { z: 0, p: 1, senSlope: 0 };
  const rm = rollingMeans(r, w);
  const peak = Math.max(...rm);
  const trough = Math.min(...rm);
  const mid = Math.floor(n / 2);
  const midMean = mid >= w ? meanOf(r.slice(mid - w, mid)) : NaN;
  const changeShown = sve.changeCi.lower > 0 || sve.changeCi.upper < 0;
  const midShare = changeShown && !Number.isNaN(midMean) ? (midMean - sve.startMean) / sve.change : null;
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
    windowSe: sve.windowSe,
  };
  if (n < MIN_STEPS_FOR_SHAPE) {
    curve.undeterminedWhy = `too short: ${n} logged step(s) < ${MIN_STEPS_FOR_SHAPE}`;
    return curve;
  }
  // the second guard: Hamed-Rao alone calls ~25% of AR(1) phi 0.9 curves a trend, the interval
  // alone ~4%; a rise needs both
  const rose = sve.changeCi.lower > 0 && sve.change >= RISE_MIN_CHANGE && tr.p < TREND_ALPHA && tr.z > 0;
  const fell = sve.changeCi.upper < 0;
  const collapsed =
    fell || (curve.peakGain >= COLLAPSE_MIN_PEAK_GAIN && curve.dropFromPeak >= COLLAPSE_DROP_SHARE * curve.peakGain && peakIsReal(r, rm.indexOf(peak), w));
  const oscillates = !rose && tr.p >= TREND_ALPHA && curve.rollingRange >= OSCILLATION_MIN_RANGE && curve.rollingRange >= OSCILLATION_MIN_SE * sve.windowSe;
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
  // TRL's frac_reward_zero_std misses a constant reward with float noise (thresholds.ts effectiveZeroStd)
  const frac = levelStats(
    sorted.map((s) => effectiveZeroStd(s.metrics)).filter((v): v is number => v !== null),
    w,
  );
  let klOut: CurveFeatures["kl"] = null;
  if (klStats) {
    // each step against the recent local level, as the sidecar's live kl_spike warning judges it
    const spikeSteps = kl.steps.filter((_, i) => isKlSpike(kl.values[i], kl.values.slice(0, i)));
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
// In words

const f3 = (x: number) => x.toFixed(3);
const f4 = (x: number) => (Math.abs(x) < 1e-3 && x !== 0 ? x.toExponential(1) : x.toFixed(4));

/** The curves in words and numbers (the report prints this once, above the table). */
export function describeFeatures(f: CurveFeatures): string[] {
  const r = f.reward;
  const lines: string[] = [];
  lines.push(
    r
      ? `reward: ${r.shape}${r.undeterminedWhy ? ` (${r.undeterminedWhy})` : ""}; start ${f3(r.startMean)} -> end ${f3(r.endMean)} (change ${f3(r.change)}, 95% CI ${f3(r.changeCi.lower)} to ${f3(r.changeCi.upper)}, t interval allowing for autocorrelation); ` +
          `Hamed-Rao modified Mann-Kendall z=${r.trendZ.toFixed(2)}, p=${r.trendP.toPrecision(2)}, Sen slope ${r.senSlope.toExponential(2)}/step` +
          (r.midShare === null ? "" : `; ${(r.midShare * 100).toFixed(0)}% of the change reached by mid-run`) +
          (r.secondHalfP === null ? "" : `, second-half p=${r.secondHalfP.toPrecision(2)}`) +
          `; rolling-mean peak gain ${f3(r.peakGain)}, drop from peak ${f3(r.dropFromPeak)}, range ${f3(r.rollingRange)} (${(r.rollingRange / r.windowSe).toFixed(1)} window-mean SEs); windows of ${r.window} of ${r.n} steps`
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
      ? `frac_reward_zero_std (the sidecar's per-group share where logged; else a step whose reward_std is ~0 relative to its reward counts as 1): run mean ${z.mean.toFixed(2)}, ${z.startMean.toFixed(2)} -> ${z.endMean.toFixed(2)}, ${z.direction}${z.trendP === null ? "" : ` (Mann-Kendall p=${z.trendP.toPrecision(2)})`}`
      : "frac_reward_zero_std: not logged",
  );
  lines.push(
    f.clippedRatio
      ? `completions/clipped_ratio: end-window mean ${f.clippedRatio.endMean.toFixed(2)}, run mean ${f.clippedRatio.mean.toFixed(2)}`
      : "completions/clipped_ratio: not logged",
  );
  return lines;
}
