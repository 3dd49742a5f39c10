/**
 * `agent report <run_id>`: write <evals dir>/runs/<run_id>/report.md from the run's local files
 * (run.json, events.jsonl, eval.json, baseline.json) and print the milestone verdict. Needs no
 * sidecar. Exit 0 once the report is written, whatever the verdict. A run that is not (fully)
 * local is not an error to trace: the message is the one command that fetches it.
 * `agent report --eval FILE` (and `agent report <name>` of an `agent eval --adapter` record, which
 * is not a run): report.md beside the eval log, its downstream comparison on the test and
 * held-out-template splits without a milestone (agent/report/eval-report.ts).
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";

import { baselinePath } from "../agent/eval/baseline-record.js";
import { adapterEvalIn, writeEvalReport } from "../agent/report/eval-report.js";
import { writeReport } from "../agent/report/run-report.js";
import { milestoneLine, reasonAfterLabel } from "../agent/verdict/milestone.js";
import { UserError, displayPath, evalsDirOrDefault, isRunLocal, runDir } from "../agent/workspace.js";
import { repeatFlags } from "../pipeline/next-commands.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Write report.md for a downloaded run: curve, held-out reward, base vs adapter, verdict, TCO.",
  usage: "agent report <run_id> [--evals-dir DIR] | agent report --eval FILE [--evals-dir DIR]",
  flags: [
    ["--eval FILE", "an eval.json that is not a run's (agent eval --adapter): report.md beside it, no milestone"],
    ["--evals-dir DIR", "where baseline.json and runs/ live (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)"],
  ],
  notes: "agent report <name> of an `agent eval --adapter --name <name>` record reports that eval as --eval does.",
  examples: ["agent report run-20261201-101500-ab12cd", "agent report --eval agent-evals/runs/aml-v2/eval.json"],
};

export const command: CommandHandler = async (argv, _client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { eval: { type: "string" }, ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  const evalsDir = evalsDirOrDefault(values["evals-dir"]);
  if (values.eval !== undefined) {
    if (positionals.length) throw usageError("report", help, "give a run id or --eval FILE, not both");
    return reportEval(evalsDir, resolve(values.eval));
  }
  if (positionals.length !== 1) throw usageError("report", help, positionals.length ? "one run id, please" : "which run? give its id");
  const runId = positionals[0];
  const adapterEval = isRunLocal(evalsDir, runId) ? undefined : adapterEvalIn(evalsDir, runId);
  if (adapterEval) return reportEval(evalsDir, adapterEval);
  if (!isRunLocal(evalsDir, runId)) {
    throw new UserError(
      `agent report: run ${runId} is not downloaded (no ${displayPath(runDir(evalsDir, runId))}/run.json); fetch it with: agent download ${runId}${repeatFlags(values)}`,
    );
  }
  const { path, analysis } = writeReport(evalsDir, runId);
  const m = analysis.milestone;
  console.log(`${milestoneLine(m)}: ${reasonAfterLabel(m)}`);
  // name the baseline.json looked for: the verdict's reason does not know --evals-dir
  if (analysis.baselineMatch.status === "missing") {
    console.log(`baseline: no ${displayPath(baselinePath(evalsDir))}; set it with: agent baseline set${repeatFlags(values)}`);
  }
  for (const row of analysis.attribution.filter((r) => r.fired)) {
    console.log(`attribution: ${row.row.curve} -> ${row.row.likelyCause}; next: ${row.row.nextChange}`);
  }
  console.log(`wrote ${path}`);
  return 0;
};

/** `agent report --eval FILE`: an adapter eval's report; prints its downstream verdict. */
function reportEval(evalsDir: string, evalPath: string): number {
  const { path, analysis } = writeEvalReport(evalsDir, evalPath);
  const d = analysis.milestone.downstream;
  console.log(`downstream: ${d.verdict}${analysis.baselineMatch.status === "match" ? "" : " (GATED on baseline.json)"}: ${d.reason}`);
  console.log(`wrote ${path}`);
  return 0;
}
