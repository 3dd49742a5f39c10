/**
 * Issue 32, item 5: one exit-code rule. A user mistake is exit 2: an unknown run id (the sidecar's
 * NOT_FOUND), a value the sidecar refuses as INVALID_ARGUMENT; a failure is exit 1. An unknown run
 * id exited 1 for eval, watch, resume, select, download, cancel and compare but 2 for report,
 * export and delete; a negative learningRate (refused by the sidecar) 1, a negative maxSteps
 * (refused by the client) 2. Against an in-process fake sidecar answering those codes.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";

import { agentAsync, startFakeSidecar, type FakeSidecar } from "./helpers/fake-sidecar.js";

const notFound = () => {
  throw new ConnectError("run_id: no run 'nope'", Code.NotFound);
};

let fake: FakeSidecar;
let dir: string;
before(async () => {
  fake = await startFakeSidecar({
    getRun: notFound,
    cancelRun: notFound,
    resumeRun: notFound,
    // eslint-disable-next-line require-yield
    async *watchRun() {
      notFound();
    },
    // eslint-disable-next-line require-yield
    async *downloadArtifact() {
      notFound();
    },
    // eslint-disable-next-line require-yield
    async *train() {
      throw new ConnectError("grpo.learning_rate: must be > 0, got -0.001", Code.InvalidArgument);
    },
    async checkHealth() {
      return {};
    },
  } as never);
  dir = mkdtempSync(join(tmpdir(), "exit-codes-"));
});
after(() => fake.close());

for (const args of [
  ["eval", "nope"],
  ["watch", "nope"],
  ["resume", "nope"],
  ["select", "nope"],
  ["download", "nope"],
  ["cancel", "nope"],
  ["compare", "nope", "nope2"],
]) {
  test(`agent ${args.join(" ")}: an unknown run id is exit 2, one line`, { timeout: 60_000 }, async () => {
    const evalsDir = args[0] === "cancel" ? [] : ["--evals-dir", dir]; // cancel keeps nothing locally
    const r = await agentAsync([...args, ...evalsDir, "--address", fake.address]);
    assert.equal(r.code, 2, r.stderr + r.stdout);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, /nope/);
  });
}

test("agent train: a value the sidecar refuses as INVALID_ARGUMENT is exit 2, naming the field", { timeout: 60_000 }, async () => {
  const config = join(dir, "run.json");
  writeFileSync(config, JSON.stringify({ grpo: { learningRate: -0.001, maxSteps: 2 } }));
  const r = await agentAsync(["train", "--config", config, "--evals-dir", dir, "--address", fake.address]);
  assert.equal(r.code, 2, r.stderr + r.stdout);
  assert.match(r.stderr, /learning_rate/);
});
