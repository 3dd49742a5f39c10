/**
 * `agent resume <run_id>`: continue a FAILED or CANCELLED run from its newest intact checkpoint
 * (optimizer, scheduler and RNG state) as the same run: the sidecar queues it again, its events
 * continue from the last seq and its curve from the checkpoint's step. Then it is followed and
 * downloaded exactly as `agent watch` does. Exit 0 when the run SUCCEEDED.
 */
import { parseArgs } from "node:util";

import { watchViaSidecar } from "../agent/train/run.js";
import { followAttached } from "../pipeline/follow.js";
import { runStateName } from "../sidecar/client.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Continue a FAILED or CANCELLED run from its last checkpoint, then follow and download it.",
  usage: "agent resume <run_id> [--evals-dir DIR]",
  flags: [["--evals-dir DIR", "where runs/<run_id>/ is written (default: the nearest agent-evals/ at or above the working directory)"]],
  notes: "The run must have a complete checkpoint (checkpoints/checkpoint-N); Ctrl-C detaches as in agent watch.",
  examples: ["agent resume run-20261201-101500-ab12cd"],
};

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({ args: argv, options: { ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS }, allowPositionals: true, strict: true });
  if (positionals.length !== 1) throw usageError("resume", help, positionals.length ? "one run id, please" : "which run? give its id");
  const run = await client.resumeRun(positionals[0]);
  console.log(`run ${run.runId}: ${runStateName(run.state)}${run.reason ? ` (${run.reason})` : ""}`);
  return followAttached(client, values, (opts) => watchViaSidecar(client, positionals[0], opts));
};
