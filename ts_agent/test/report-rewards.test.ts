/**
 * Issue 32, items 1 and 3: report.md names the rewards the run trained with (with their weights,
 * and the sidecar's default [exact_match 1.0, format 0.2] when the request named none), what the
 * held-out criterion and the downstream grader judge, what a constant format reward does to the
 * relative criterion, the base model and the task file; and it calls scores fractions only
 * where they are (a reward summed over weights 1 + 0.2 reaches 1.2).
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { TrainRequestSchema } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { rewardsLines } from "../src/agent/report/sections/overview-section.js";

test("a request without rewards: the sidecar's default is named, with what format 0.2 does to the ratio", () => {
  const lines = rewardsLines(create(TrainRequestSchema, {}), { grader: "exact_match", taskFile: "mytasks/weekday.jsonl" }).join("\n");
  assert.match(lines, /Rewards trained with: exact_match x1, format x0\.2 \(the request named none: the sidecar's default\)/);
  assert.match(lines, /held-out criterion judges the same weighted sum \(0 to 1\.2; not a fraction\)/);
  assert.match(lines, /format/);
  assert.match(lines, /dilutes|shrinks/);
  assert.match(lines, /downstream grader: exact_match/);
  assert.match(lines, /Task file: mytasks\/weekday\.jsonl/);
  assert.match(lines, /Base model: the embedded default model/);
});

test("one reward of weight 1: no dilution note, and the sum is a fraction", () => {
  const req = create(TrainRequestSchema, { baseModel: "embedded:mytasks/weekday.jsonl", rewards: [{ name: "exact_match", weight: 1 }] });
  const lines = rewardsLines(req, { grader: "exact_match", taskFile: null }).join("\n");
  assert.match(lines, /Rewards trained with: exact_match x1\./);
  assert.match(lines, /\(0 to 1\)/);
  assert.doesNotMatch(lines, /dilutes|shrinks/);
  assert.match(lines, /Base model: embedded:mytasks\/weekday\.jsonl/);
});
