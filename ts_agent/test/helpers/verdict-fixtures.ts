/** The milestone's evidence as the verdict tests build it: a clear reward gain, and `over` changes fields. */
import type { RewardEvidence } from "../../src/agent/verdict/milestone.js";

/** Held-out reward 0.30 -> 0.45 (+50%, CI 30-70%) on 32 prompts x 4 samples. */
export const reward = (over: Partial<RewardEvidence> = {}): RewardEvidence => ({
  startMean: 0.3,
  endMean: 0.45,
  relativeChange: 0.5,
  relativeChangeCiLow: 0.3,
  relativeChangeCiHigh: 0.7,
  numPrompts: 32,
  samplesPerPrompt: 4,
  ...over,
});
