/**
 * Issue 45 item 1: a run's relative dataset.jsonlPath is resolved the way the sidecar did, against
 * the data root its summary.json records (py_trainer/core/paths.py run_data_paths), not against the
 * repository; an eval.json's repo-relative task file against the repository, not the working
 * directory; and the default evals dir is the nearest agent-evals/ at or above the working
 * directory (else the repository's).
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { RunSchema, RunState } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { runDataRoot, runTaskFile } from "../src/pipeline/run-task-file.js";
import { EVALS_DIR, REPO_ROOT, evalsDirOrDefault } from "../src/agent/workspace.js";

function runOn(jsonlPath: string) {
  return create(RunSchema, {
    runId: "cap1",
    state: RunState.SUCCEEDED,
    request: { dataset: { source: { case: "jsonlPath", value: jsonlPath }, split: "train" } },
  });
}

test("a run's relative dataset path resolves under the data root its summary.json records", () => {
  const user = realpathSync(mkdtempSync(join(tmpdir(), "user-data-")));
  const evalsDir = join(user, "agent-evals");
  mkdirSync(join(evalsDir, "runs", "cap1"), { recursive: true });
  writeFileSync(
    join(evalsDir, "runs", "cap1", "summary.json"),
    JSON.stringify({ run_id: "cap1", data_root: user, dataset_path: join(user, "tasks", "capitals.jsonl") }),
  );
  const saved = process.env.PY_TRAINER_DATA_ROOT;
  delete process.env.PY_TRAINER_DATA_ROOT;
  try {
    assert.equal(runDataRoot("cap1", evalsDir), user);
    assert.equal(runTaskFile(runOn("tasks/capitals.jsonl"), evalsDir), join(user, "tasks", "capitals.jsonl"));
    // without a summary.json: $PY_TRAINER_DATA_ROOT, else the repository (as scripts/demo.sh starts the sidecar)
    const bare = realpathSync(mkdtempSync(join(tmpdir(), "evals-")));
    assert.equal(runDataRoot("cap1", bare), REPO_ROOT);
    process.env.PY_TRAINER_DATA_ROOT = user;
    assert.equal(runTaskFile(runOn("tasks/capitals.jsonl"), bare), join(user, "tasks", "capitals.jsonl"));
  } finally {
    if (saved === undefined) delete process.env.PY_TRAINER_DATA_ROOT;
    else process.env.PY_TRAINER_DATA_ROOT = saved;
  }
});

test("an eval.json's repo-relative task file resolves against the repository, whatever the working directory", () => {
  const evalsDir = realpathSync(mkdtempSync(join(tmpdir(), "evals-")));
  mkdirSync(join(evalsDir, "runs", "r1"), { recursive: true });
  writeFileSync(join(evalsDir, "runs", "r1", "eval.json"), JSON.stringify({ taskSet: { path: "agent-evals/tasks/ticket_routing.jsonl" } }));
  const run = create(RunSchema, { runId: "r1", state: RunState.SUCCEEDED, request: { baseModel: "" } });
  const cwd = process.cwd();
  process.chdir(tmpdir());
  try {
    assert.equal(runTaskFile(run, evalsDir), join(REPO_ROOT, "agent-evals", "tasks", "ticket_routing.jsonl"));
  } finally {
    process.chdir(cwd);
  }
});

test("the default evals dir: the nearest agent-evals/ at or above the working directory, else one in the working directory (issue 55 item 10)", () => {
  const user = realpathSync(mkdtempSync(join(tmpdir(), "proj-")));
  mkdirSync(join(user, "agent-evals"));
  mkdirSync(join(user, "sub", "deeper"), { recursive: true });
  assert.equal(evalsDirOrDefault(undefined, join(user, "sub", "deeper")), join(user, "agent-evals"));
  assert.equal(evalsDirOrDefault("x", join(user, "sub")), join(user, "sub", "x"));
  const none = realpathSync(mkdtempSync(join(tmpdir(), "none-")));
  // a user's own folder with none: their reports land under it, never in this repository
  assert.equal(evalsDirOrDefault(undefined, none), join(none, "agent-evals"));
  assert.equal(evalsDirOrDefault(undefined, join(REPO_ROOT, "ts_agent")), EVALS_DIR);
});
