/**
 * `agent baseline history` (issue 22, item 14): the replaced baselines of baseline-history.jsonl,
 * oldest first, with when and why each was replaced and the runs judged on it, then the current
 * baseline.json; nothing at all is exit 1 naming the folder. Through the real CLI; no sidecar.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { REPO } from "./helpers/sidecar.js";

const AGENT = join(REPO, "ts_agent", "bin", "agent");
const agent = (args: string[]) => spawnSync(AGENT, args, { encoding: "utf8", env: { ...process.env, AGENT_SIDECAR: "127.0.0.1:9" }, timeout: 60_000 });

function baseline(date: string, accuracy: number) {
  return {
    schema: "agent-baseline/v1",
    date,
    model: { requested: "", resolved: "tiny" },
    taskSet: { path: "agent-evals/tasks/aml_typology.jsonl", sha256: "ab".repeat(32), split: "test", n: 200 },
    grader: { name: "exact_match", params: {} },
    samplesPerTask: 1,
    temperature: 0,
    maxNewTokens: 32,
    seed: 0,
    perTask: {},
    accuracy: { estimate: accuracy, lower: accuracy - 0.05, upper: accuracy + 0.05, n: 200, method: "wilson" },
    meanScores: {},
    settings: {},
  };
}

test("agent baseline history: the replaced baselines oldest first, why and on what runs, then the current one", () => {
  const dir = mkdtempSync(join(tmpdir(), "history-"));
  writeFileSync(join(dir, "baseline.json"), JSON.stringify(baseline("2026-11-03T00:00:00Z", 0.3)));
  writeFileSync(
    join(dir, "baseline-history.jsonl"),
    [
      { replacedAt: "2026-11-02T00:00:00Z", reason: "task file regenerated", runsJudged: ["r1", "r2"], baseline: baseline("2026-11-01T00:00:00Z", 0.2) },
      { replacedAt: "2026-11-03T00:00:00Z", reason: "new model revision", runsJudged: [], baseline: baseline("2026-11-02T00:00:00Z", 0.25) },
    ]
      .map((e) => JSON.stringify(e))
      .join("\n") + "\n",
  );
  const r = agent(["baseline", "history", "--evals-dir", dir]);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split("\n");
  assert.match(lines[0], /^2 replaced baseline\(s\) in .*baseline-history\.jsonl, oldest first:$/);
  assert.match(lines[1], /^1\. baseline 2026-11-01T00:00:00Z: .* exact_match 20\.0% /);
  assert.equal(lines[2], "   replaced 2026-11-02T00:00:00Z: task file regenerated; runs judged on it: 2 (r1, r2)");
  assert.match(lines[3], /^2\. baseline 2026-11-02T00:00:00Z: .* exact_match 25\.0% /);
  assert.equal(lines[4], "   replaced 2026-11-03T00:00:00Z: new model revision; runs judged on it: 0");
  assert.match(lines[5], /^current \(.*baseline\.json\): baseline 2026-11-03T00:00:00Z: .* exact_match 30\.0% /);
  assert.equal(lines[6], "   runs judged on it: 0");
});

test("agent baseline history with nothing to show is exit 1 naming the folder; a stray argument is one line, exit 2", () => {
  const empty = mkdtempSync(join(tmpdir(), "history-empty-"));
  const r = agent(["baseline", "history", "--evals-dir", empty]);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, new RegExp(`^no baseline at ${empty}/baseline\\.json and no baseline-history\\.jsonl beside it`));
  const stray = agent(["baseline", "history", "x", "--evals-dir", empty]);
  assert.equal(stray.status, 2, stray.stderr);
  assert.match(stray.stderr.trim(), /^agent baseline history: unexpected argument 'x'/);
  assert.equal(stray.stderr.trim().split("\n").length, 1);
});
