/**
 * The reward half of the verdict: the held-out reward's relative change, end vs step 0, computed
 * in TS from the per-prompt scores the Run result carries (HeldOutReward.per_prompt, in held-out
 * prompt order at both ends).
 *
 * The sidecar computes the same number for summary.json and RunResult.relative_change
 * (py_trainer training/skeleton.py: stats.relative_change_ci over the same per-prompt lists, seeded with
 * the request's grpo.seed, BOOTSTRAP_RESAMPLES = 2000); core/stats/ and py_trainer's stats/ are bit-identical,
 * and `make parity` checks that this file's numbers equal summary.json's for the run folders it is
 * given (src/parity/reward.ts). A run record without per-prompt scores (an older sidecar, a
 * hand-written fixture) is judged on the sidecar's numbers, and the evidence says so.
 */
import type { Run, RunResult } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { mcnemarExactP, operatingCharacteristic, pairedComparison, relativeChangeCI, type RelativeChange } from "../core/stats/index.js";
import { REWARD_MIN_RELATIVE_CHANGE, type RewardEvidence } from "./milestone.js";

/** Resamples of the held-out paired bootstrap: the sidecar's training.BOOTSTRAP_RESAMPLES. */
export const HELD_OUT_RESAMPLES = 2000;

/** The bootstrap seed the sidecar uses for the relative change: the request's grpo.seed (0 when unset, its default). */
export function heldOutSeed(run: Pick<Run, "request">): number {
  return Number(run.request?.grpo?.seed ?? 0n);
}

/** Relative change end vs step 0 with its paired percentile bootstrap CI (fractions), from the
 *  per-prompt scores; null when either end has none or they differ in length. */
export function heldOutRelativeChange(result: Pick<RunResult, "startReward" | "endReward">, seed: number): RelativeChange | null {
  const a = result.startReward?.perPrompt ?? [];
  const b = result.endReward?.perPrompt ?? [];
  if (a.length === 0 || a.length !== b.length) return null;
  return relativeChangeCI([...a], [...b], { seed, resamples: HELD_OUT_RESAMPLES });
}

/** The test that governs the reward criterion's "excludes 0", on the per-prompt end - start over
 *  the scorable prompts (both ends finite). */
export interface HeldOutTest {
  /** scorable prompts: a score at both ends */
  n: number;
  /** mean of end - start (reward units) */
  meanDiff: number;
  test: "paired t test" | "exact sign test";
  /** two-sided p */
  p: number;
  /** p < .05 */
  rejects: boolean;
}

/** Alpha of the reward criterion's governing test (two-sided), as the 95% CI. */
export const HELD_OUT_TEST_ALPHA = 0.05;

/**
 * The deterministic test behind "the relative change excludes 0": the paired t test on the
 * per-prompt differences end - start (no resampling, so no seed and no Monte Carlo error; the
 * bootstrap CI of the relative change moved with its seed: on one fixed set of 64 x 4 scores at
 * +28% seeds 0-19 gave PASS 8 times). When every difference is the same (no spread, where t would
 * read certainty), the exact sign test (mcnemarExactP on the counts of falls and rises). Null with
 * fewer than 2 scorable prompts.
 */
export function heldOutTest(result: Pick<RunResult, "startReward" | "endReward">): HeldOutTest | null {
  const a0 = result.startReward?.perPrompt ?? [];
  const b0 = result.endReward?.perPrompt ?? [];
  if (a0.length === 0 || a0.length !== b0.length) return null;
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < a0.length; i++) {
    if (Number.isFinite(a0[i]) && Number.isFinite(b0[i])) {
      a.push(a0[i]);
      b.push(b0[i]);
    }
  }
  if (a.length < 2) return null;
  const pc = pairedComparison(a, b);
  if (pc.sdDiff > 0) return { n: pc.n, meanDiff: pc.meanDiff, test: "paired t test", p: pc.tTestP, rejects: pc.tTestP < HELD_OUT_TEST_ALPHA };
  // no spread (stats' noSpread, with its float tolerance): every difference equals the mean, so all
  // n rise, all n fall, or (mean 0 up to rounding) none moves; never counted from rounding noise
  const rises = pc.meanDiff > 0 ? pc.n : 0;
  const falls = pc.meanDiff < 0 ? pc.n : 0;
  const p = mcnemarExactP(falls, rises);
  return { n: pc.n, meanDiff: pc.meanDiff, test: "exact sign test", p, rejects: p < HELD_OUT_TEST_ALPHA };
}

/** P(PASS | true relative change = +20%) from the CI's width (se = width / (2 z)), by the
 *  normal approximation; null when the CI is not finite or has no width. */
export function rewardPassProbability(lo: number, hi: number, prompts: number): number | null {
  if (!Number.isFinite(lo) || !Number.isFinite(hi) || !(hi > lo) || prompts < 1) return null;
  const se = (hi - lo) / (2 * 1.959963984540054);
  return operatingCharacteristic(REWARD_MIN_RELATIVE_CHANGE, se * Math.sqrt(prompts), prompts, { threshold: REWARD_MIN_RELATIVE_CHANGE }).pPass;
}

/** The reward criterion's evidence from run.json; null without a start and an end reward. */
export function rewardEvidence(run: Run | null): RewardEvidence | null {
  const r = run?.result;
  if (!run || !r?.startReward || !r.endReward) return null;
  const ts = heldOutRelativeChange(r, heldOutSeed(run));
  const test = heldOutTest(r);
  const change = ts
    ? { relativeChange: ts.estimate, relativeChangeCiLow: ts.lower, relativeChangeCiHigh: ts.upper }
    : { relativeChange: r.relativeChange, relativeChangeCiLow: r.relativeChangeCiLow, relativeChangeCiHigh: r.relativeChangeCiHigh };
  return {
    startMean: r.startReward.mean,
    endMean: r.endReward.mean,
    ...change,
    numPrompts: r.endReward.numPrompts,
    // the minimum held-out size counts prompts with a score at both ends
    scorablePrompts: test ? test.n : null,
    test: test ? test.test : undefined,
    p: test ? test.p : null,
    rejects: test ? test.rejects : null,
    samplesPerPrompt: r.endReward.samplesPerPrompt,
    pPassAtThreshold: rewardPassProbability(change.relativeChangeCiLow, change.relativeChangeCiHigh, r.endReward.numPrompts),
    computedFrom: ts
      ? `computed in TS from the ${r.endReward.perPrompt.length} per-prompt scores at each end (${HELD_OUT_RESAMPLES} resamples, seed ${heldOutSeed(run)}; equal to the sidecar's summary.json by \`make parity\`)`
      : "the sidecar's numbers (run.json carries no per-prompt scores)",
  };
}
