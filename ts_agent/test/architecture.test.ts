/**
 * The TS size cap, beside the Python one (tests/test_architecture.py): a library file under src/
 * holds one concept, at most MAX_LINES lines (the statistics too: one file per family in core/stats/).
 * Excepted: the generated code in gen/ (the parity inputs are data, in ts_agent/parity-inputs/).
 */
import assert from "node:assert/strict";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const SRC = fileURLToPath(new URL("../src/", import.meta.url));
const MAX_LINES = 500;

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? tsFiles(p) : name.endsWith(".ts") ? [p] : [];
  });
}

test(`no TS library file over ${MAX_LINES} lines (gen/ excepted)`, () => {
  const over = tsFiles(SRC)
    .map((p) => ({ file: relative(SRC, p).split("\\").join("/"), lines: readFileSync(p, "utf8").split("\n").length - 1 }))
    .filter((f) => !f.file.startsWith("gen/") && f.lines > MAX_LINES);
  assert.deepEqual(over, [], over.map((f) => `${f.file}: ${f.lines} lines`).join("\n"));
});
