/**
 * Issue 32, item 4: Ctrl-C on `agent export --merge` stops its `py-trainer export` child (it kept
 * running and finished writing the folder after the agent had exited). The child is a stand-in
 * ($PY_TRAINER_BIN) that records its pid and sleeps; SIGINT goes to the agent alone, as a kill
 * would send it.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { REPO } from "./helpers/sidecar.js";

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test("SIGINT to agent export --merge stops py-trainer export and says so", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "export-int-"));
  mkdirSync(join(dir, "runs", "r1", "adapter"), { recursive: true });
  writeFileSync(join(dir, "runs", "r1", "adapter", "adapter_config.json"), "{}");
  writeFileSync(join(dir, "runs", "r1", "run.json"), JSON.stringify({ runId: "r1", state: "RUN_STATE_SUCCEEDED", request: { runId: "r1" } }));
  const fake = join(dir, "fake-py-trainer.sh");
  writeFileSync(fake, `#!/bin/sh\necho $$ > ${join(dir, "child.pid")}\nexec sleep 30\n`);
  chmodSync(fake, 0o755);
  const proc = spawn(join(REPO, "ts_agent", "bin", "agent"), ["export", "r1", "--merge", "--evals-dir", dir], {
    env: { ...process.env, PY_TRAINER_BIN: fake },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  proc.stderr.on("data", (d) => (stderr += d));
  const pidFile = join(dir, "child.pid");
  for (let i = 0; i < 300 && !existsSync(pidFile); i++) await new Promise((r) => setTimeout(r, 100));
  const child = Number(readFileSync(pidFile, "utf8"));
  assert.ok(alive(child));
  const code = await new Promise<number | null>((res) => {
    proc.on("close", (c) => res(c));
    proc.kill("SIGINT");
  });
  assert.equal(code, 130, stderr);
  for (let i = 0; i < 20 && alive(child); i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(!alive(child), `py-trainer export (pid ${child}) still runs after the agent exited`);
  assert.match(stderr, /stopped py-trainer export/);
});
