/** `agent plan --config`'s lines from an EstimateMemory answer (issue 23): each component with its
 *  formula, the total, the free memory, and the knob to lower when it does not fit. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { EstimateMemoryResponseSchema } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { memoryLines } from "../src/pipeline/plan-memory.js";

const GiB = 2n ** 30n;

test("the estimate's lines: components, total, and the knob when it does not fit", () => {
  const res = create(EstimateMemoryResponseSchema, {
    components: [
      { name: "weights", bytes: GiB, formula: "494.0M params x 2 bytes (bf16)" },
      { name: "activations", bytes: 3n * GiB, formula: "16 sequences x 288 tokens" },
    ],
    totalBytes: 4n * GiB,
    device: "cuda:0",
    deviceFreeBytes: 2n * GiB,
    knobToLower: "grpo.per_device_train_batch_size",
  });
  const lines = memoryLines(res);
  assert.equal(lines[0], "memory estimate on cuda:0 (per process, from the model's config.json):");
  assert.equal(lines[1], "  weights        1.00 GiB  494.0M params x 2 bytes (bf16)");
  assert.match(lines[3], /^  total +4\.00 GiB  \(no second model for the reference under LoRA/);
  assert.equal(lines[4], "free on cuda:0: 2.00 GiB: does NOT fit; lower grpo.per_device_train_batch_size");
  assert.equal(memoryLines(create(EstimateMemoryResponseSchema, { ...res, knobToLower: "", deviceFreeBytes: 8n * GiB }))[4], "free on cuda:0: 8.00 GiB: fits");
});
