/**
 * The one progress line (agent/train/run.ts): elapsed and ETA from the events' own timestamps,
 * the ETA from training steps only (the step-0 held-out measurement before the first train step
 * never counts), mode-aware metrics (no "reward nan kl nan" in ranked-preference mode), and off a
 * TTY one line every N steps or 10 s; the starting phase between RUNNING and step 1; the outcome's
 * held-out line per mode; the detach hint's commands.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";

import { RunEventSchema, RunResultSchema, RunState } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { pairedBootstrapCI } from "../src/agent/core/stats/index.js";
import { eventLogger } from "../src/agent/train/run.js";
import { RunClock, heldOutChangeLine, progressLine, trainProgressPrinter } from "../src/agent/train/progress.js";
import { detachLines } from "../src/pipeline/follow.js";

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

test("between RUNNING and the first step the line says what is happening (model load, step-0 held-out measurement)", () => {
  const lines: Array<[string, boolean | undefined]> = [];
  const logger = eventLogger((line, final) => lines.push([line, final]));
  logger.onEvent(create(RunEventSchema, { runId: "r", time: at(0), kind: { case: "stateChange", value: { state: RunState.QUEUED } } }));
  logger.onEvent(create(RunEventSchema, { runId: "r", time: at(1), kind: { case: "stateChange", value: { state: RunState.RUNNING } } }));
  logger.onEvent(stepEvent(15, 1, { reward: 0.5, kl: 0.01 }));
  assert.deepEqual(
    lines.map(([l]) => l),
    [
      "[r] QUEUED",
      "[r] RUNNING",
      "[r] starting: loading the model, then the held-out measurement at step 0; the step line follows from the first step",
      "step 1/10 reward 0.500 kl 0.0100 elapsed 0:15 ETA -:--",
    ],
  );
  assert.equal(lines[2][1], true, "its own line: it stays while the model loads");
});

test("the outcome's held-out line: relative change for GRPO, the paired change of pairwise accuracy for ranked preference", () => {
  const grpo = create(RunResultSchema, {
    startReward: { step: 0n, mean: 0.25, perPrompt: [0.25, 0.25] },
    endReward: { step: 30n, mean: 0.4, perPrompt: [0.3, 0.5] },
    relativeChange: 0.6,
    relativeChangeCiLow: 0.2,
    relativeChangeCiHigh: 1,
  });
  assert.equal(heldOutChangeLine(grpo), "held-out reward: step 0 0.250 -> step 30 0.400 (60.0%, 95% CI 20.0% to 100.0%)");
  const start = [0.5, 0.5, 0.5, 0.5];
  const end = [0.5, 1, 0.5, 1];
  const pref = create(RunResultSchema, {
    startReward: { step: 0n, mean: 0.5, perPrompt: start, numPrompts: 4 },
    endReward: { step: 40n, mean: 0.75, perPrompt: end, numPrompts: 4 },
    relativeChange: 0.5, // what a ratio to 0.5 would print: never shown for pairwise accuracy
    preferenceMetrics: { pairwiseAccuracy: 0.75 },
  });
  const ci = pairedBootstrapCI(start, end, { resamples: 2000, seed: 0 });
  const line = heldOutChangeLine(pref)!;
  assert.equal(
    line,
    `held-out pairwise accuracy: step 0 0.500 -> step 40 0.750 (+0.250, paired 95% CI +${ci.lower.toFixed(3)} to +${ci.upper.toFixed(3)} over 4 groups; 0.5 at step 0 by construction)`,
  );
  assert.doesNotMatch(line, /reward|\d\.\d%/, "no reward, no percentage of a ratio to 0.5");
});

test("the detach hint's commands take the flags they are printed with: cancel gets --address, never --evals-dir", () => {
  const lines = detachLines("r1", { address: "10.0.0.5:50151", "evals-dir": "/tmp/evals" });
  assert.match(lines[1], /^ {2}re-attach: +agent watch r1 --address 10\.0\.0\.5:50151 --evals-dir \/tmp\/evals$/);
  assert.match(lines[2], /^ {2}cancel: +agent cancel r1 --address 10\.0\.0\.5:50151 +\(or press Ctrl-C again within 2 s\)$/);
  assert.equal(detachLines("", { address: "h:1", "evals-dir": "/e" })[0], "detached before the sidecar named the run; find it with: agent runs --address h:1");
});

test("a warm start's (SFT) line shows its loss and token accuracy, an agent run's what its episodes did", () => {
  assert.match(progressLine(3, 32, { loss: 1.23456, mean_token_accuracy: 0.5 }, 10, 20), /^step 3\/32 loss 1\.2346 mean_token_accuracy 0\.500 elapsed/);
  assert.match(
    progressLine(
      1,
      2,
      { reward: 0.5, kl: 0, "episodes/turns": 2, "tools/call_frequency": 1, "tools/failure_frequency": 0, "episodes/limit_hit": 0 },
      1,
      undefined,
    ),
    /^step 1\/2 reward 0\.500 kl 0\.0000 turns\/episode 2\.00 tool calls\/episode 1\.00 tool errors\/call 0\.00 limits hit 0\.00 elapsed/,
  );
});

test("a held-out reward that starts at 0 has no relative change, said in words (it printed NaN%)", () => {
  const r = create(RunResultSchema, {
    startReward: { step: 0n, mean: 0 },
    endReward: { step: 32n, mean: 1.3 },
    relativeChange: NaN,
    relativeChangeCiLow: NaN,
    relativeChangeCiHigh: NaN,
  });
  assert.equal(heldOutChangeLine(r), "held-out reward: step 0 0.000 -> step 32 1.300 (relative change undefined: the step-0 mean is 0.000)");
});
