/**
 * An attached `agent train` whose sidecar dies mid-run (issue 22, item 6): it re-attaches a few
 * times, then says it lost the sidecar, with the run id and the `agent watch` / `agent resume`
 * commands, exit 1; never "canceled: call to sidecar ... was cancelled", which reads as if the user
 * had cancelled. The sidecar is an in-process TrainerService whose connections are dropped.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";

import { RunEventSchema, RunState, TrainResponseSchema } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { agentAsync, startFakeSidecar, type FakeSidecar } from "./helpers/fake-sidecar.js";

test("the sidecar dies under an attached agent train: the run id and the watch/resume commands, exit 1", { timeout: 60_000 }, async () => {
  let sc: FakeSidecar | undefined;
  const ev = (seq: number, kind: Parameters<typeof create<typeof RunEventSchema>>[1]) =>
    create(TrainResponseSchema, { event: create(RunEventSchema, { seq: BigInt(seq), runId: "lost-1", time: timestampNow(), ...kind }) });
  sc = await startFakeSidecar({
    async *train() {
      yield ev(1, { kind: { case: "stateChange", value: { state: RunState.QUEUED } } });
      yield ev(2, { kind: { case: "stateChange", value: { state: RunState.RUNNING } } });
      yield ev(3, { kind: { case: "trainStep", value: { step: 1n, maxSteps: 10n, metrics: { reward: 0.5, kl: 0.01 } } } });
      yield ev(4, { kind: { case: "trainStep", value: { step: 2n, maxSteps: 10n, metrics: { reward: 0.5, kl: 0.01 } } } });
      setTimeout(() => sc!.kill(), 200); // the process dies with the stream open
      await new Promise(() => undefined);
    },
  });
  const dir = mkdtempSync(join(tmpdir(), "lost-"));
  const config = join(dir, "run.json");
  writeFileSync(config, JSON.stringify({ runId: "lost-1", dataset: { inline: { rows: [{ id: "a", prompt: "p", answers: ["x"] }] } } }));
  const r = await agentAsync(["train", "--config", config, "--address", sc.address, "--evals-dir", dir]);
  await sc.close();
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /^step 2\/10 /m);
  assert.doesNotMatch(r.stderr, /cancel/i, "nothing says the user cancelled");
  assert.doesNotMatch(r.stderr, /^\s+at /m);
  assert.match(
    r.stderr,
    new RegExp(
      `^agent: lost the sidecar at ${sc.address} while following run lost-1 \\(last step seen: 2; 5 re-attach attempts failed, the last with unavailable\\)\\.$`,
      "m",
    ),
  );
  assert.match(r.stderr, new RegExp(`^  follow it: +agent watch lost-1 --address ${sc.address} --evals-dir ${dir}$`, "m"));
  assert.match(r.stderr, new RegExp(`continue it from its last checkpoint: +agent resume lost-1 --address ${sc.address} --evals-dir ${dir}$`, "m"));
});
