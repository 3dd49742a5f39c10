/** `agent runs` shows a QUEUED run's place in the device queue (issue 22, item 14), through the
 *  real CLI against an in-process TrainerService. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { RunSchema, RunState } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { agentAsync, startFakeSidecar } from "./helpers/fake-sidecar.js";

test("agent runs: QUEUED runs with their queue position, other states without one", async () => {
  const sc = await startFakeSidecar({
    listRuns: () => ({
      runs: [
        create(RunSchema, { runId: "a", state: RunState.RUNNING, currentStep: 7n }),
        create(RunSchema, { runId: "b", state: RunState.QUEUED, queuePosition: 1 }),
        create(RunSchema, { runId: "c", state: RunState.QUEUED, queuePosition: 2 }),
        create(RunSchema, { runId: "d", state: RunState.FAILED, currentStep: 3n, reason: "disk full" }),
      ],
    }),
  });
  try {
    const r = await agentAsync(["runs", "--address", sc.address, "--timeout", "5000"]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split("\n"), [
      "a\tRUNNING\tstep 7\t",
      "b\tQUEUED #1 in the queue\tstep 0\t",
      "c\tQUEUED #2 in the queue\tstep 0\t",
      "d\tFAILED\tstep 3\tdisk full",
    ]);
  } finally {
    await sc.close();
  }
});
