/**
 * `make parity`'s reward-half check: the verdict's held-out relative change (verdict/held-out-reward.ts,
 * computed in TS from run.json's per-prompt scores) for every run folder given that has both
 * run.json and the sidecar's summary.json, written for scripts/parity.py to compare with
 * summary.json's relative_change / relative_change_ci_low / relative_change_ci_high (the numbers
 * the sidecar computed in Python). A folder argument that holds run folders is searched one level
 * down.
 *
 *   tsx src/parity/reward.ts --out FILE DIR...
 *
 * FILE: { "resamples": HELD_OUT_RESAMPLES, "runs": [ { "run": <folder>, "summary": <summary.json
 * path>, "ts": { "estimate", "lower", "upper" } | null } ] } with floats coded as harness.ts's
 * encode (NaN, Infinity as strings). `ts` is null for a run whose run.json has no per-prompt
 * scores: the verdict then uses the sidecar's numbers, and there is nothing to compare.
 */
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

import { fromJson, type JsonValue } from "@bufbuild/protobuf";

import { RunSchema } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { HELD_OUT_RESAMPLES, heldOutRelativeChange, heldOutSeed } from "../agent/verdict/held-out-reward.js";
import { encode } from "./harness.js";

/** The run folders under the given paths: a folder with run.json and summary.json, or its children that are. */
export function runFolders(paths: ReadonlyArray<string>): string[] {
  const isRun = (d: string) => existsSync(join(d, "run.json")) && existsSync(join(d, "summary.json"));
  const out: string[] = [];
  for (const p of paths) {
    if (!existsSync(p) || !statSync(p).isDirectory()) continue;
    if (isRun(p)) out.push(p);
    else for (const name of readdirSync(p).sort()) if (isRun(join(p, name))) out.push(join(p, name));
  }
  return out;
}

export function rewardCases(folders: ReadonlyArray<string>): unknown {
  return {
    resamples: HELD_OUT_RESAMPLES,
    runs: folders.map((dir) => {
      const run = fromJson(RunSchema, JSON.parse(readFileSync(join(dir, "run.json"), "utf8")) as JsonValue, { ignoreUnknownFields: true });
      const ts = run.result ? heldOutRelativeChange(run.result, heldOutSeed(run)) : null;
      return { run: dir, summary: join(dir, "summary.json"), ts: ts ? encode({ estimate: ts.estimate, lower: ts.lower, upper: ts.upper }) : null };
    }),
  };
}

export function main(argv: string[]): number {
  const i = argv.indexOf("--out");
  if (i < 0 || i + 1 >= argv.length) {
    console.error("usage: reward.ts --out FILE DIR...");
    return 2;
  }
  const out = argv[i + 1];
  const dirs = argv.filter((_, j) => j !== i && j !== i + 1).map((d) => resolve(d));
  const cases = rewardCases(runFolders(dirs)) as { runs: unknown[] };
  writeFileSync(out, JSON.stringify(cases, null, 2) + "\n");
  console.log(`   ${cases.runs.length} run folder(s) with run.json and summary.json`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = main(process.argv.slice(2));
}
