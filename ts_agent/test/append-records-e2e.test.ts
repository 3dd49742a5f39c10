/**
 * Records that several agents append to at once lose nothing (issue 30, item 4): two processes
 * each append 60 test looks to one run's test-evals.jsonl and 60 entries to one
 * baseline-history.jsonl at the same time; every one of the 240 lines is there and parses. The
 * test-evals record was read, modified and rewritten, which left 60-79 of 120 lines.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

import { REPO } from "./helpers/sidecar.js";

const SRC = join(REPO, "ts_agent", "src", "agent");

function writer(evalsDir: string, who: string, n: number): Promise<number | null> {
  const script = `
    const { recordTestEval } = await import(${JSON.stringify(pathToFileURL(join(SRC, "eval", "test-evals.ts")).href)});
    const { appendBaselineHistory } = await import(${JSON.stringify(pathToFileURL(join(SRC, "eval", "baseline-record.ts")).href)});
    for (let i = 0; i < ${n}; i++) {
      recordTestEval(${JSON.stringify(evalsDir)}, { command: "eval", runId: "r1", step: i, tasks: 10, taskSet: ${JSON.stringify(who)} });
      appendBaselineHistory(${JSON.stringify(evalsDir)}, { replacedAt: String(i), reason: ${JSON.stringify(who)}, runsJudged: [], baseline: {} });
    }`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: join(REPO, "ts_agent"),
    stdio: ["ignore", "inherit", "inherit"],
  });
  return new Promise((done) => child.on("exit", (code) => done(code)));
}

test("two agents appending at once to test-evals.jsonl and baseline-history.jsonl lose no line", async () => {
  const dir = mkdtempSync(join(tmpdir(), "append-records-"));
  try {
    assert.deepEqual(await Promise.all([writer(dir, "a", 60), writer(dir, "b", 60)]), [0, 0]);
    for (const file of [join(dir, "runs", "r1", "test-evals.jsonl"), join(dir, "baseline-history.jsonl")]) {
      const lines = readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l !== "");
      const parsed = lines.map((l) => JSON.parse(l) as { taskSet?: string; reason?: string });
      assert.equal(lines.length, 120, `${file}: ${lines.length} lines of 120`);
      for (const who of ["a", "b"]) assert.equal(parsed.filter((p) => (p.taskSet ?? p.reason) === who).length, 60, `${file}: writer ${who}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
