import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { create, toJsonString } from "@bufbuild/protobuf";

import { GrpoConfigSchema, RunEventSchema, RunSchema, RunState, TrainMode } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { bootstrapMeanCI, wilsonInterval } from "../src/agent/core/stats/index.js";
import { preferenceCurve } from "../src/agent/report/preference-curve.js";
import { preferenceAnalysis } from "../src/agent/report/preference.js";
import { writeReport } from "../src/agent/report/run-report.js";

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
    const p = preferenceAnalysis(
      prefRun({ groupWinRate: 0.7, winMargin: 0.7, preferenceConsistency: 0.2, perGroupWin, perGroupMargin, perPromptConsistency }),
      [],
    )!;
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

describe("report.md of a ranked-preference run: its own curve and settings (issue 22, item 13)", () => {
  test("the held-out pairwise accuracy curve is drawn from the events; DPO's settings, not G=-, beta=-; no reward-vs-step.png or KL pending", () => {
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-pref-"));
    const dir = join(evalsDir, "runs", "pref");
    mkdirSync(dir, { recursive: true });
    const run = prefRun({ groupWinRate: 0.6, winMargin: 0.4, preferenceConsistency: 0.2 });
    run.request!.grpo = create(GrpoConfigSchema, { learningRate: 5e-5, maxSteps: 20, perDeviceTrainBatchSize: 4 });
    run.result!.stepsCompleted = 20n;
    writeFileSync(join(dir, "run.json"), toJsonString(RunSchema, run));
    const curve: Array<[number, Record<string, number>]> = [
      [0, { "heldout/pairwise_accuracy": 0.5 }],
      [10, { "heldout/pairwise_accuracy": 0.6, "rewards/accuracies": 0.55, loss: 0.69 }],
      [20, { "heldout/pairwise_accuracy": 0.7, "rewards/accuracies": 0.75, loss: 0.6 }],
    ];
    const events = curve.map(([step, metrics], i) =>
      toJsonString(
        RunEventSchema,
        create(RunEventSchema, { seq: BigInt(i + 1), runId: "pref", kind: { case: "trainStep", value: { step: BigInt(step), maxSteps: 20n, metrics } } }),
      ),
    );
    writeFileSync(join(dir, "events.jsonl"), events.join("\n") + "\n");
    writeFileSync(join(dir, "preference-vs-step.csv"), "step,heldout/pairwise_accuracy\n");
    const { path, analysis } = writeReport(evalsDir, "pref", new Date("2026-12-01T00:00:00Z"));
    const md = readFileSync(path, "utf8");
    assert.doesNotMatch(md, /reward-vs-step\.png/);
    assert.doesNotMatch(md, /G=-|beta=-/);
    assert.match(md, /## Held-out pairwise accuracy curve\n\n!\[held-out pairwise accuracy per logged step\]\(preference-vs-step\.svg\)/);
    assert.match(md, /3 logged steps; held-out pairwise accuracy 0\.500 at step 0 -> 0\.700 at step 20 .*`preference-vs-step\.csv`/);
    assert.match(md, /Steps completed: 20, [\d.]+ s of training; beta=0\.1, lr=0\.00005, max_steps=20, batch=4, held-out groups=5; base model/);
    assert.ok(!analysis.pending.some((p) => /reward-vs-step|KL was not logged/.test(p)), analysis.pending.join("\n"));
    const svg = readFileSync(join(dir, "preference-vs-step.svg"), "utf8");
    const lines = [...svg.matchAll(/<polyline [^>]*points="([^"]+)"/g)].map((m) => m[1].split(" ").length);
    assert.deepEqual(lines, [3, 2], "held-out at 3 steps, the training batch's accuracy at the 2 it was logged");
    assert.match(md, /`preference-vs-step\.svg`/);
  });

  test("preferenceCurve: the logged steps in order, NaN where a metric was not logged", () => {
    const pts = preferenceCurve([
      { step: 10, metrics: { "heldout/pairwise_accuracy": 0.6, "rewards/accuracies": 0.5 } },
      { step: 0, metrics: { "heldout/pairwise_accuracy": 0.5 } },
      { step: 5, metrics: { loss: 0.7 } },
    ]);
    assert.deepEqual(
      pts.map((p) => p.step),
      [0, 10],
    );
    assert.ok(Number.isNaN(pts[0].train));
    assert.equal(pts[1].heldOut, 0.6);
  });
});

describe("a ranked-preference run is judged against its own baseline, not baseline.json (issue 32, item 6)", () => {
  test("no baseline.json and no eval: not GATED, no `agent baseline set` advice (it would evaluate the AML model)", () => {
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-pref-own-"));
    const dir = join(evalsDir, "runs", "pref");
    mkdirSync(dir, { recursive: true });
    const run = prefRun({ groupWinRate: 0.6, winMargin: 0.4, preferenceConsistency: 0.2 });
    run.request!.baseModel = "embedded:my/tasks.jsonl";
    writeFileSync(join(dir, "run.json"), toJsonString(RunSchema, run));
    const { path, analysis } = writeReport(evalsDir, "pref", new Date("2026-12-01T00:00:00Z"));
    const md = readFileSync(path, "utf8");
    assert.equal(analysis.milestone.gated, false, analysis.milestone.reason);
    assert.equal(analysis.baselineMatch.status, "own");
    assert.doesNotMatch(md, /GATED|agent baseline set/);
    assert.ok(!analysis.pending.some((p) => /baseline set|baseline\.json/.test(p)), analysis.pending.join("\n"));
    assert.match(md, /\| baseline \| [^|]+ \| OWN \| step 0 of its 5 held-out groups \(the reference policy: embedded:my\/tasks\.jsonl\)/);
    assert.ok(
      analysis.pending.some((p) => /ranked-preference run .* its own held-out groups/.test(p)),
      analysis.pending.join("\n"),
    );
  });
});
