/**
 * `agent report <run_id>`: write agent-evals/runs/<run_id>/report.md from the run's local files
 * (run.json, events.jsonl, eval.json, baseline.json) and print the milestone verdict. Needs no
 * sidecar. Exit 0 once the report is written, whatever the verdict.
 */
import { parseArgs } from "node:util";

import { writeReport, type ReportAnalysis } from "../agent/report/report.js";
import { evalsDirOrDefault } from "../agent/workspace.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, type CommandHandler } from "./flags.js";

/** "milestone: PASS: reason", with "(GATED on baseline.json)" when the baseline did not match. */
export function milestoneLine(m: ReportAnalysis["milestone"]): string {
  return `milestone: ${m.verdict}${m.gated ? " (GATED on baseline.json)" : ""}`;
}

export const command: CommandHandler = async (argv, _client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) {
    console.error("usage: agent report <run_id> [--evals-dir DIR]");
    return 2;
  }
  const { path, analysis } = writeReport(evalsDirOrDefault(values["evals-dir"]), positionals[0]);
  const m = analysis.milestone;
  console.log(`${milestoneLine(m)}: ${m.reason}`);
  for (const row of analysis.attribution.filter((r) => r.fired)) {
    console.log(`attribution: ${row.row.curve} -> ${row.row.likelyCause}; next: ${row.row.nextChange}`);
  }
  console.log(`wrote ${path}`);
  return 0;
};
