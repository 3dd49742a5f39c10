/**
 * `agent resume <run_id>`: continue a FAILED or CANCELLED run from its newest intact checkpoint
 * (optimizer, scheduler and RNG state) as the same run: the sidecar queues it again, its events
 * continue from the last seq and its curve from the checkpoint's step. Then it is followed and
 * downloaded exactly as `agent watch` does. Exit 0 when the run SUCCEEDED.
 *
 * An agent run (agent train --agent-task) calls its tools and scorers in an agent process: this
 * process serves them again from the agent task file the run recorded (refused when the file is
 * gone or changed: pipeline/agent-run.ts), on the port the run calls, for as long as it runs.
 */
import { runStateName } from "../sidecar/client.js";
import { UserError } from "../agent/workspace.js";
import { resumeAgentRun } from "../pipeline/agent-run.js";
import { followRun } from "../pipeline/follow.js";
import { RUN_DIR_FLAG_HELP, oneRunId, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Continue a FAILED or CANCELLED run from its last checkpoint, then follow and download it.",
  usage: "agent resume <run_id> [--evals-dir DIR] [--accept-changed-task]",
  flags: [
    RUN_DIR_FLAG_HELP,
    [
      "--accept-changed-task",
      "an agent run whose task file changed since it trained: go on with the file as it is now (refused without it, naming what changed; recorded in runs/<run_id>/agent-task-changes.jsonl)",
    ],
  ],
  notes:
    "The run must have a complete checkpoint (checkpoints/checkpoint-N); Ctrl-C detaches as in agent watch. " +
    "An agent run (agent train --agent-task) is resumed with the agent task file it recorded, which this process serves " +
    "again while the run goes on (refused when the file changed since, naming what changed, unless --accept-changed-task); " +
    "Ctrl-C then cancels the run instead of detaching.",
  examples: ["agent resume run-20261201-101500-ab12cd"],
};

export const command: CommandHandler = async (argv, client) => {
  const accept = argv.includes("--accept-changed-task");
  const { values, runId } = oneRunId(
    "resume",
    help,
    argv.filter((a) => a !== "--accept-changed-task"),
  );
  if ((await client.getRun(runId)).request?.agent) return resumeAgentRun(client, values, runId, undefined, accept);
  if (accept) throw new UserError(`run ${runId} is not an agent run: --accept-changed-task does not apply`);
  const run = await client.resumeRun(runId);
  console.log(`run ${run.runId}: ${runStateName(run.state)}${run.reason ? ` (${run.reason})` : ""}`);
  return followRun(client, values, runId);
};
