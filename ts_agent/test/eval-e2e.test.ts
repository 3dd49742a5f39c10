/**
 * The eval harness against a real sidecar: a live Evaluate is re-graded in TS (and a deliberately
 * corrupted score is caught), and `agent baseline set` writes baseline.json on a small --limit,
 * then refuses to overwrite it without --force.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { main } from "../src/cli.js";
import { DEFAULT_EVAL_SETTINGS, evaluateRequest, runEvaluate } from "../src/agent/eval/evaluate.js";
import { RegradeMismatchError, regrade } from "../src/agent/eval/grading.js";
import { loadTaskSet } from "../src/agent/eval/task-set.js";
import { defaultTasksPath } from "../src/agent/eval/tasks.js";
import { SidecarClient } from "../src/sidecar/client.js";
import { startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

let sc: RunningSidecar;

before(async () => {
  sc = await startSidecar();
});
after(async () => {
  await sc?.stop("SIGTERM");
});

test("live re-grading: the sidecar's scores equal task-rewards.ts's, and a corrupted one is caught", { timeout: 180_000 }, async () => {
  const client = new SidecarClient({ address: sc.address });
  const taskSet = loadTaskSet(defaultTasksPath(), "test", 8);
  const progress: number[] = [];
  const result = await runEvaluate(client, evaluateRequest(DEFAULT_EVAL_SETTINGS, taskSet), (p) => progress.push(p.tasksDone));
  assert.deepEqual(
    result.variants.map((v) => v.name),
    ["base"],
  );
  assert.equal(progress[progress.length - 1], 8);
  assert.equal(regrade(result.variants, taskSet.rows, DEFAULT_EVAL_SETTINGS.graders), 8 * 3);

  const sample = result.variants[0].tasks[5].samples[0];
  const truth = sample.scores["exact_match"];
  sample.scores["exact_match"] = truth === 1 ? 0 : 1;
  assert.throws(
    () => regrade(result.variants, taskSet.rows, DEFAULT_EVAL_SETTINGS.graders),
    (err: unknown) => {
      assert.ok(err instanceof RegradeMismatchError);
      assert.equal(err.mismatches.length, 1);
      const m = err.mismatches[0];
      assert.equal(m.taskId, taskSet.rows[5].id);
      assert.equal(m.grader, "exact_match");
      assert.equal(m.ts, truth);
      assert.equal(m.completion, sample.completion);
      return true;
    },
  );
});

test("`agent baseline set --limit 8` writes baseline.json; a second run without --force is refused", { timeout: 180_000 }, async () => {
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const args = ["--address", sc.address, "--limit", "8", "--evals-dir", evalsDir];
  assert.equal(await main(["baseline", "set", ...args]), 0);
  const path = join(evalsDir, "baseline.json");
  assert.ok(existsSync(path));
  const first = readFileSync(path, "utf8");
  const b = JSON.parse(first);
  assert.equal(b.taskSet.n, 8);
  assert.equal(b.taskSet.split, "test");
  assert.equal(Object.keys(b.perTask).length, 8);
  assert.match(b.model.resolved, /tiny-aml-qwen2/);

  assert.equal(await main(["baseline", "set", ...args]), 2); // a refusal before any work is a usage mistake (docs/usage.md)
  assert.equal(readFileSync(path, "utf8"), first);
});
