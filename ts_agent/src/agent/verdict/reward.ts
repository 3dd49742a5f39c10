/**
 * The reward half of the verdict: the held-out reward's relative change, end vs step 0, computed
 * in TS from the per-prompt scores the Run result carries (HeldOutReward.per_prompt, in held-out
 * prompt order at both ends).
 *
 * The sidecar computes the same number for summary.json and RunResult.relative_change
 * (py_trainer training.py: stats.relative_change_ci over the same per-prompt lists, seeded with
 * the request's grpo.seed, BOOTSTRAP_RESAMPLES = 2000); stats.ts and stats.py are bit-identical,
 * and `make parity` checks that this file's numbers equal summary.json's for the run folders it is
 * given (src/parity/reward.ts). A run record without per-prompt scores (an older sidecar, a
 * hand-written fixture) is judged on the sidecar's numbers, and the evidence says so.
 */
import type { Run, RunResult } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { operatingCharacteristic, relativeChangeCI, type RelativeChange } from "../eval/stats.js";
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
  const change = ts
    ? { relativeChange: ts.estimate, relativeChangeCiLow: ts.lower, relativeChangeCiHigh: ts.upper }
    : { relativeChange: r.relativeChange, relativeChangeCiLow: r.relativeChangeCiLow, relativeChangeCiHigh: r.relativeChangeCiHigh };
  return {
    startMean: r.startReward.mean,
    endMean: r.endReward.mean,
    ...change,
    numPrompts: r.endReward.numPrompts,
    samplesPerPrompt: r.endReward.samplesPerPrompt,
    pPassAtThreshold: rewardPassProbability(change.relativeChangeCiLow, change.relativeChangeCiHigh, r.endReward.numPrompts),
    computedFrom: ts
      ? `computed in TS from the ${r.endReward.perPrompt.length} per-prompt scores at each end (${HELD_OUT_RESAMPLES} resamples, seed ${heldOutSeed(run)}; equal to the sidecar's summary.json by \`make parity\`)`
      : "the sidecar's numbers (run.json carries no per-prompt scores)",
  };
}
