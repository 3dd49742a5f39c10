/**
 * `agent train --config FILE [--run-id ID] [--evals-dir DIR]`: start a GRPO run on the sidecar,
 * show live progress, then download and verify every artifact into <evals dir>/runs/<run_id>/
 * (agent/train/run.ts).
 *
 * FILE is a TrainRequest in proto JSON (field names as in the .proto or their camelCase JSON
 * names). Exit 0 when the run SUCCEEDED. Ctrl-C detaches (the run goes on; `agent watch` and
 * `agent cancel` are printed); a second Ctrl-C within 2 s cancels the run. An agent run
 * (--agent-task, pipeline/agent-run.ts) is cancelled by Ctrl-C instead: it needs this process.
 */
import { parseArgs } from "node:util";

import { trainHelp as agentTrainHelp } from "./agent-task-help.js";

import { loadTrainRequest, trainViaSidecar } from "../agent/train/run.js";
import { followAttached } from "../pipeline/follow.js";
import {
  EVALS_DIR_FLAG,
  GLOBAL_FLAGS,
  RUN_DIR_FLAG_HELP,
  TRAIN_FLAGS,
  hasAgentProgramFlag,
  usageError,
  type CommandHandler,
  type CommandHelp,
} from "./flags.js";

export const help: CommandHelp = {
  summary: "Train through the sidecar: live progress, then every artifact downloaded and sha256-verified.",
  usage:
    "agent train --config FILE [--run-id ID] [--evals-dir DIR] | agent train --agent-task FILE [--config FILE] [--run-id ID] | agent train --agent-program FILE [--config FILE] [--run-id ID]",
  flags: [
    ...agentTrainHelp,
    ["--config FILE", "a TrainRequest in proto JSON (.proto or camelCase field names)"],
    ["--run-id ID", "the run id to ask for (default: the sidecar assigns one)"],
    RUN_DIR_FLAG_HELP,
  ],
  notes:
    "Ctrl-C detaches: the run keeps going on the sidecar, and the `agent watch` / `agent cancel`\n" +
    "commands for it are printed; a second Ctrl-C within 2 s cancels the run. If the sidecar goes away\n" +
    "(and does not come back within a few re-attach attempts) the run id and the `agent watch` /\n" +
    "`agent resume` commands are printed, exit 1.\n" +
    "An agent run (--agent-task, --agent-program) needs this process, which serves its tools (or runs\n" +
    "the program's rollouts) and scorers: there Ctrl-C cancels the run at its next step instead of\n" +
    "detaching, waits for it to stop and prints the `agent resume RUN` that continues it from its last\n" +
    "checkpoint (a second Ctrl-C leaves at once).",
  examples: [
    "agent train --config run.json --run-id aml-1",
    "agent train --config run.json --evals-dir /tmp/evals --address 10.0.0.5:50151",
    "agent train --agent-program agent-evals/agent-programs/orders-openai.ts --config run.json --run-id orders-openai-1",
  ],
};

export const command: CommandHandler = async (argv, client) => {
  if (hasAgentProgramFlag(argv)) argv = await (await import("./agent-task.js")).agentProgramArgv(argv);
  if (argv.some((a) => a === "--agent-task" || a.startsWith("--agent-task="))) return (await import("./agent-task.js")).trainAgentTask(argv, client);
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...TRAIN_FLAGS, ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length) throw usageError("train", help, `unexpected argument '${positionals[0]}'`);
  if (!values.config) throw usageError("train", help, "--config FILE is required");
  const request = await loadTrainRequest(values.config);
  if (values["run-id"]) request.runId = values["run-id"];
  return followAttached(client, values, (opts) => trainViaSidecar(client, request, opts));
};
