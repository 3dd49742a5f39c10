/**
 * `agent watch <run_id>`: re-attach to a run (its events replayed from the start, then followed
 * live, with the same progress line as `agent train`), and download it once it is over: the one
 * command that recovers a run whose client went away. Exit 0 when the run SUCCEEDED.
 */
import { parseArgs } from "node:util";

import { Detached, trainProgressPrinter, watchViaSidecar, type TrainOutcome } from "../agent/train/run.js";
import { evalsDirOrDefault } from "../agent/workspace.js";
import { RunState } from "../sidecar/client.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, repeatFlags, usageError, type CommandHandler, type CommandHelp } from "./flags.js";
import { ctrlCDetaches, printOutcome } from "./train.js";

export const help: CommandHelp = {
  summary: "Re-attach to a run: replay its events, follow it live, then download and verify it.",
  usage: "agent watch <run_id> [--evals-dir DIR]",
  flags: [["--evals-dir DIR", "where runs/<run_id>/ is written (default agent-evals/)"]],
  notes: "Ctrl-C detaches again (a second Ctrl-C within 2 s cancels the run).",
  examples: ["agent watch run-20261201-101500-ab12cd"],
};

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({ args: argv, options: { ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS }, allowPositionals: true, strict: true });
  if (positionals.length !== 1) throw usageError("watch", help, positionals.length ? "one run id, please" : "which run? give its id");
  const controller = new AbortController();
  const ctrlC = ctrlCDetaches(controller);
  const progress = trainProgressPrinter({ stepsOffTty: true });
  let out: TrainOutcome;
  try {
    out = await watchViaSidecar(client, positionals[0], { log: progress.log, evalsDir: evalsDirOrDefault(values["evals-dir"]), signal: controller.signal });
  } catch (err) {
    progress.end();
    if (err instanceof Detached) return ctrlC.afterDetach(client, err.runId, repeatFlags(values));
    ctrlC.dispose();
    throw err;
  }
  ctrlC.dispose();
  progress.end();
  printOutcome(out);
  return out.state === RunState.SUCCEEDED ? 0 : 1;
};
