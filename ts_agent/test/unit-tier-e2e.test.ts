/**
 * The TS unit tier starts no process, and that is checked, not trusted: a unit-tier test file run
 * the way `make test-fast` runs it (with test/helpers/unit-tier.ts loaded) fails as soon as it
 * starts one, the error naming the file and the command. Runs node itself, hence an e2e file.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { test } from "node:test";

import { REPO } from "./helpers/sidecar.js";

const TS = join(REPO, "ts_agent");

function unitTier(body: string): { code: number | null; out: string; name: string } {
  const dir = mkdtempSync(join(tmpdir(), "unit-tier-"));
  const file = join(dir, "starts.test.ts");
  writeFileSync(file, body);
  try {
    // a runner of its own, as make test-fast starts it (node refuses --test inside a test's context)
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== "NODE_TEST_CONTEXT"));
    const r = spawnSync(process.execPath, ["--import", "tsx", "--import", "./test/helpers/unit-tier.ts", "--test", relative(TS, file)], {
      cwd: TS,
      env,
      encoding: "utf8",
      timeout: 120_000,
    });
    return { code: r.status, out: r.stdout + r.stderr, name: relative(TS, file) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a unit-tier file that starts a process fails, naming the file and the command (every starter)", { timeout: 300_000 }, () => {
  const r = unitTier(`
import assert from "node:assert/strict";
import * as cp from "node:child_process";
import { test } from "node:test";
for (const name of ["spawn", "spawnSync", "exec", "execSync", "execFile", "execFileSync", "fork"] as const) {
  test(name, () => {
    assert.throws(() => (cp[name] as (c: string) => unknown)("/bin/true"), /starts a process \\(child_process\\.\\w+: \\/bin\\/true\\) but is a unit-tier test/);
  });
}
test("bin/agent", async () => {
  const { spawnSync } = await import("node:child_process");
  spawnSync("/bin/true");
});
`);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /# pass 7\n/, r.out);
  assert.match(r.out, /# fail 1\n/, r.out);
  assert.ok(r.out.includes(`${r.name} starts a process (child_process.spawnSync: /bin/true) but is a unit-tier test`), r.out);
});

test("a unit-tier file that starts no process passes under the guard", { timeout: 300_000 }, () => {
  const r = unitTier(`
import assert from "node:assert/strict";
import { test } from "node:test";
test("arithmetic", () => assert.equal(1 + 1, 2));
`);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /# pass 1\n/, r.out);
});
