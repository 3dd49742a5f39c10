/**
 * `agent select` and `agent compare` refuse a task file other than the run's (issue 30, item 8):
 * for a run trained on the AML tasks, `--tasks ticket_routing.jsonl` exited 0 and wrote a selection /
 * comparison from the other file's rows. Now one line (a UserError: exit 2) naming both files, before
 * anything is evaluated; the run's own file passes.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { command as compare } from "../src/commands/compare.js";
import { checkRunTaskFile } from "../src/pipeline/run-task-file.js";
import { command as select } from "../src/commands/select.js";
import { REPO_ROOT, UserError } from "../src/agent/workspace.js";
import type { SidecarClient } from "../src/sidecar/client.js";

const AML = join(REPO_ROOT, "agent-evals", "tasks", "aml_typology.jsonl");
const TICKETS = join(REPO_ROOT, "agent-evals", "tasks", "ticket_routing.jsonl");
const noSidecar = new Proxy(
  {},
  {
    get: () => () => {
      throw new Error("the sidecar was called");
    },
  },
) as unknown as SidecarClient;

/** runs/<id>/run.json of SUCCEEDED runs trained on AML train rows sent inline (as agent demo sends them), and eval.json naming the AML file. */
function evalsDir(ids: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), "run-task-file-"));
  const rows = readFileSync(AML, "utf8")
    .split("\n")
    .filter((l) => l)
    .map((l) => JSON.parse(l) as { id: string; prompt: string; split: string; typology: string })
    .filter((r) => r.split === "train")
    .slice(0, 12)
    .map((r) => ({ id: r.id, prompt: r.prompt, answers: [r.typology] }));
  for (const id of ids) {
    mkdirSync(join(dir, "runs", id), { recursive: true });
    writeFileSync(
      join(dir, "runs", id, "run.json"),
      JSON.stringify({ runId: id, state: "RUN_STATE_SUCCEEDED", request: { runId: id, dataset: { inline: { rows } } } }),
    );
    writeFileSync(join(dir, "runs", id, "eval.json"), JSON.stringify({ taskSet: { path: "agent-evals/tasks/aml_typology.jsonl" } }));
  }
  return dir;
}

async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  assert.ok(err instanceof UserError, `expected a UserError (exit 2), got ${String(err)}`);
  assert.ok(!err.message.includes("\n"), err.message);
  return err.message;
}

test("agent select refuses --tasks of another task file, naming both", async () => {
  const dir = evalsDir(["r1"]);
  try {
    const msg = await refusal(select(["r1", "--tasks", TICKETS, "--evals-dir", dir], noSidecar));
    assert.match(msg, /^agent select: run r1 trained on none of the rows of agent-evals\/tasks\/ticket_routing\.jsonl/);
    assert.match(msg, /agent-evals\/tasks\/aml_typology\.jsonl/);
    await checkRunTaskFile(noSidecar, "select", dir, "r1", AML); // its own file passes
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("agent compare refuses --tasks of another task file before evaluating", async () => {
  const dir = evalsDir(["r1", "r2"]);
  try {
    const msg = await refusal(compare(["r1", "r2", "--tasks", TICKETS, "--evals-dir", dir], noSidecar));
    assert.match(msg, /^agent compare: run r1 trained on none of the rows of agent-evals\/tasks\/ticket_routing\.jsonl.*aml_typology\.jsonl/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a jsonl_path run is judged by its file's bytes", async () => {
  const dir = evalsDir([]);
  const data = join(dir, "data");
  mkdirSync(data);
  writeFileSync(join(data, "aml.jsonl"), readFileSync(AML));
  mkdirSync(join(dir, "runs", "j1"), { recursive: true });
  writeFileSync(
    join(dir, "runs", "j1", "run.json"),
    JSON.stringify({ runId: "j1", state: "RUN_STATE_SUCCEEDED", request: { runId: "j1", dataset: { jsonlPath: "aml.jsonl" } } }),
  );
  const before = process.env.PY_TRAINER_DATA_ROOT;
  process.env.PY_TRAINER_DATA_ROOT = data;
  try {
    await checkRunTaskFile(noSidecar, "select", dir, "j1", AML); // the same bytes
    const msg = await refusal(checkRunTaskFile(noSidecar, "select", dir, "j1", TICKETS));
    assert.match(
      msg,
      new RegExp(
        `^agent select: run j1 trained on ${join(data, "aml.jsonl").replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}, not agent-evals/tasks/ticket_routing\\.jsonl`,
      ),
    );
  } finally {
    if (before === undefined) delete process.env.PY_TRAINER_DATA_ROOT;
    else process.env.PY_TRAINER_DATA_ROOT = before;
    rmSync(dir, { recursive: true, force: true });
  }
});
