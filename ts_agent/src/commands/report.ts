/**
 * `agent report <run_id>`: write <evals dir>/runs/<run_id>/report.md from the run's local files
 * (run.json, events.jsonl, eval.json, baseline.json) and print the milestone verdict. Needs no
 * sidecar. Exit 0 once the report is written, whatever the verdict. A run that is not (fully)
 * local is not an error to trace: the message is the one command that fetches it.
 */
import { parseArgs } from "node:util";

import type { ReportAnalysis } from "../agent/report/analysis.js";
import { writeReport } from "../agent/report/report.js";
import { verdictLabel } from "../agent/verdict/milestone.js";
import { UserError, displayPath, evalsDirOrDefault, isRunLocal, runDir } from "../agent/workspace.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, repeatFlags, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Write report.md for a downloaded run: curve, held-out reward, base vs adapter, verdict, TCO.",
  usage: "agent report <run_id> [--evals-dir DIR]",
  flags: [["--evals-dir DIR", "where baseline.json and runs/ live (default agent-evals/)"]],
  examples: ["agent report run-20261201-101500-ab12cd"],
};

/** "milestone: PASS", with "(GATED on baseline.json)" when the baseline did not match (milestone.verdictLabel). */
export function milestoneLine(m: ReportAnalysis["milestone"]): string {
  return `milestone: ${verdictLabel(m)}`;
}

export const command: CommandHandler = async (argv, _client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw usageError("report", help, positionals.length ? "one run id, please" : "which run? give its id");
  const evalsDir = evalsDirOrDefault(values["evals-dir"]);
  const runId = positionals[0];
  if (!isRunLocal(evalsDir, runId)) {
    throw new UserError(
      `agent report: run ${runId} is not downloaded (no ${displayPath(runDir(evalsDir, runId))}/run.json); fetch it with: agent download ${runId}${repeatFlags(values)}`,
    );
  }
  const { path, analysis } = writeReport(evalsDir, runId);
  const m = analysis.milestone;
  console.log(`${milestoneLine(m)}: ${m.reason}`);
  for (const row of analysis.attribution.filter((r) => r.fired)) {
    console.log(`attribution: ${row.row.curve} -> ${row.row.likelyCause}; next: ${row.row.nextChange}`);
  }
  console.log(`wrote ${path}`);
  return 0;
};
