/** `agent report --evals-dir D` names D's baseline.json when it is missing (issue 22, item 12),
 *  through the real CLI; no sidecar. */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { REPO } from "./helpers/sidecar.js";

test("agent report --evals-dir D without a baseline names D/baseline.json and the command that sets it", () => {
  const dir = mkdtempSync(join(tmpdir(), "evals-report-"));
  mkdirSync(join(dir, "runs", "r1"), { recursive: true });
  writeFileSync(join(dir, "runs", "r1", "run.json"), JSON.stringify({ runId: "r1", state: "RUN_STATE_SUCCEEDED" }));
  const r = spawnSync(join(REPO, "ts_agent", "bin", "agent"), ["report", "r1", "--evals-dir", dir], { encoding: "utf8", timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^baseline: no ${dir}/baseline\\.json; set it with: agent baseline set --evals-dir ${dir}$`, "m"));
  // the verdict's own reason names it too, on stdout and in report.md (it said agent-evals/baseline.json)
  assert.match(r.stdout, new RegExp(`^milestone: INCONCLUSIVE \\(GATED on baseline\\.json\\): ${dir}/baseline\\.json is missing`, "m"));
  assert.doesNotMatch(r.stdout, /GATED on baseline\.json[^\n]*GATED on baseline\.json/); // said once a line
  assert.doesNotMatch(r.stdout, /agent-evals\/baseline\.json/);
  assert.match(readFileSync(join(dir, "runs", "r1", "report.md"), "utf8"), new RegExp(`${dir}/baseline\\.json is missing`));
});
