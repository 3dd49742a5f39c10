// `agent runs` prints the slots a running run holds and, under Ray, its node (issue 28, item 1).
import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { runLine } from "../src/commands/runs.js";
import { RunSchema, RunState } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";

test("a running run's line names its slots, and its node under Ray; a queued one its place", () => {
  const running = create(RunSchema, { runId: "a", state: RunState.RUNNING, currentStep: 3n, slots: [0, 1] });
  assert.equal(runLine(running), "a\tRUNNING on slots 0,1\tstep 3\t");
  const onRay = create(RunSchema, { runId: "b", state: RunState.RUNNING, slots: [1], node: "10.0.0.2 9f3c" });
  assert.equal(runLine(onRay), "b\tRUNNING on slots 1 (node 10.0.0.2 9f3c)\tstep 0\t");
  const queued = create(RunSchema, { runId: "c", state: RunState.QUEUED, queuePosition: 2 });
  assert.equal(runLine(queued), "c\tQUEUED #2 in the queue\tstep 0\t");
});
