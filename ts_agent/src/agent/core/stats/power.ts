/**
 * The statistics, power: required n, MDE, the operating characteristic, the paired-proportion gate and its simulation, the planned sd.
 * Ported to py_trainer/py_trainer/core/stats/power.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

import { checkInteger, checkNumber, checkProbability, fail } from "./errors.js";
import { TWO_POW_32 } from "./elementary.js";
import { normalCdf, normalQuantile, zCritical } from "./distributions.js";
import { Rng } from "./rng.js";
import { mcnemarExactP, tangoScoreInterval } from "./paired.js";

function checkPowerInputs(sdDiff: number, alpha: number, power: number): [number, number] {
  checkNumber("sdDiff", sdDiff);
  if (sdDiff < 0) fail("out_of_range", `sdDiff must be >= 0, got ${sdDiff}`);
  checkProbability("alpha", alpha);
  checkProbability("power", power);
  const za = zCritical(alpha);
  const zb = normalQuantile(power);
  if (!(za + zb > 0)) fail("out_of_range", `power (${power}) must exceed alpha / 2 (${alpha / 2})`);
  return [za, zb];
}

/**
 * Pairs needed to detect a mean paired difference `delta` (fraction) with a two-sided level-alpha
 * z test at the given power: n = ceil(((z_{1-alpha/2} + z_{power}) * sdDiff / |delta|)^2), at
 * least 1 (0 when sdDiff = 0 is reported as 1). Defaults alpha 0.05, power 0.8.
 */
export function requiredNForDelta(delta: number, sdDiff: number, options: { alpha?: number; power?: number } = {}): number {
  checkNumber("delta", delta);
  if (delta === 0) fail("zero_delta", "delta must be non-zero");
  const [za, zb] = checkPowerInputs(sdDiff, options.alpha ?? 0.05, options.power ?? 0.8);
  const k = ((za + zb) * sdDiff) / Math.abs(delta);
  const n2 = k * k;
  if (!(n2 <= 9007199254740992)) fail("out_of_range", `required n (${n2}) exceeds 2^53`);
  return Math.max(1, Math.ceil(n2));
}

/**
 * Smallest |mean paired difference| detectable with n pairs: (z_{1-alpha/2} + z_{power}) *
 * sdDiff / sqrt(n) (the inverse of requiredNForDelta before rounding). Defaults alpha 0.05, power 0.8.
 */
export function minimumDetectableEffect(n: number, sdDiff: number, options: { alpha?: number; power?: number } = {}): number {
  checkInteger("n", n, 1);
  const [za, zb] = checkPowerInputs(sdDiff, options.alpha ?? 0.05, options.power ?? 0.8);
  return ((za + zb) * sdDiff) / Math.sqrt(n);
}

/** Result of operatingCharacteristic (probabilities in [0, 1]). */
export interface OperatingCharacteristic {
  /** sdDiff / sqrt(n) */
  se: number;
  /** P(estimate >= threshold and the CI's lower bound > 0): the PASS gate */
  pPass: number;
  /** P(the CI's lower bound >= threshold): the CONFIRMED gate */
  pConfirm: number;
}

/**
 * Operating characteristic of the milestone's gates for a mean paired difference, by the normal
 * approximation: the estimate ~ N(trueDelta, se^2), se = sdDiff / sqrt(n), CI = estimate -/+
 * z_{1-alpha/2} se. PASS needs estimate >= threshold and lower > 0, so
 * pPass = Phi((trueDelta - max(threshold, z se)) / se); CONFIRMED needs lower >= threshold, so
 * pConfirm = Phi((trueDelta - threshold - z se) / se). At trueDelta = threshold and a large n,
 * pPass tends to 1/2: a point-estimate gate. With sdDiff = 0 both are 0 or 1. Default alpha 0.05.
 */
export function operatingCharacteristic(trueDelta: number, sdDiff: number, n: number, options: { threshold: number; alpha?: number }): OperatingCharacteristic {
  checkNumber("trueDelta", trueDelta);
  checkNumber("sdDiff", sdDiff);
  if (sdDiff < 0) fail("out_of_range", `sdDiff must be >= 0, got ${sdDiff}`);
  checkInteger("n", n, 1);
  const threshold = checkNumber("threshold", options.threshold);
  const alpha = checkProbability("alpha", options.alpha ?? 0.05);
  const z = zCritical(alpha);
  const se = sdDiff / Math.sqrt(n);
  if (se === 0) {
    return { se, pPass: trueDelta >= threshold && trueDelta > 0 ? 1 : 0, pConfirm: trueDelta >= threshold ? 1 : 0 };
  }
  const gate = threshold > z * se ? threshold : z * se;
  return { se, pPass: normalCdf((trueDelta - gate) / se), pConfirm: normalCdf((trueDelta - threshold - z * se) / se) };
}

/** Result of pairedProportionGate: the milestone's downstream gate on one 0/1 paired table. */
export interface PairedProportionGate {
  /** PASS or CONFIRMED: the estimate >= threshold and the exact McNemar test rejects 0 (with the
   *  Tango interval excluding 0 too), or the interval's lower bound >= threshold */
  passes: boolean;
  /** CONFIRMED: Tango's lower bound >= threshold (and the test agrees it excludes 0) */
  confirm: boolean;
}

/**
 * The downstream gate milestone.ts downstreamCriterion applies to 0/1 per-task scores, above its n
 * floor, on one table: b = base right & candidate wrong, c = base wrong & candidate right, n pairs.
 * Tango's score interval (confidence 1 - alpha) and the exact McNemar test (rejects at p < alpha):
 * FAIL when the upper bound < threshold; INCONCLUSIVE when the test and the interval disagree about
 * 0; CONFIRMED when the lower bound >= threshold; PASS when (c - b) / n >= threshold and the test
 * rejects. Default alpha 0.05.
 */
export function pairedProportionGate(b: number, c: number, n: number, options: { threshold: number; alpha?: number }): PairedProportionGate {
  const threshold = checkNumber("threshold", options.threshold);
  const alpha = checkProbability("alpha", options.alpha ?? 0.05);
  const t = tangoScoreInterval(b, c, n, { confidence: 1 - alpha });
  const rejects = mcnemarExactP(b, c) < alpha;
  if (t.upper < threshold) return { passes: false, confirm: false };
  if (rejects !== t.lower > 0) return { passes: false, confirm: false };
  if (t.lower >= threshold) return { passes: true, confirm: true };
  return { passes: t.estimate >= threshold && rejects, confirm: false };
}

/** Draws and seed of the gate simulation where the report and `agent plan` use it: the Monte
 *  Carlo SE of either probability is at most 0.5 / sqrt(10 000) = 0.005, below the 2 printed
 *  decimals' 0.01. */
export const GATE_SIMULATION_DRAWS = 10000;
export const GATE_SIMULATION_SEED = 0;

/** Result of simulatedOperatingCharacteristic (probabilities in [0, 1]). */
export interface SimulatedOperatingCharacteristic {
  /** the share of draws the gate PASSes or CONFIRMs */
  pPass: number;
  /** the share of draws it CONFIRMs */
  pConfirm: number;
  /** P(discordant) the draws used: max(discordance, |trueDelta|) */
  discordance: number;
  draws: number;
  seed: number;
  /** 0.5 / sqrt(draws): the largest Monte Carlo SE either share can have */
  mcError: number;
}

/**
 * P(PASS) and P(CONFIRMED) of the real downstream gate (pairedProportionGate), by simulation.
 * Model: n tasks, independently discordant with probability q = max(discordance, |trueDelta|)
 * (discordance: P(the two disagree on a task), e.g. an eval's (b + c) / n), split so that
 * P(base wrong & candidate right) - P(base right & candidate wrong) = trueDelta:
 * pb = (q - trueDelta) / 2, pc = (q + trueDelta) / 2. Each draw takes one Rng uint32 u per task
 * (seeded with `seed`; module docs): u < floor(pb 2^32) counts to b, else u < floor(q 2^32) to c;
 * the gate judges (b, c, n) (memoised per table). Unlike operatingCharacteristic it has the
 * discreteness of the exact test and Tango's asymmetric interval: at n = 264, discordance 0.35
 * and a true +5 pp it gives about 0.31 where the normal approximation gives 0.37 (sd 0.35).
 * Defaults: alpha 0.05, GATE_SIMULATION_DRAWS draws, seed GATE_SIMULATION_SEED.
 */
export function simulatedOperatingCharacteristic(
  trueDelta: number,
  discordance: number,
  n: number,
  options: { threshold: number; alpha?: number; draws?: number; seed?: number },
): SimulatedOperatingCharacteristic {
  checkNumber("trueDelta", trueDelta);
  if (trueDelta < -1 || trueDelta > 1) fail("out_of_range", `trueDelta must be in [-1, 1], got ${trueDelta}`);
  checkNumber("discordance", discordance);
  if (discordance < 0 || discordance > 1) fail("out_of_range", `discordance must be in [0, 1], got ${discordance}`);
  checkInteger("n", n, 1);
  const threshold = checkNumber("threshold", options.threshold);
  const alpha = checkProbability("alpha", options.alpha ?? 0.05);
  const draws = checkInteger("draws", options.draws ?? GATE_SIMULATION_DRAWS, 1);
  const seed = options.seed ?? GATE_SIMULATION_SEED;
  const rng = new Rng(seed);
  const q = discordance > Math.abs(trueDelta) ? discordance : Math.abs(trueDelta);
  const cutB = Math.floor(((q - trueDelta) / 2) * TWO_POW_32);
  const cutC = Math.floor(q * TWO_POW_32);
  const memo = new Map<number, number>(); // b * (n + 1) + c -> 0 neither, 1 pass, 2 confirm
  let passes = 0;
  let confirms = 0;
  for (let r = 0; r < draws; r++) {
    let b = 0;
    let c = 0;
    for (let i = 0; i < n; i++) {
      const u = rng.nextUint32();
      if (u < cutB) b++;
      else if (u < cutC) c++;
    }
    const key = b * (n + 1) + c;
    let g = memo.get(key);
    if (g === undefined) {
      const gate = pairedProportionGate(b, c, n, { threshold, alpha });
      g = gate.confirm ? 2 : gate.passes ? 1 : 0;
      memo.set(key, g);
    }
    if (g >= 1) passes++;
    if (g === 2) confirms++;
  }
  return { pPass: passes / draws, pConfirm: confirms / draws, discordance: q, draws, seed, mcError: 0.5 / Math.sqrt(draws) };
}

/** Result of plannedPairedSd. */
export interface PlannedPairedSd {
  pBase: number;
  /** pBase + delta */
  pCandidate: number;
  /** P(the two disagree on a task) under the model */
  discordance: number;
  /** sd of the per-task difference d = candidate - base: sqrt(discordance - delta^2) */
  sdDiff: number;
}

/**
 * The sd of a 0/1 paired difference before any adapter exists, for planning (`agent plan`):
 * with base accuracy pBase and a true delta, Var(d) = P(discordant) - delta^2, and P(discordant)
 * depends on how the errors overlap. "conversions": the candidate only fixes base errors and
 * breaks nothing (P(discordant) = |delta|: the most optimistic, smallest sd); "independent": the
 * two are right independently (P(discordant) = pBase (1 - pC) + (1 - pBase) pC, so Var(d) =
 * pBase (1 - pBase) + pC (1 - pC): pessimistic, as two models of one task usually err together).
 */
export function plannedPairedSd(pBase: number, delta: number, options: { model: "conversions" | "independent" }): PlannedPairedSd {
  checkNumber("pBase", pBase);
  checkNumber("delta", delta);
  if (pBase < 0 || pBase > 1) fail("out_of_range", `pBase must be in [0, 1], got ${pBase}`);
  const pCandidate = pBase + delta;
  if (pCandidate < 0 || pCandidate > 1) fail("out_of_range", `pBase + delta must be in [0, 1], got ${pCandidate}`);
  const model = options.model;
  if (model !== "conversions" && model !== "independent") fail("bad_option", `model must be "conversions" or "independent", got ${String(model)}`);
  const discordance = model === "conversions" ? Math.abs(delta) : pBase * (1 - pCandidate) + (1 - pBase) * pCandidate;
  const v = discordance - delta * delta;
  return { pBase, pCandidate, discordance, sdDiff: Math.sqrt(v > 0 ? v : 0) };
}
