// Runs every checked-in parity vector (tests/vectors/*.json) through the TS code, and checks the
// files are what the generator writes today (so a behaviour change cannot skip `make parity`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { FUNCTIONS, compareValues, decode, runCase, type VectorFile } from "../src/parity/harness.js";
import { CURVE_THRESHOLDS_JSON, buildVectorFiles, formatVectorFile, loadInputs, parseInputs } from "../src/parity/vectors.js";
import { CURVE_THRESHOLDS, formatCurveThresholds } from "../src/agent/report/thresholds.js";

const VECTORS = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "tests", "vectors");
const files = readdirSync(VECTORS)
  .filter((f) => f.endsWith(".json"))
  .sort();

test("the inputs' data files: every function has cases, and NaN, infinities and -0 survive JSON", () => {
  const inputs = loadInputs();
  assert.deepEqual(Object.keys(inputs).sort(), Object.keys(FUNCTIONS).sort());
  const normalCdfArgs = inputs.normalCdf.map(([, args]) => args[0]);
  assert.ok(
    normalCdfArgs.some((x) => Object.is(x, -0)),
    "normalCdf's -0 case decodes to -0",
  );
  assert.ok(normalCdfArgs.some((x) => Number.isNaN(x)));
  assert.ok(normalCdfArgs.includes(-Infinity));
  const parsed = parseInputs('{"mean": [["a", [[1, "NaN", "-0"]], {"eps": "Infinity"}]]}');
  assert.ok(Number.isNaN((parsed.mean[0][1][0] as number[])[1]));
  assert.ok(Object.is((parsed.mean[0][1][0] as number[])[2], -0));
  assert.equal(parsed.mean[0][2]?.eps, Infinity);
});

test("there is one vector file per function under test", () => {
  assert.deepEqual(
    files,
    Object.keys(FUNCTIONS)
      .map((f) => `${f}.json`)
      .sort(),
  );
});

for (const name of files) {
  test(`vectors: ${name}`, () => {
    const file = JSON.parse(readFileSync(join(VECTORS, name), "utf8")) as VectorFile;
    assert.ok(file.cases.length > 0);
    const failures: string[] = [];
    for (const c of file.cases) {
      const args = decode(c.args) as unknown[];
      const options = c.options === undefined ? undefined : (decode(c.options) as Record<string, unknown>);
      const got = runCase(file.function, args, options);
      if (c.error !== undefined) {
        if (got.error?.type !== c.error.type || got.error?.kind !== c.error.kind) {
          failures.push(`${c.name}: expected ${c.error.type}(${c.error.kind}), got ${JSON.stringify(got)}`);
        }
        continue;
      }
      if (got.error !== undefined) {
        failures.push(`${c.name}: threw ${got.error.type}(${got.error.kind})`);
        continue;
      }
      const diffs = compareValues(decode(c.expected), decode(got.expected), file.tolerance, { maxAbs: 0, maxUlp: 0 });
      for (const d of diffs) failures.push(`${c.name}: ${d.path} ${d.message}`);
    }
    assert.deepEqual(failures, []);
  });
}

test("checked-in vectors match the generator (run `make parity` after changing task-rewards.ts or stats.ts)", () => {
  for (const file of buildVectorFiles()) {
    const onDisk = readFileSync(join(VECTORS, `${file.function}.json`), "utf8");
    assert.equal(onDisk, formatVectorFile(file), `${file.function}.json is stale`);
  }
});

test("the checked-in curve_thresholds.json is what thresholds.ts produces (run `make parity` after changing it)", () => {
  const onDisk = readFileSync(CURVE_THRESHOLDS_JSON, "utf8");
  assert.equal(onDisk, formatCurveThresholds(), "py_trainer/py_trainer/core/curve_thresholds.json is stale");
  assert.deepEqual(JSON.parse(onDisk), { ...CURVE_THRESHOLDS });
  assert.deepEqual(Object.keys(JSON.parse(onDisk)), Object.keys(CURVE_THRESHOLDS).sort());
});

test("the comparator catches a changed value, a changed error kind and a NaN", () => {
  const diff = { maxAbs: 0, maxUlp: 0 };
  assert.equal(compareValues(1, 1 + 2 ** -52, { ulp: 0 }, diff).length, 1);
  assert.equal(compareValues(1, 1 + 2 ** -52, { ulp: 4 }, diff).length, 0);
  assert.equal(compareValues(Infinity, Number.MAX_VALUE, { ulp: 4 }, diff).length, 1);
  assert.equal(compareValues(1, 1 + 2 ** -49, { ulp: 4 }, diff).length, 1);
  assert.equal(compareValues(NaN, 0, { ulp: 4 }, diff).length, 1);
  assert.equal(compareValues(-0, 0, { ulp: 0 }, diff).length, 1);
  assert.equal(compareValues({ a: [1, "x"] }, { a: [1, "y"] }, { ulp: 4 }, diff).length, 1);
  assert.equal(compareValues({ a: 1 }, { a: 1, b: 2 }, { ulp: 4 }, diff).length, 1);
});
