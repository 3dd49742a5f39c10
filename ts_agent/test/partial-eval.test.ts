/**
 * Issue 45 item 3: `agent eval <run> --limit N` never replaces a run's fuller eval.json unsaid
 * (the partial eval is kept apart in eval-limit-<N>.json), and the fingerprint row of a baseline
 * of 30 tasks against an eval of 5 is not "same".
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { DEFAULT_EVAL_SETTINGS } from "../src/agent/eval/evaluate.js";
import { EVAL_FILE, evalLogDestination, readEvalLog, writeEvalLog } from "../src/agent/core/eval-log.js";
import { buildEvalLog } from "../src/agent/eval/build-eval-log.js";
import { buildFingerprint, compareFingerprints, fingerprintGates } from "../src/agent/eval/fingerprint.js";
import type { TaskSet } from "../src/agent/eval/task-set.js";
import { gradedResult, row } from "./helpers/eval-fixtures.js";

const LABELS = ["structuring", "smurfing"];
const all = Array.from({ length: 30 }, (_, i) => row(`t${String(i).padStart(2, "0")}`, LABELS[i % 2]));

function log(n: number) {
  const rows = all.slice(0, n);
  const taskSet: TaskSet = { path: "tasks/x.jsonl", sha256: "ab".repeat(32), split: "test", limit: n === 30 ? 0 : n, rows, humanLabels: new Map() };
  const answers = Object.fromEntries(rows.map((r) => [r.id, [`<answer>${r.label}</answer>`]]));
  const settings = { ...DEFAULT_EVAL_SETTINGS, limit: taskSet.limit };
  return buildEvalLog("r1", settings, taskSet, gradedResult(rows, { base: answers, adapter: answers }));
}

describe("a partial eval is kept apart from a fuller one (issue 45)", () => {
  test("eval.json of 30 tasks, then --limit 5: eval.json keeps 30, the 5 go to eval-limit-5.json", () => {
    const dir = mkdtempSync(join(tmpdir(), "evals-"));
    const full = writeEvalLog(dir, log(30));
    assert.equal(full, join(dir, "runs", "r1", EVAL_FILE));
    const dest = evalLogDestination(dir, log(5));
    assert.equal(dest.path, join(dir, "runs", "r1", "eval-limit-5.json"));
    assert.deepEqual(dest.keptApartFrom, { path: full, n: 30 });
    const written = writeEvalLog(dir, log(5));
    assert.equal(written, dest.path);
    assert.equal(readEvalLog(full).taskSet.n, 30);
    assert.equal(readEvalLog(written).taskSet.n, 5);
  });

  test("no eval.json yet, or a smaller one: the eval is the run's eval.json", () => {
    const dir = mkdtempSync(join(tmpdir(), "evals-"));
    assert.equal(evalLogDestination(dir, log(5)).keptApartFrom, null);
    writeEvalLog(dir, log(5));
    const dest = evalLogDestination(dir, log(30));
    assert.equal(dest.path, join(dir, "runs", "r1", EVAL_FILE));
    assert.equal(dest.keptApartFrom, null);
    writeEvalLog(dir, log(30));
    assert.equal(readEvalLog(dest.path).taskSet.n, 30);
    assert.ok(!existsSync(join(dir, "runs", "r1", "eval-limit-5.json")));
    assert.match(readFileSync(dest.path, "utf8"), /"n": 30/);
  });

  test("a baseline of 30 task ids against an eval of 5: the task_ids row is a subset, not 'same', and does not gate", () => {
    const fp = (n: number) =>
      buildFingerprint({
        settings: DEFAULT_EVAL_SETTINGS,
        taskSet: { path: "x", sha256: "ab".repeat(32), split: "test", n },
        taskIds: all.slice(0, n).map((r) => r.id),
        model: { requested: "", resolved: "m" },
      });
    const rows = compareFingerprints(fp(30), fp(5), { baseline: all.map((r) => r.id), eval: all.slice(0, 5).map((r) => r.id) });
    const ids = rows.find((r) => r.field === "task_set.task_ids")!;
    assert.notEqual(ids.status, "same");
    assert.equal(ids.status, "subset");
    assert.match(ids.note!, /5 of the baseline's 30 tasks/);
    assert.deepEqual(fingerprintGates(rows), []);
    const same = compareFingerprints(fp(30), fp(30), { baseline: all.map((r) => r.id), eval: all.map((r) => r.id) });
    assert.equal(same.find((r) => r.field === "task_set.task_ids")!.status, "same");
  });
});
