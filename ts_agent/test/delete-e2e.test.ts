/**
 * `agent delete <run_id>` through the real CLI against an in-process TrainerService: it asks
 * first (y deletes, anything else keeps, no answer is a mistake), --yes skips the question, an
 * active or unknown run is refused in one line with exit 2 (the sidecar's own message when it is
 * the sidecar that refuses), and the downloaded copy is never touched.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import { RunSchema, RunState } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { agentAsync, startFakeSidecar, type FakeSidecar } from "./helpers/fake-sidecar.js";

const RUNS: Record<string, RunState> = { done: RunState.SUCCEEDED, failed: RunState.FAILED, live: RunState.RUNNING };
let sc: FakeSidecar;
const evalsDir = mkdtempSync(join(tmpdir(), "evals-delete-"));

before(async () => {
  sc = await startFakeSidecar({
    getRun: (req) => {
      const state = RUNS[req.runId];
      if (state === undefined) throw new ConnectError(`run_id: no run '${req.runId}'`, Code.NotFound);
      return { run: create(RunSchema, { runId: req.runId, state, currentStep: 12n }) };
    },
    deleteRun: (req) => {
      // as the sidecar answers (py_trainer/core/paths.py validate_run_id)
      if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/.test(req.runId))
        throw new ConnectError(`run_id: ${JSON.stringify(req.runId)} is not a valid run id`, Code.InvalidArgument);
      const state = RUNS[req.runId];
      if (state === undefined) throw new ConnectError(`run_id: no run '${req.runId}'`, Code.NotFound);
      if (state === RunState.RUNNING)
        throw new ConnectError(`run ${req.runId} is RUNNING: only a finished run can be deleted (CancelRun it first)`, Code.FailedPrecondition);
      return { run: create(RunSchema, { runId: req.runId, state, currentStep: 12n }) };
    },
  });
});
after(async () => sc?.close());

const del = (args: string[], stdin = "") => agentAsync(["delete", ...args, "--address", sc.address, "--evals-dir", evalsDir, "--timeout", "5000"], stdin);
const deletes = () => sc.calls.filter((c) => c === "deleteRun").length;
const oneLine = (s: string) => s.split("\n").filter((l) => l.trim()).length === 1;

test("it asks first: y deletes, and the downloaded copy is kept", async () => {
  mkdirSync(join(evalsDir, "runs", "done"), { recursive: true });
  writeFileSync(join(evalsDir, "runs", "done", "run.json"), "{}");
  const before = deletes();
  const r = await del(["done"], "y\n");
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stderr, /delete run done \(SUCCEEDED, step 12\) on the sidecar at 127\.0\.0\.1:\d+, with its events, checkpoints and adapter\? \[y\/N\]/);
  assert.match(r.stdout, /^deleted run done \(SUCCEEDED, step 12\) on the sidecar; the id can be used again$/m);
  assert.match(r.stdout, /the downloaded copy in .*runs\/done is kept/);
  assert.equal(deletes(), before + 1);
  assert.ok(existsSync(join(evalsDir, "runs", "done", "run.json")));
});

test("any answer but yes keeps the run (exit 1); no answer at all is a mistake (exit 2, one line)", async () => {
  const before = deletes();
  const no = await del(["failed"], "n\n");
  assert.equal(no.code, 1, no.stdout + no.stderr);
  assert.match(no.stdout, /run failed was not deleted/);
  const eof = await del(["failed"], "");
  assert.equal(eof.code, 2, eof.stderr);
  const lines = eof.stderr.split("\n").filter((l) => l.trim());
  assert.match(lines[lines.length - 1], /^agent delete: no answer on stdin: run failed was not deleted \(pass --yes to delete without asking\)$/);
  assert.equal(deletes(), before, "nothing deleted");
});

test("--yes deletes without asking", async () => {
  const r = await del(["failed", "--yes"]);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /\[y\/N\]/);
  assert.match(r.stdout, /^deleted run failed \(FAILED, step 12\)/m);
});

test("an active run is refused in one line, exit 2: before asking, and with the sidecar's message under --yes", async () => {
  const before = deletes();
  const asked = await del(["live"], "y\n");
  assert.equal(asked.code, 2, asked.stderr);
  assert.ok(oneLine(asked.stderr), asked.stderr);
  assert.match(
    asked.stderr,
    /^agent delete: run live is RUNNING: only a finished run can be deleted; cancel it first: agent cancel live --address 127\.0\.0\.1:\d+$/m,
  );
  assert.equal(deletes(), before, "never sent without a confirmation");
  const forced = await del(["live", "--yes"]);
  assert.equal(forced.code, 2, forced.stderr);
  assert.ok(oneLine(forced.stderr), forced.stderr);
  assert.match(forced.stderr, /^agent delete: failed_precondition: run live is RUNNING: only a finished run can be deleted \(CancelRun it first\)$/m);
  assert.doesNotMatch(forced.stderr, /^\s+at /m);
});

test("an unknown run is one line, exit 2; no run id is a usage error", async () => {
  for (const args of [["nope"], ["nope", "--yes"]]) {
    const r = await del(args);
    assert.equal(r.code, 2, r.stderr);
    assert.ok(oneLine(r.stderr), r.stderr);
    assert.match(r.stderr, /^agent delete: not_found: run_id: no run 'nope'$/m);
  }
  const none = await del([]);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /^agent delete: which run\? give its id/);
});

test("a path or an empty string is not a run id: one line, exit 2, the sidecar never asked (issue 30, item 9)", async () => {
  const calls = deletes();
  for (const id of ["../x", ""]) {
    const r = await del([id, "--yes"]);
    assert.equal(r.code, 2, r.stderr); // exited 1 with the sidecar's INVALID_ARGUMENT
    assert.ok(oneLine(r.stderr), r.stderr);
    assert.match(r.stderr, new RegExp(`^agent delete: ${JSON.stringify(id).replace(/[.]/g, "\\.")} is not a run id`, "m"));
  }
  assert.equal(deletes(), calls);
});

test("a sidecar without DeleteRun says so (exit 1, not a stack trace)", async () => {
  const old = await startFakeSidecar({});
  try {
    const r = await agentAsync(["delete", "x", "--yes", "--address", old.address, "--timeout", "5000"]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /^agent delete: unimplemented: this sidecar has no DeleteRun/);
    assert.doesNotMatch(r.stderr, /^\s+at /m);
  } finally {
    await old.close();
  }
});
