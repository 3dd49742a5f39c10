/**
 * End to end: a real sidecar process, the TS client over real gRPC (Connect-ES grpc transport).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";

import { Code } from "@connectrpc/connect";

import { SidecarClient, SidecarError } from "../src/sidecar/client.js";
import { REPO, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

const run = promisify(execFile);
let sc: RunningSidecar;

before(async () => {
  sc = await startSidecar();
});
after(async () => {
  await sc?.stop("SIGKILL");
});

test("health is SERVING for the server and for TrainerService", async () => {
  const client = new SidecarClient({ address: sc.address });
  assert.equal(await client.checkHealth(""), "SERVING");
  assert.equal(await client.checkHealth("grpo.trainer.v1.TrainerService"), "SERVING");
});

test("GetRun on an unknown id is NOT_FOUND naming run_id; a traversal id is INVALID_ARGUMENT", async () => {
  const client = new SidecarClient({ address: sc.address });
  await assert.rejects(client.getRun("no-such-run"), (err: unknown) => {
    assert.ok(err instanceof SidecarError);
    assert.equal(err.code, Code.NotFound);
    assert.equal(err.codeName, "not_found");
    assert.equal(err.field, "run_id");
    return true;
  });
  await assert.rejects(client.getRun("../../etc"), (err: unknown) => {
    assert.ok(err instanceof SidecarError);
    assert.equal(err.code, Code.InvalidArgument);
    assert.equal(err.field, "run_id");
    return true;
  });
});

test("an aborted signal cancels the call", async () => {
  const client = new SidecarClient({ address: sc.address });
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(client.listRuns({ signal: ac.signal }), (err: unknown) => {
    assert.ok(err instanceof SidecarError);
    assert.equal(err.code, Code.Canceled);
    return true;
  });
});

test("the agent CLI's health command reaches the sidecar", async () => {
  const { stdout } = await run(join(REPO, "ts_agent", "bin", "agent"), ["health", "--address", sc.address]);
  assert.match(stdout, /SERVING/);
});

test("SIGTERM shuts the sidecar down cleanly; then the client says it is unavailable", async () => {
  const code = await sc.stop("SIGTERM");
  assert.equal(code, 0, sc.output());
  assert.match(sc.output(), /shutting down: health NOT_SERVING/);
  assert.match(sc.output(), /stopped/);
  const client = new SidecarClient({ address: sc.address, timeoutMs: 5000 });
  await assert.rejects(client.checkHealth(""), (err: unknown) => {
    assert.ok(err instanceof SidecarError);
    assert.equal(err.code, Code.Unavailable);
    assert.match(err.message, /is `py-trainer serve` running\?/);
    return true;
  });
});

test("agent health against a dead address exits 1 with a clear message", async () => {
  await assert.rejects(run(join(REPO, "ts_agent", "bin", "agent"), ["health", "--address", "127.0.0.1:1", "--timeout", "3000"]), (err: unknown) => {
    const e = err as { code: number; stderr: string };
    assert.equal(e.code, 1);
    assert.match(e.stderr, /unavailable/);
    return true;
  });
});
