import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { RunSchema, RunState, TrainMode } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { bootstrapMeanCI, wilsonInterval } from "../src/agent/eval/stats.js";
import { preferenceAnalysis } from "../src/agent/report/preference.js";

function prefRun(metrics: Record<string, unknown>) {
  const perPrompt = [0.5, 0.5, 0.5, 0.5, 0.5];
  return create(RunSchema, {
    runId: "pref",
    state: RunState.SUCCEEDED,
    request: { mode: TrainMode.RANKED_PREFERENCE, preference: { beta: 0.1 } },
    result: {
      startReward: { mean: 0.5, perPrompt, numPrompts: 5 },
      endReward: { mean: 0.7, perPrompt: [0.5, 1, 0.5, 1, 0.5], numPrompts: 5, ciLow: 0.5, ciHigh: 0.9 },
      preferenceMetrics: metrics,
    },
  });
}

describe("ranked-preference section: every metric gets a CI over its units", () => {
  test("win rate, win margin and consistency: percentile bootstrap over the per-group (per-prompt) values", () => {
    const perGroupWin = [1, 0.5, 0, 1, 1];
    const perGroupMargin = [1, -1, 2, 0.5, 1];
    const perPromptConsistency = [0.1, 0.3, 0.2];
    const p = preferenceAnalysis(prefRun({ groupWinRate: 0.7, winMargin: 0.7, preferenceConsistency: 0.2,
      perGroupWin, perGroupMargin, perPromptConsistency }), [])!;
    assert.deepEqual(p.groupWinRateCi, bootstrapMeanCI(perGroupWin, { seed: 0, resamples: 2000 }));
    assert.deepEqual(p.winMarginCi, bootstrapMeanCI(perGroupMargin, { seed: 0, resamples: 2000 }));
    assert.deepEqual(p.consistencyCi, bootstrapMeanCI(perPromptConsistency, { seed: 0, resamples: 2000 }));
    assert.ok(p.winMarginCi!.lower < 0.7 && 0.7 < p.winMarginCi!.upper);
    assert.match(p.groupWinRateMethod, /bootstrap over 5 groups/);
  });

  test("a sidecar without per-group values: Wilson for the win rate, no CI claimed for the rest", () => {
    const p = preferenceAnalysis(prefRun({ groupWinRate: 0.6, winMargin: 0.4, preferenceConsistency: 0.2 }), [])!;
    const w = wilsonInterval(3, 5);
    assert.deepEqual(p.groupWinRateCi, { lower: w.lower, upper: w.upper });
    assert.equal(p.winMarginCi, null);
    assert.equal(p.consistencyCi, null);
  });
});
