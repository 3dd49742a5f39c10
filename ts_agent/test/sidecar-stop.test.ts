/**
 * Issue 45 item 5: a sidecar SIGTERM'd mid-run ends the run CANCELLED and then goes away; the
 * agent following it printed only "unavailable" (the download after the end failed) with no
 * `agent resume <run>` hint. And after a resume the ETA (and elapsed) counted the time the run
 * was down.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";

import { RunEventSchema, RunState, TrainRequestSchema, type RunEvent } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { SidecarLost, trainViaSidecar } from "../src/agent/train/run.js";
import { RunClock } from "../src/agent/train/progress.js";
import { SidecarError, type SidecarClient } from "../src/sidecar/client.js";
import { sidecarLostLines } from "../src/pipeline/follow.js";

const at = (s: number) => timestampFromMs(1_700_000_000_000 + s * 1000);
const state = (s: number, st: RunState, reason = "") =>
  create(RunEventSchema, { runId: "r1", time: at(s), kind: { case: "stateChange", value: { state: st, reason } } });
const step = (s: number, n: number) =>
  create(RunEventSchema, {
    runId: "r1",
    time: at(s),
    kind: { case: "trainStep", value: { step: BigInt(n), maxSteps: 10n, metrics: { reward: 0.5, kl: 0.01 } } },
  });

test("the sidecar stops after the run's CANCELLED end: SidecarLost with the agent resume and agent download commands, not a bare 'unavailable'", async () => {
  const events: RunEvent[] = [
    state(0, RunState.RUNNING),
    step(5, 1),
    step(7, 2),
    state(8, RunState.CANCELLED, "the sidecar was stopped (SIGTERM) after step 2"),
  ];
  const client = {
    options: { address: "127.0.0.1:50999" },
    train: async function* () {
      yield* events;
    },
    getRun: async () => {
      throw new SidecarError("unavailable: connect ECONNREFUSED 127.0.0.1:50999", Code.Unavailable, undefined);
    },
  } as unknown as SidecarClient;
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const err = await trainViaSidecar(client, create(TrainRequestSchema, {}), { evalsDir }).then(
    () => assert.fail("expected SidecarLost"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof SidecarLost, String(err));
  const lines = sidecarLostLines(err, { address: "127.0.0.1:50999" }).join("\n");
  assert.match(lines, /agent resume r1 --address 127\.0\.0\.1:50999/);
  assert.match(lines, /agent download r1 --address 127\.0\.0\.1:50999/);
  assert.match(lines, /ended CANCELLED/);
});

test("after a resume the ETA and elapsed do not count the time the run was down", () => {
  const clk = new RunClock();
  const feed = (ev: RunEvent) => clk.line(ev);
  feed(state(0, RunState.RUNNING));
  feed(step(60, 1));
  feed(step(62, 2));
  feed(step(64, 3));
  feed(state(65, RunState.CANCELLED, "SIGTERM"));
  // down for 20 minutes, then resumed: RUNNING again, 60 s of model load, then 2 s per step
  feed(state(1265, RunState.RUNNING));
  assert.match(feed(step(1325, 4))!, /elapsed 2:05 ETA -:--$/);
  assert.equal(feed(step(1327, 5)), "step 5/10 reward 0.500 kl 0.0100 elapsed 2:07 ETA 0:10");
});
