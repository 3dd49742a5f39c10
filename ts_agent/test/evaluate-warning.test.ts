/**
 * Issue 45 item 4: the one-time GGUF conversion is no silent wait for an Evaluate either. The
 * sidecar streams a warning before the wait (EvaluateResponse.warning, code base_model_conversion);
 * every command that evaluates (eval, baseline, compare, select, try: all through runEvaluate)
 * prints it as one line before the progress. In-process sidecar (no process started).
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { EvaluateResponseSchema } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { runEvaluate } from "../src/agent/eval/evaluate.js";
import { SidecarClient } from "../src/sidecar/client.js";
import { captureConsole } from "./helpers/console.js";
import { startFakeSidecar, type FakeSidecar } from "./helpers/fake-sidecar.js";

const NOTE =
  "converting SmolLM2-135M-Instruct.Q4_1.gguf from GGUF into a model folder before the eval (one time, about a minute here; later loads use the converted folder)";
let sc: FakeSidecar;

before(async () => {
  sc = await startFakeSidecar({
    async *evaluate() {
      yield create(EvaluateResponseSchema, { kind: { case: "warning", value: { code: "base_model_conversion", message: NOTE } } });
      yield create(EvaluateResponseSchema, { kind: { case: "progress", value: { variant: "base", tasksDone: 1, tasksTotal: 1 } } });
      yield create(EvaluateResponseSchema, { kind: { case: "result", value: { baseModel: "m" } } });
    },
  });
});
after(async () => sc?.close());

test("an Evaluate's warning is printed as one line before the progress, and the result still comes back", async () => {
  const client = new SidecarClient({ address: sc.address });
  const order: string[] = [];
  const { value, out } = await captureConsole((lines) =>
    runEvaluate(client, { tasks: { source: { case: "inline", value: { rows: [{ id: "t", prompt: "p", answers: ["a"] }] } } } }, () =>
      order.push(`progress after ${lines.length} line(s)`),
    ),
  );
  assert.equal(value.baseModel, "m");
  assert.deepEqual(out, [`warning [base_model_conversion]: ${NOTE}`]);
  assert.deepEqual(order, ["progress after 1 line(s)"]);
});
