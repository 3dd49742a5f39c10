/**
 * `make arch` (dependency-cruiser with .dependency-cruiser.cjs) fails on an upward import: a copy
 * of src/ in a temporary folder gets one import from agent/core/ up to agent/report/, and the same
 * check run on the copy must fail naming the core floor's rule. An e2e file: it starts depcruise.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { appendFileSync, cpSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, test } from "node:test";

const TS_AGENT = resolve(import.meta.dirname, "..");
const tmp = mkdtempSync(join(tmpdir(), "arch-"));
after(() => rmSync(tmp, { recursive: true, force: true }));

function depcruise(root: string) {
  return spawnSync(join(TS_AGENT, "node_modules", ".bin", "depcruise"), ["src", "--config", ".dependency-cruiser.cjs"], { cwd: root, encoding: "utf8" });
}

test("an upward import (core -> report) fails the layer check, naming the rule", () => {
  cpSync(join(TS_AGENT, "src"), join(tmp, "src"), { recursive: true });
  cpSync(join(TS_AGENT, ".dependency-cruiser.cjs"), join(tmp, ".dependency-cruiser.cjs"));
  cpSync(join(TS_AGENT, "package.json"), join(tmp, "package.json"));
  cpSync(join(TS_AGENT, "tsconfig.json"), join(tmp, "tsconfig.json"));
  symlinkSync(join(TS_AGENT, "node_modules"), join(tmp, "node_modules"));
  const clean = depcruise(tmp);
  assert.equal(clean.status, 0, `the copy as it is passes: ${clean.stdout}${clean.stderr}`);
  appendFileSync(join(tmp, "src", "agent", "core", "task-format.ts"), '\nexport { table as upward } from "../report/markdown.js";\n');
  const upward = depcruise(tmp);
  assert.notEqual(upward.status, 0, "an upward import must fail");
  assert.match(upward.stdout, /layer-core-not-up: src\/agent\/core\/task-format\.ts → src\/agent\/report\/markdown\.ts/);
});
