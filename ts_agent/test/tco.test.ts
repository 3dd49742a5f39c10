import assert from "node:assert/strict";
import { test } from "node:test";

import { ADAMW_BYTES_PER_PARAM, bytesPerParam, computeSide, formatBytes, parseStepTimeBreakdown, tcoMemory } from "../src/agent/report/tco.js";

// Hand numbers: P = 1000 base params, L = 100 LoRA params.
//   fp32 (b = 4): trained LoRA model = (1000+100)*4 + 100*4 + 8*100 = 4400 + 400 + 800 = 5600
//                 trained full model = 1000*4 + 1000*4 + 8*1000   = 4000 + 4000 + 8000 = 16000
//                 frozen model       = 1000*4                      = 4000
test("TCO memory matches hand arithmetic (fp32, beta > 0)", () => {
  const configs = tcoMemory({ baseParams: 1000, loraParams: 100, precision: "fp32", beta: 0.04 });
  const byName = Object.fromEntries(configs.map((c) => [c.name, c]));
  assert.deepEqual(Object.keys(byName), ["GRPO + LoRA", "GRPO + full fine-tuning", "PPO + LoRA", "PPO + full fine-tuning"]);

  const grpoLora = byName["GRPO + LoRA"];
  assert.deepEqual(
    grpoLora.lines.map((l) => [l.role, l.weights, l.gradients, l.optimizer, l.total]),
    [
      ["policy", 4400, 400, 800, 5600],
      ["reference", 0, 0, 0, 0], // the adapter-disabled policy
    ],
  );
  assert.equal(grpoLora.total, 5600);

  const grpoFull = byName["GRPO + full fine-tuning"];
  assert.deepEqual(
    grpoFull.lines.map((l) => [l.role, l.total]),
    [
      ["policy", 16000],
      ["reference", 4000],
    ],
  );
  assert.equal(grpoFull.total, 20000);

  const ppoLora = byName["PPO + LoRA"];
  assert.deepEqual(
    ppoLora.lines.map((l) => [l.role, l.total]),
    [
      ["policy", 5600],
      ["reference", 0],
      ["critic", 5600],
      ["reward model", 4000],
    ],
  );
  assert.equal(ppoLora.total, 15200);

  const ppoFull = byName["PPO + full fine-tuning"];
  assert.deepEqual(
    ppoFull.lines.map((l) => [l.role, l.total]),
    [
      ["policy", 16000],
      ["reference", 4000],
      ["critic", 16000],
      ["reward model", 4000],
    ],
  );
  assert.equal(ppoFull.total, 40000);
});

test("bf16 halves weights and gradients but not the fp32 AdamW states; beta = 0 drops the reference", () => {
  assert.equal(bytesPerParam("bf16"), 2);
  assert.equal(ADAMW_BYTES_PER_PARAM, 8);
  const [grpoLora, grpoFull, , ppoFull] = tcoMemory({ baseParams: 1000, loraParams: 100, precision: "bf16", beta: 0 });
  // (1000+100)*2 + 100*2 + 8*100 = 2200 + 200 + 800
  assert.deepEqual(
    grpoLora.lines.map((l) => [l.role, l.weights, l.gradients, l.optimizer]),
    [["policy", 2200, 200, 800]],
  );
  // 1000*2 + 1000*2 + 8*1000
  assert.equal(grpoFull.total, 12000);
  // policy 12000 + critic 12000 + reward model 2000; no reference
  assert.deepEqual(
    ppoFull.lines.map((l) => l.role),
    ["policy", "critic", "reward model"],
  );
  assert.equal(ppoFull.total, 26000);
});

test("formatBytes uses binary prefixes", () => {
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1536), "1.50 KiB");
  assert.equal(formatBytes(3 * 1024 * 1024 * 1024), "3.00 GiB");
});

test("ranked preference: DPO always carries the reference (free with LoRA, a frozen copy in full FT); PPO-RLHF adds critic and reward model", async () => {
  const { tcoMemoryPreference } = await import("../src/agent/report/tco.js");
  const c = tcoMemoryPreference({ baseParams: 1_000_000, loraParams: 50_000, precision: "fp32", beta: 0.1 });
  assert.deepEqual(
    c.map((x) => x.name),
    ["DPO + LoRA", "DPO + full fine-tuning", "PPO (RLHF) + LoRA", "PPO (RLHF) + full fine-tuning"],
  );
  assert.deepEqual(
    c[0].lines.map((l) => [l.role, l.total]),
    [
      ["policy", 4_800_000],
      ["reference", 0],
    ],
  );
  assert.deepEqual(
    c[1].lines.map((l) => l.role),
    ["policy", "reference"],
  );
  assert.equal(c[1].lines[1].total, 4_000_000);
  assert.deepEqual(
    c[2].lines.map((l) => l.role),
    ["policy", "reference", "critic", "reward model"],
  );
});

// Hand numbers: 4 steps; totals generation 4, forward 2, backward 3, optimizer 0.4, the rest 0.6 s
// -> 2.5 s per step; generation 1.0 s (40%); critic = 2 x 0.5 + 0.75 = 1.75 s (70%).
test("compute side: per-step means, generation share and the critic estimate from summary.json's time_breakdown", () => {
  const b = parseStepTimeBreakdown({
    steps: 4,
    step_seconds_total: { generation: 4, scoring: 0.2, rollout_logprobs: 0.2, forward: 2, backward: 3, optimizer: 0.4, other: 0.1, between_steps: 0.1 },
  });
  assert.ok(b);
  const c = computeSide(b);
  assert.equal(c.stepSeconds, 2.5);
  assert.equal(c.generationShare, 0.4);
  assert.equal(c.criticSeconds, 1.75);
  assert.equal(c.criticShare, 0.7);
  assert.equal(c.phases.reduce((s, p) => s + p.share, 0).toFixed(12), (1).toFixed(12));
  assert.equal(parseStepTimeBreakdown(undefined), null);
  assert.equal(parseStepTimeBreakdown({ steps: 0, step_seconds_total: {} }), null);
});
