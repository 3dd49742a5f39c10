/**
 * `make arch` (dependency-cruiser with .dependency-cruiser.cjs) fails on an upward import: a copy
 * of src/ in a temporary folder gets one import from agent/core/ up to agent/report/, and the same
 * check run on the copy must fail naming the core floor's rule; the same for the floors added
 * since (task-sets, pipeline). An e2e file: it starts depcruise.
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

/** A fresh copy of src/ and the check's config in its own folder under tmp. */
function copy(name: string): string {
  const root = join(tmp, name);
  cpSync(join(TS_AGENT, "src"), join(root, "src"), { recursive: true });
  for (const f of [".dependency-cruiser.cjs", "package.json", "tsconfig.json"]) cpSync(join(TS_AGENT, f), join(root, f));
  symlinkSync(join(TS_AGENT, "node_modules"), join(root, "node_modules"));
  return root;
}

test("an upward import (core -> report) fails the layer check, naming the rule", () => {
  const tmp = copy("core-up");
  const clean = depcruise(tmp);
  assert.equal(clean.status, 0, `the copy as it is passes: ${clean.stdout}${clean.stderr}`);
  appendFileSync(join(tmp, "src", "agent", "core", "task-format.ts"), '\nexport { table as upward } from "../report/markdown.js";\n');
  const upward = depcruise(tmp);
  assert.notEqual(upward.status, 0, "an upward import must fail");
  assert.match(upward.stdout, /layer-core-not-up: src\/agent\/core\/task-format\.ts → src\/agent\/report\/markdown\.ts/);
});

test("a task-set generator imports no floor above core, and nothing in src/ imports a generator", () => {
  const root = copy("task-sets");
  appendFileSync(join(root, "src", "task-sets", "typologies.ts"), '\nexport { loadTasks as upward } from "../agent/eval/tasks.js";\n');
  appendFileSync(join(root, "src", "agent", "eval", "tasks.ts"), '\nexport { LABELS as generated } from "../../task-sets/typologies.js";\n');
  const out = depcruise(root);
  assert.notEqual(out.status, 0, "both imports must fail");
  assert.match(out.stdout, /layer-task-sets-not-up: src\/task-sets\/typologies\.ts → src\/agent\/eval\/tasks\.ts/);
  assert.match(out.stdout, /nothing-imports-task-sets: src\/agent\/eval\/tasks\.ts → src\/task-sets\/typologies\.ts/);
});

test("the pipeline floor imports no command, and no command imports another", () => {
  const root = copy("pipeline");
  appendFileSync(join(root, "src", "pipeline", "follow.ts"), '\nexport { help as upward } from "../commands/watch.js";\n');
  appendFileSync(join(root, "src", "commands", "demo.ts"), '\nexport { help as sideways } from "./sweep.js";\n');
  const out = depcruise(root);
  assert.notEqual(out.status, 0, "both imports must fail");
  assert.match(out.stdout, /layer-pipeline-not-up: src\/pipeline\/follow\.ts → src\/commands\/watch\.ts/);
  assert.match(out.stdout, /no-command-imports-a-command: src\/commands\/demo\.ts → src\/commands\/sweep\.ts/);
});
