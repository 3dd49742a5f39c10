/**
 * The one progress line (agent/train/run.ts): elapsed and ETA from the events' own timestamps,
 * the ETA from training steps only (the step-0 held-out measurement before the first train step
 * never counts), mode-aware metrics (no "reward nan kl nan" in ranked-preference mode), and off a
 * TTY one line every N steps or 10 s.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";

import { RunEventSchema, RunState } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { RunClock, progressLine, trainProgressPrinter } from "../src/agent/train/run.js";

const at = (s: number) => timestampFromMs(1_700_000_000_000 + s * 1000);
const stepEvent = (s: number, step: number, metrics: Record<string, number>, maxSteps = 10) =>
  create(RunEventSchema, { runId: "r", time: at(s), kind: { case: "trainStep", value: { step: BigInt(step), maxSteps: BigInt(maxSteps), metrics } } });

test("ETA counts training steps only, from the events' timestamps", () => {
  const clk = new RunClock();
  clk.line(create(RunEventSchema, { runId: "r", time: at(0), kind: { case: "stateChange", value: { state: RunState.RUNNING } } }));
  // model load + step-0 measurement take 60 s before the first train step
  assert.equal(clk.line(stepEvent(60, 1, { reward: 0.5, kl: 0.01 })), "step 1/10 reward 0.500 kl 0.0100 elapsed 1:00 ETA -:--");
  // then 2 s per step: 8 steps left = 0:16, not (62 s / 2 steps) * 8 = 4:08
  assert.equal(clk.line(stepEvent(62, 2, { reward: 0.5, kl: 0.01 })), "step 2/10 reward 0.500 kl 0.0100 elapsed 1:02 ETA 0:16");
  assert.match(clk.line(stepEvent(78, 10, { reward: 0.6, kl: 0.02 }))!, /elapsed 1:18 ETA 0:00$/);
});

test("ranked-preference mode shows held-out pairwise accuracy, never reward nan kl nan", () => {
  const line = progressLine(5, 100, { "heldout/pairwise_accuracy": 0.625, "rewards/margins": 0.1, loss: 0.69 }, 10, 90);
  assert.equal(line, "step 5/100 heldout/pairwise_accuracy 0.625 rewards/margins 0.100 loss 0.6900 elapsed 0:10 ETA 1:30");
  assert.doesNotMatch(line, /nan/i);
  assert.equal(progressLine(1, 4, { reward: Number.NaN }, 1, undefined), "step 1/4 reward - kl - elapsed 0:01 ETA -:--");
});

test("off a TTY: the first step, every N-th, the last, and a 10 s heartbeat; final lines always", () => {
  const written: string[] = [];
  const write = process.stdout.write;
  const isTTY = process.stdout.isTTY;
  Object.defineProperty(process.stdout, "isTTY", { value: false, configurable: true });
  process.stdout.write = ((s: string) => (written.push(s), true)) as typeof process.stdout.write;
  try {
    const p = trainProgressPrinter({ stepsOffTty: true, everySteps: 5 });
    for (let i = 1; i <= 12; i++) p.log(`step ${i}/12`, false, { step: i, maxSteps: 12 });
    p.log("[r] SUCCEEDED", true);
    const demo = trainProgressPrinter({ stepsOffTty: false });
    for (let i = 1; i <= 12; i++) demo.log(`demo ${i}/12`, false, { step: i, maxSteps: 12 });
  } finally {
    process.stdout.write = write;
    Object.defineProperty(process.stdout, "isTTY", { value: isTTY, configurable: true });
  }
  // demo (no per-step lines): the heartbeat's first line, and the last step
  assert.deepEqual(written.join("").trim().split("\n"), ["step 1/12", "step 5/12", "step 10/12", "step 12/12", "[r] SUCCEEDED", "demo 1/12", "demo 12/12"]);
});
