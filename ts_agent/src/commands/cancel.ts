/** `agent cancel <run_id>`: ask the sidecar to stop a run after its current step (checkpoint and
 *  adapter kept). Exit 0 once the request is accepted; the run then goes CANCELLING -> CANCELLED. */
import { parseArgs } from "node:util";

import { runStateName } from "../sidecar/client.js";
import { repeatFlags } from "../pipeline/next-commands.js";
import { GLOBAL_FLAGS, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Cancel a run: it stops after the current step, keeping its checkpoint and adapter.",
  usage: "agent cancel <run_id>",
  flags: [],
  examples: ["agent cancel run-20261201-101500-ab12cd"],
};

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({ args: argv, options: GLOBAL_FLAGS, allowPositionals: true, strict: true });
  if (positionals.length !== 1) throw usageError("cancel", help, positionals.length ? "one run id, please" : "which run? give its id");
  const run = await client.cancelRun(positionals[0]);
  console.log(`run ${run.runId}: ${runStateName(run.state)}${run.reason ? ` (${run.reason})` : ""}`);
  console.log(`follow it to the end and download it: agent watch ${run.runId}${repeatFlags(values)}`);
  return 0;
};
