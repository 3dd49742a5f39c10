/**
 * `agent resume <run_id>`: continue a FAILED or CANCELLED run from its newest intact checkpoint
 * (optimizer, scheduler and RNG state) as the same run: the sidecar queues it again, its events
 * continue from the last seq and its curve from the checkpoint's step. Then it is followed and
 * downloaded exactly as `agent watch` does. Exit 0 when the run SUCCEEDED.
 */
import { UserError } from "../agent/workspace.js";
import { runStateName } from "../sidecar/client.js";
import { RUN_DIR_FLAG_HELP, followOneRun, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Continue a FAILED or CANCELLED run from its last checkpoint, then follow and download it.",
  usage: "agent resume <run_id> [--evals-dir DIR]",
  flags: [RUN_DIR_FLAG_HELP],
  notes: "The run must have a complete checkpoint (checkpoints/checkpoint-N); Ctrl-C detaches as in agent watch. " +
    "An agent run (agent train --agent-task) calls its tools in an agent process: resume it with " +
    "agent train --agent-task FILE --resume RUN, which serves them again; here it is refused up front.",
  examples: ["agent resume run-20261201-101500-ab12cd"],
};

export const command: CommandHandler = followOneRun("resume", help, async (client, runId) => {
  if ((await client.getRun(runId)).request?.agent?.toolHost) {
    throw new UserError(`run ${runId} trains an agent whose tools the agent process serves: resume it with ` +
      `agent train --agent-task FILE --resume ${runId}`);
  }
  const run = await client.resumeRun(runId);
  console.log(`run ${run.runId}: ${runStateName(run.state)}${run.reason ? ` (${run.reason})` : ""}`);
});
