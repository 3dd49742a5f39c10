/**
 * `agent report <run_id>`: write agent-evals/runs/<run_id>/report.md from the run's local files
 * (run.json, events.jsonl, eval.json, baseline.json) and print the milestone verdict. Needs no
 * sidecar. Exit 0 once the report is written, whatever the verdict.
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";

import type { SidecarClient } from "../../sidecar/client.js";
import { GLOBAL_FLAGS } from "../eval/eval-command.js";
import { EVALS_DIR } from "../train/train-command.js";
import { writeReport } from "./report.js";

export async function command(argv: string[], _client: SidecarClient): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { "evals-dir": { type: "string" }, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) {
    console.error("usage: agent report <run_id> [--evals-dir DIR]");
    return 2;
  }
  const evalsDir = values["evals-dir"] ? resolve(values["evals-dir"]) : EVALS_DIR;
  const { path, analysis } = writeReport(evalsDir, positionals[0]);
  const m = analysis.milestone;
  console.log(`milestone: ${m.verdict}${m.gated ? " (GATED on baseline.json)" : ""}: ${m.reason}`);
  for (const row of analysis.attribution.filter((r) => r.fired)) {
    console.log(`attribution: ${row.row.curve} -> ${row.row.likelyCause}; next: ${row.row.nextChange}`);
  }
  console.log(`wrote ${path}`);
  return 0;
}
