/**
 * Statistics for the eval harness and the report: the public face of core/stats. Source of truth;
 * the port is py_trainer/py_trainer/core/stats/ (file for file, same names in snake_case, same results
 * bit for bit). One file per family: errors (StatsInputError, input checks), elementary (exp, log,
 * atan, erfc), distributions (normal, Student t), rng (the PRNG, the percentile rule), descriptive
 * (with noSpread and intervalOverRuns), paired (McNemar, pairedComparison, paired bootstrap, Tango),
 * resampling (the held-out bootstraps), power, multiplicity (passAtK, Holm, clustered SE), agreement (kappa, tau-b,
 * Fleiss, Kendall's W), trend (startVsEnd, trend, Hamed-Rao). Importers use this file.
 *
 * Conventions
 * - Scores, rewards and proportions are fractions (0.37), never percentage points; the report
 *   converts. A "delta" is a difference of fractions.
 * - "sd" is always the sample standard deviation (Bessel, divides by n - 1); se = sd / sqrt(n).
 * - Paired differences are d_i = b_i - a_i: `a` is the baseline, `b` the candidate.
 * - Intervals are two-sided at `confidence` (default 0.95). Each function's docs name the method.
 * - Bad input throws StatsInputError with a stable `kind` (see StatsErrorKind); the Python port
 *   raises the same kinds in the same order of checks.
 * - Missing values: most functions refuse NaN, null and Infinity. The nan* functions and the
 *   held-out bootstraps (bootstrapMeanCI, relativeChangeCI) skip them instead ("missing" is null,
 *   undefined, NaN or +-Infinity; any other non-number still throws "nan") and return NaN where
 *   too few values are left, because a prompt with no scorable sample is a normal event there.
 *
 * Why results are bit-identical in both languages
 * - Only IEEE-754 +, -, *, / and sqrt are used, in the same order in both files: sums run left
 *   to right, squares are x * x (never pow), and exp, log and atan are implemented below from
 *   those operations, because V8's libm and CPython's libm can differ in the last bit.
 * - The exact McNemar p-value is summed in integers (BigInt here, int in Python) and rounded
 *   once, so it is the correctly rounded value of the exact binomial tail.
 *
 * The PRNG (used by the bootstraps; specified once, here)
 * - State: four uint32 words s0..s3 from SplitMix32 applied to a uint32 seed: for each word,
 *   x = (x + 0x9E3779B9) mod 2^32; z = x; z = (z ^ (z >>> 16)) * 0x85EBCA6B mod 2^32;
 *   z = (z ^ (z >>> 13)) * 0xC2B2AE35 mod 2^32; word = z ^ (z >>> 16). (x starts at the seed.)
 * - Output: xoshiro128** (Blackman & Vigna): result = rotl(s1 * 5, 7) * 9 (mod 2^32);
 *   t = s1 << 9; s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 11).
 * - Index in [0, n): limit = 2^32 - (2^32 mod n); draw x until x < limit; return x mod n
 *   (rejection, so no modulo bias).
 *
 * The percentile rule (every bootstrap CI here)
 * - Sort the R replicate statistics ascending into x[0..R-1]. For a tail q, h = (R - 1) * q,
 *   i = floor(h); value = x[i] + (h - i) * (x[i + 1] - x[i]) (x[i] itself when i = R - 1).
 *   This is numpy.percentile's default "linear" rule. Lower = q = (1 - confidence) / 2,
 *   upper = q = 1 - (1 - confidence) / 2.
 */

export type { StatsErrorKind } from "./errors.js";
export { StatsInputError } from "./errors.js";
export { normalCdf, normalQuantile, studentTQuantile } from "./distributions.js";
export type { Interval } from "./rng.js";
export { Rng } from "./rng.js";
export type { ProportionInterval, RunsInterval } from "./descriptive.js";
export { NO_SPREAD_ULPS, noSpread, mean, sampleSd, standardError, nanMean, nanSampleSd, wilsonInterval, intervalOverRuns } from "./descriptive.js";
export type { Discordant, PairedComparison, BootstrapInterval, PairedProportionInterval } from "./paired.js";
export { mcnemarExactP, pairedComparison, pairedBootstrapCI, tangoScoreInterval } from "./paired.js";
export type { RelativeChange } from "./resampling.js";
export { bootstrapMeanCI, relativeChangeCI } from "./resampling.js";
export type { OperatingCharacteristic, PairedProportionGate, SimulatedOperatingCharacteristic, PlannedPairedSd } from "./power.js";
export {
  requiredNForDelta,
  minimumDetectableEffect,
  operatingCharacteristic,
  pairedProportionGate,
  GATE_SIMULATION_DRAWS,
  GATE_SIMULATION_SEED,
  simulatedOperatingCharacteristic,
  plannedPairedSd,
} from "./power.js";
export type { ClusteredMean } from "./multiplicity.js";
export { passAtK, holmAdjust, clusteredMeanSE } from "./multiplicity.js";
export type { Label, KappaWeights, CohenKappa, FleissKappa, KendallW } from "./agreement.js";
export { cohenKappa, kendallTauB, fleissKappa, kendallW } from "./agreement.js";
export type { StartVsEnd, Trend, HamedRaoTrend } from "./trend.js";
export { START_VS_END_MAX_AUTOCORRELATION, START_VS_END_MIN_DF, startVsEnd, trend, hamedRaoTrend } from "./trend.js";

import { atan, erfc, exp, log } from "./elementary.js";

/** The elementary functions, exported for the accuracy tests only. */
export const elementary = { exp, log, atan, erfc };
