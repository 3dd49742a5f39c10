/**
 * Writes the checked-in parity vectors tests/vectors/<function>.json from the TS code (the
 * source of truth). Inputs are chosen by hand: the documented edge cases of every function,
 * including its error kinds, kept as data in ts_agent/parity-inputs/*.json (see loadInputs).
 * Expected values are whatever the TS code returns now.
 *
 * It also writes the curve thresholds (agent/report/thresholds.ts) to
 * py_trainer/py_trainer/core/curve_thresholds.json, the vector the Python sidecar loads at run time
 * (`--thresholds PATH` writes it elsewhere).
 *
 *   cd ts_agent && node_modules/.bin/tsx src/parity/vectors.ts --out ../tests/vectors
 *
 * `make parity` (scripts/parity.sh) regenerates the vectors this way before checking the Python
 * ports, and writes the thresholds to a temp file that must equal the checked-in JSON.
 */
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { formatCurveThresholds } from "../agent/report/thresholds.js";
import { FUNCTIONS, decode, makeCase, makeFile, type VectorCase, type VectorFile } from "./harness.js";

/** The checked-in JSON copy of CURVE_THRESHOLDS that py_trainer/core/curve_thresholds.py reads. */
export const CURVE_THRESHOLDS_JSON = fileURLToPath(new URL("../../../py_trainer/py_trainer/core/curve_thresholds.json", import.meta.url));

type Input = [name: string, args: unknown[], options?: Record<string, unknown>];

/**
 * The inputs, as data: ts_agent/parity-inputs/<family>.json maps each function to its cases
 * `[name, args, options?]` (a path that resolves from src/ and dist/ alike). Args and options are
 * in the vector files' encoding (harness.encode: NaN, infinities and -0 as strings).
 */
export const INPUT_FAMILIES = ["answers", "rewards", "stats"] as const;

/** One family file's text: each function's cases, with the special numbers decoded. */
export function parseInputs(text: string): Record<string, Input[]> {
  const file = JSON.parse(text) as Record<string, Input[]>;
  return Object.fromEntries(
    Object.entries(file).map(([fn, cases]) => [
      fn,
      cases.map(([name, args, options]): Input =>
        options === undefined ? [name, decode(args) as unknown[]] : [name, decode(args) as unknown[], decode(options) as Record<string, unknown>],
      ),
    ]),
  );
}

/** Every function's input cases, read from the family files. A function in two files, or one
 * the harness does not know (a typo would drop its cases silently), is an error. */
export function loadInputs(): Record<string, Input[]> {
  const inputs: Record<string, Input[]> = {};
  for (const family of INPUT_FAMILIES) {
    const url = new URL(`../../parity-inputs/${family}.json`, import.meta.url);
    for (const [fn, cases] of Object.entries(parseInputs(readFileSync(url, "utf8")))) {
      if (fn in inputs) throw new Error(`parity inputs: ${fn} is in two family files (${family}.json)`);
      if (!(fn in FUNCTIONS)) throw new Error(`parity inputs: ${family}.json names ${fn}, which is not a parity function`);
      inputs[fn] = cases;
    }
  }
  return inputs;
}

/** All vector files, built by running the TS code on INPUTS. */
export function buildVectorFiles(): VectorFile[] {
  const INPUTS = loadInputs();
  const files: VectorFile[] = [];
  for (const fn of Object.keys(FUNCTIONS)) {
    const inputs = INPUTS[fn];
    if (inputs === undefined || inputs.length === 0) throw new Error(`no vector inputs for ${fn}`);
    const cases: VectorCase[] = inputs.map(([name, args, options]) => makeCase(fn, name, args, options));
    files.push(makeFile(fn, cases));
  }
  return files;
}

/** JSON with one case per line, so a diff of regenerated vectors shows which cases changed. */
export function formatVectorFile(f: VectorFile): string {
  const { cases, ...head } = f;
  const headLines = Object.entries(head).map(([k, v]) => `  ${JSON.stringify(k)}: ${JSON.stringify(v)},`);
  const caseLines = cases.map((c, i) => `    ${JSON.stringify(c)}${i < cases.length - 1 ? "," : ""}`);
  return ["{", ...headLines, '  "cases": [', ...caseLines, "  ]", "}", ""].join("\n");
}

/** Writes one JSON file per function into `dir` (replacing any stale *.json there). */
export function writeVectorFiles(dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const files = buildVectorFiles();
  const names = new Set(files.map((f) => `${f.function}.json`));
  for (const old of readdirSync(dir)) if (old.endsWith(".json") && !names.has(old)) rmSync(join(dir, old));
  for (const f of files) {
    const path = join(dir, `${f.function}.json`);
    writeFileSync(`${path}.tmp`, formatVectorFile(f));
    renameSync(`${path}.tmp`, path);
  }
  return [...names].sort();
}

/** Writes formatCurveThresholds() to `path` (atomically). */
export function writeCurveThresholds(path: string = CURVE_THRESHOLDS_JSON): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(`${path}.tmp`, formatCurveThresholds());
  renameSync(`${path}.tmp`, path);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const arg = (name: string): string | undefined => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const dir = resolve(arg("--out") ?? "../tests/vectors");
  const written = writeVectorFiles(dir);
  console.log(`wrote ${written.length} vector files to ${dir}`);
  const thresholds = resolve(arg("--thresholds") ?? CURVE_THRESHOLDS_JSON);
  writeCurveThresholds(thresholds);
  console.log(`wrote the curve thresholds to ${thresholds}`);
}
