/**
 * `agent watch <run_id>`: re-attach to a run (its events replayed from the start, then followed
 * live, with the same progress line as `agent train`), and download it once it is over: the one
 * command that recovers a run whose client went away. Exit 0 when the run SUCCEEDED.
 */
import { parseArgs } from "node:util";

import { watchViaSidecar } from "../agent/train/run.js";
import { followAttached } from "../pipeline/follow.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Re-attach to a run: replay its events, follow it live, then download and verify it.",
  usage: "agent watch <run_id> [--evals-dir DIR]",
  flags: [["--evals-dir DIR", "where runs/<run_id>/ is written (default: the nearest agent-evals/ at or above the working directory)"]],
  notes: "Ctrl-C detaches again (a second Ctrl-C within 2 s cancels the run).",
  examples: ["agent watch run-20261201-101500-ab12cd"],
};

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({ args: argv, options: { ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS }, allowPositionals: true, strict: true });
  if (positionals.length !== 1) throw usageError("watch", help, positionals.length ? "one run id, please" : "which run? give its id");
  return followAttached(client, values, (opts) => watchViaSidecar(client, positionals[0], opts));
};
