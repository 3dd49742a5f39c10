/**
 * `agent compare` (issue 23): two runs' adapters and the base on the same tasks, every pair with
 * its decision interval and governing test, Holm across the comparisons made, compare.md with the
 * table and compare.png (the real `py-trainer plot compare`); a run whose eval used another
 * max_new_tokens is refused naming the field.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import type { EvaluateResult } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { DEFAULT_EVAL_SETTINGS } from "../src/agent/eval/evaluate.js";
import { type EvalSettings } from "../src/agent/core/eval-log.js";
import { holmAdjust } from "../src/agent/core/stats/index.js";
import type { TaskSet } from "../src/agent/eval/task-set.js";
import type { TaskRow } from "../src/agent/core/task-format.js";
import { writeEvalLog } from "../src/agent/core/eval-log.js";
import { buildEvalLog } from "../src/agent/eval/build-eval-log.js";
import { comparePairs, writeCompare } from "../src/agent/run-comparison/run-comparison.js";
import { UserError } from "../src/agent/workspace.js";
import { gradedResult, row, runtimeFingerprint } from "./helpers/eval-fixtures.js";
import { REPO } from "./helpers/sidecar.js";

const AGENT = join(REPO, "ts_agent", "bin", "agent");
const LABELS = ["structuring", "smurfing", "layering", "money_mule"];
const N = 120;
const rows: TaskRow[] = Array.from({ length: N }, (_, i) => row(`t${String(i).padStart(4, "0")}`, LABELS[i % 4]));
const taskSet: TaskSet = { path: "agent-evals/tasks/aml_typology.jsonl", sha256: "5e".repeat(32), split: "test", limit: 0, rows, humanLabels: new Map() };

/** Tasks whose index is in `right` answered right, the rest wrong. */
function answers(right: (i: number) => boolean): Record<string, string[]> {
  return Object.fromEntries(rows.map((r, i) => [r.id, [`<answer>${right(i) ? r.label! : LABELS[(LABELS.indexOf(r.label!) + 1) % 4]}</answer>`]]));
}

function evalOf(runId: string, adapterRight: (i: number) => boolean, settings: EvalSettings = DEFAULT_EVAL_SETTINGS) {
  const result: EvaluateResult = gradedResult(rows, { base: answers((i) => i < 30), adapter: answers(adapterRight) });
  result.fingerprint = runtimeFingerprint();
  result.adapters = [{ $typeName: "grpo.trainer.v1.EvaluatedAdapter", name: "adapter", runId, sha256: "aa".repeat(32), step: 20n }];
  return buildEvalLog(runId, settings, taskSet, result);
}

// base right on 30/120; run-a on those and 6 more (exact McNemar p = 2 x 0.5^6 = 0.031), run-b on
// run-a's and one more (base vs run-b: p = 2 x 0.5^7 = 0.016; run-a vs run-b: one discordant task)
const runA = () => ({ runId: "run-a", log: evalOf("run-a", (i) => i < 36) });
const runB = () => ({ runId: "run-b", log: evalOf("run-b", (i) => i < 37) });

test("two runs plus the base: three pairs, Holm-adjusted p's, compare.md with the table and the plot", () => {
  const res = comparePairs([runA(), runB()]);
  assert.deepEqual(
    res.pairs.map((p) => `${p.b} - ${p.a}`),
    ["run-a - base", "run-b - base", "run-b - run-a"],
  );
  const raw = res.pairs.map((p) => p.p!);
  assert.ok(raw.every((p) => p > 0 && p <= 1));
  assert.deepEqual(
    res.pairs.map((p) => p.holm),
    holmAdjust(raw),
  );
  assert.ok(res.pairs.every((p) => p.holm! >= p.p!));
  // Holm: 0.016 x 3 = 0.047 rejects; run-a - base, 0.031 alone, x 2 = 0.063 does not; 1 stays 1
  assert.ok(Math.abs(res.pairs[0].p! - 2 * 0.5 ** 6) < 1e-12, String(res.pairs[0].p));
  assert.ok(Math.abs(res.pairs[0].holm! - 2 * 2 * 0.5 ** 6) < 1e-12, String(res.pairs[0].holm));
  assert.ok(Math.abs(res.pairs[1].holm! - 3 * 2 * 0.5 ** 7) < 1e-12, String(res.pairs[1].holm));
  assert.deepEqual(
    res.pairs.map((p) => p.differs),
    [false, true, false],
  );
  assert.equal(res.pairs[0].comparison.decision!.rejects, true); // unadjusted it would
  assert.equal(res.pairs[0].comparison.decision!.test, "exact McNemar test");

  const evalsDir = mkdtempSync(join(tmpdir(), "compare-"));
  process.env.PY_TRAINER_BIN = join(REPO, ".venv", "bin", "py-trainer");
  const dir = writeCompare(evalsDir, "t1", res, new Date("2026-12-02T00:00:00Z"));
  const md = readFileSync(join(dir, "compare.md"), "utf8");
  assert.match(md, /\| A \| B \| n \| B - A \| 95% decision interval \| governing test \| p \| Holm-adjusted p \| verdict \|/);
  assert.match(md, /\| base \| run-a \| 120 \| \+5\.0 pp \| .* \| exact McNemar test \| 0\.031 \| 0\.063 \| not distinguishable \|/);
  assert.match(md, /\| base \| run-b \| 120 \| \+5\.8 pp \| .* \| exact McNemar test \| 0\.016 \| 0\.047 \| B better \|/);
  assert.match(md, /Holm's step-down adjustment runs across the 3 comparison\(s\)/);
  assert.match(md, /!\[pairwise differences with their decision intervals\]\(compare\.png\)/);
  assert.ok(readFileSync(join(dir, "compare.png")).subarray(1, 4).toString() === "PNG");
  const json = JSON.parse(readFileSync(join(dir, "compare.json"), "utf8"));
  assert.deepEqual(
    json.pairs.map((p: { holm: number }) => p.holm),
    holmAdjust(raw),
  );
});

test("a run evaluated with another max_new_tokens is refused, naming the field", () => {
  const other = { runId: "run-b", log: evalOf("run-b", (i) => i < 37, { ...DEFAULT_EVAL_SETTINGS, maxNewTokens: 16 }) };
  assert.throws(
    () => comparePairs([runA(), other]),
    (err: unknown) => {
      assert.ok(err instanceof UserError);
      assert.match(err.message, /^agent compare: run-a vs run-b: not comparable, .*decoding\.max_new_tokens: 32 vs 16/);
      return true;
    },
  );
});

test("agent compare --from-evals: compare.md from the runs' eval.json; a fingerprint mismatch is one line, exit 2", { timeout: 60_000 }, () => {
  const evalsDir = mkdtempSync(join(tmpdir(), "compare-cli-"));
  writeEvalLog(evalsDir, runA().log);
  writeEvalLog(evalsDir, runB().log);
  const env = { ...process.env, PY_TRAINER_BIN: join(REPO, ".venv", "bin", "py-trainer"), AGENT_SIDECAR: "127.0.0.1:9" };
  const ok = spawnSync(AGENT, ["compare", "run-a", "run-b", "--from-evals", "--evals-dir", evalsDir, "--id", "c1"], { encoding: "utf8", env });
  assert.equal(ok.status, 0, ok.stdout + ok.stderr);
  assert.match(ok.stdout, /run-a - base: \+5\.0 pp .*p=0\.031, Holm 0\.063\)/);
  assert.ok(existsSync(join(evalsDir, "compare", "c1", "compare.md")));
  writeEvalLog(
    evalsDir,
    evalOf("run-b", (i) => i < 37, { ...DEFAULT_EVAL_SETTINGS, maxNewTokens: 16 }),
  );
  const bad = spawnSync(AGENT, ["compare", "run-a", "run-b", "--from-evals", "--evals-dir", evalsDir, "--id", "c2"], { encoding: "utf8", env });
  assert.equal(bad.status, 2, bad.stdout + bad.stderr);
  assert.equal(bad.stderr.trim().split("\n").length, 1, bad.stderr);
  assert.match(bad.stderr, /decoding\.max_new_tokens: 32 vs 16/);
  assert.ok(!existsSync(join(evalsDir, "compare", "c2")));
});
