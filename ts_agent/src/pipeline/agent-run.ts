/**
 * An agent task's run (docs/agents.md): `agent train --agent-task FILE` and `agent resume RUN` of
 * an agent run. The run is a run like any other (run.json, events.jsonl and every artifact
 * downloaded into <evals dir>/runs/<run_id>/ at the end, the shared progress line), with one
 * difference: the sidecar's episode runner calls this process for every tool call and score, so
 * the run needs this process alive. Ctrl-C therefore does not detach (a detached agent run would
 * fail at its next tool call): it cancels the run at its next step, keeps serving until the run
 * stopped, and prints the command that continues it. The run records its agent task file (path,
 * sha256: AgentSpec.source); resume serves that file's tools again and refuses a changed file.
 * Before a new run starts, the preflight (agent-preflight.ts) samples the base: with no group of
 * episodes whose rewards differ, GRPO has nothing to learn, and the run is not started unless --force.
 */
import { resolve } from "node:path";

import { create, type MessageInitShape } from "@bufbuild/protobuf";

import { agentSpec, agentTaskRef, rowsOf, taskRows } from "../agent/agent-task/agent-spec.js";
import { loadAgentTask, type AgentTask } from "../agent/agent-task/define.js";
import { startToolHost } from "../agent/agent-task/tool-host.js";
import { trainProgressPrinter } from "../agent/train/progress.js";
import { SidecarLost, loadTrainRequest, trainViaSidecar, watchViaSidecar, type FollowOptions, type TrainOutcome } from "../agent/train/run.js";
import { UserError, evalsDirOrDefault } from "../agent/workspace.js";
import { TrainRequestSchema, type RunEvent, type TrainRequest } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { RunState, type SidecarClient } from "../sidecar/client.js";
import { printOutcome, sidecarLostLines } from "./follow.js";
import { repeatFlags } from "./next-commands.js";
import { WARM_START_VARIANT } from "../agent/core/base-vs-adapter.js";
import { agentPreflight, noSignal, notStartedLine, preflightLines } from "./agent-preflight.js";
import { checkAgentTaskFile } from "./run-task-file.js";

type Flags = { address?: string; token?: string; "evals-dir"?: string };

/** The command that continues an agent run from its last checkpoint. */
export function agentResumeCommand(runId: string, values: Flags): string {
  return `agent resume ${runId}${repeatFlags(values)}`;
}

/**
 * Serve `task`'s tools (on `port`, 0 = any) while `follow` runs and follows a run to its end, with
 * the shared progress line; Ctrl-C cancels the run (see the module docs). Exit 0 when the run
 * SUCCEEDED, 130 after a Ctrl-C, else 1.
 */
export async function followServing(
  client: SidecarClient,
  values: Flags,
  task: AgentTask,
  port: number,
  follow: (toolHost: string, opts: FollowOptions) => Promise<TrainOutcome>,
  runIdHint = "",
): Promise<{ code: number; outcome: TrainOutcome | null }> {
  const host = await startToolHost(task, port);
  const progress = trainProgressPrinter({ stepsOffTty: true });
  let runId = runIdHint;
  let asked = false;
  let sent = false;
  const cancel = () => {
    if (!runId || sent) return;
    sent = true;
    client.cancelRun(runId).catch((err: unknown) => console.error(`agent: cancel ${runId}: ${String((err as Error).message).split("\n")[0]}`));
  };
  const onSigint = () => {
    if (asked) {
      console.error(
        `agent: second Ctrl-C: leaving now; run ${runId || "(not named yet)"} fails at its next tool call (nothing serves its tools)` +
          (runId ? `; continue it from its last checkpoint with: ${agentResumeCommand(runId, values)}` : ""),
      );
      process.exit(130);
    }
    asked = true;
    console.log(
      `Ctrl-C: an agent run needs this process (it serves ${task.name}'s tools and scorers), so run ${runId || "(starting)"} is cancelled at its next step ` +
        "instead of detached; waiting for it to stop (Ctrl-C again leaves now)",
    );
    cancel();
  };
  process.on("SIGINT", onSigint);
  const onEvent = (ev: RunEvent) => {
    if (!runId && ev.runId) {
      runId = ev.runId;
      if (asked) cancel();
    }
  };
  let outcome: TrainOutcome;
  try {
    outcome = await follow(host.address, { log: progress.log, evalsDir: evalsDirOrDefault(values["evals-dir"]), onEvent });
  } catch (err) {
    progress.end();
    if (err instanceof SidecarLost) {
      for (const line of sidecarLostLines(err, values)) console.error(line);
      return { code: 1, outcome: null };
    }
    throw err;
  } finally {
    process.off("SIGINT", onSigint);
    await host.close();
  }
  progress.end();
  printOutcome(outcome);
  if (outcome.state !== RunState.SUCCEEDED) console.log(`continue it from its last checkpoint: ${agentResumeCommand(outcome.runId, values)}`);
  return { code: asked ? 130 : outcome.state === RunState.SUCCEEDED ? 0 : 1, outcome };
}

/** What `agent train --agent-task` and `agent demo --agent-task` set over the config's request. */
export interface AgentTrainOverrides {
  runId?: string;
  baseModel?: string;
  seed?: number;
  /** train even when the preflight finds no group with a spread (agent-preflight.ts) */
  force?: boolean;
  /** GRPO from this run's adapter (a warm start: `agent warmstart`), TrainRequest.init_adapter */
  initFrom?: string;
}

/** Train on the agent task's train rows while this process serves its tools and scorers. */
export async function trainAgentRun(
  client: SidecarClient,
  values: Flags,
  file: string,
  config: TrainRequest,
  overrides: AgentTrainOverrides = {},
): Promise<{ code: number; outcome: TrainOutcome | null }> {
  const task = await loadAgentTask(file);
  const rows = rowsOf(task, "train");
  const planned = agentTrainRequest(task, file, config, overrides, ""); // a bad config or task is refused before anything starts
  const preflight = await agentPreflight(client, file, planned);
  for (const line of preflightLines(preflight)) console.log(line);
  if (noSignal(preflight) && !overrides.force) {
    console.error(notStartedLine("train"));
    return { code: 2, outcome: null };
  }
  const ref = agentTaskRef(task, file);
  const acts = task.run ? "an agent program (its own loop and tools)" : `tools ${ref.tools.join(", ") || "(none)"}`;
  console.log(
    `agent task ${task.name}: ${rows.length} train tasks, ${acts}, scorers ${ref.scorers.map((s) => s.name).join(", ")} (${file}, sha256 ${ref.sha256.slice(0, 12)})`,
  );
  return followServing(
    client,
    values,
    task,
    0,
    (toolHost, opts) => trainViaSidecar(client, agentTrainRequest(task, file, config, overrides, toolHost), opts),
    overrides.runId ?? config.runId,
  );
}

/** The TrainRequest of an agent task: the config's knobs (`rewards` must be empty: the scorers are
 *  the reward), the task's train rows inline, its AgentSpec served at `toolHost`. */
export function agentTrainRequest(task: AgentTask, file: string, config: TrainRequest, overrides: AgentTrainOverrides, toolHost: string): TrainRequest {
  if (config.rewards.length) throw new UserError("--config: rewards: must be empty for an agent task (its scorers are the reward)");
  const rows = rowsOf(task, "train");
  if (rows.length === 0) throw new UserError(`${file}: tasks: no rows with split "train" (the default split)`);
  const grpo = overrides.seed === undefined ? config.grpo : { ...config.grpo!, seed: BigInt(overrides.seed) };
  const request: MessageInitShape<typeof TrainRequestSchema> = {
    baseModel: overrides.baseModel ?? config.baseModel,
    mode: config.mode,
    grpo,
    lora: config.lora,
    runtime: config.runtime,
    heldOut: config.heldOut,
    runId: overrides.runId ?? config.runId,
    dataset: { source: { case: "inline", value: { rows: taskRows(rows) } } },
    agent: agentSpec(task, toolHost, agentTaskRef(task, file)),
    ...(overrides.initFrom ? { initAdapter: { name: WARM_START_VARIANT, source: { case: "runId" as const, value: overrides.initFrom } } } : {}),
  };
  return create(TrainRequestSchema, request);
}

/**
 * For a request that trains an agent (`agent sweep` of an agent run's request, or of
 * --agent-task FILE): serve the agent task file it records (refused when gone or changed, as
 * resume is) while `fn` runs, with the request's agent.tool_host pointing at this process. A
 * request without an agent runs `fn` as it is.
 */
export async function servingRecordedTask<T>(request: TrainRequest, label: string, command: string, fn: () => Promise<T>): Promise<T> {
  const spec = request.agent;
  if (!spec) return fn();
  const path = spec.source?.path ?? "";
  await checkAgentTaskFile({ runId: label, request }, command, path);
  const host = await startToolHost(await loadAgentTask(path));
  spec.toolHost = host.address;
  try {
    return await fn();
  } finally {
    await host.close();
  }
}

/**
 * Continue a FAILED or CANCELLED agent run from its last checkpoint: its recorded agent task file
 * (or `file`, which must be the same bytes) serves the tools again on the port the run calls, the
 * sidecar queues it again, and it is followed and downloaded to its end.
 */
export async function resumeAgentRun(client: SidecarClient, values: Flags, runId: string, file?: string, accept = false): Promise<number> {
  const run = await client.getRun(runId);
  const spec = run.request?.agent;
  if (!spec) throw new UserError(`run ${runId} is not an agent run: resume it with agent resume ${runId}`);
  const path = file ?? spec.source?.path ?? "";
  if (!path)
    throw new UserError(`run ${runId} does not record its agent task file (an older run): resume it with agent train --agent-task FILE --resume ${runId}`);
  await checkAgentTaskFile(run, "resume", path, { accept, evalsDir: evalsDirOrDefault(values["evals-dir"]) });
  const port = Number(spec.toolHost.split(":").pop());
  if (!Number.isInteger(port) || port <= 0)
    throw new UserError(`run ${runId}: its request's agent.tool_host ${JSON.stringify(spec.toolHost)} names no port to serve the tools on again`);
  const task = await loadAgentTask(path);
  const { code } = await followServing(
    client,
    values,
    task,
    port,
    async (_address, opts) => {
      await client.resumeRun(runId);
      console.log(`agent task ${task.name}: run ${runId} resumed from its last checkpoint; tools served at ${spec.toolHost}`);
      return watchViaSidecar(client, runId, opts);
    },
    runId,
  ).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException)?.code === "EADDRINUSE") {
      throw new UserError(`run ${runId}: cannot serve the tools on ${spec.toolHost} again, where the run calls them (the port is in use)`);
    }
    throw err;
  });
  return code;
}

/** `agent sweep --agent-task FILE [--config C]`: the request every seed trains (its tool host is
 *  filled in by servingRecordedTask). */
export async function agentSweepRequest(file: string, config: string | undefined): Promise<{ request: TrainRequest; source: string }> {
  const task = await loadAgentTask(file);
  const request = agentTrainRequest(task, file, config ? await loadTrainRequest(resolve(config)) : create(TrainRequestSchema), {}, "");
  return { request, source: `${config ?? "the default knobs"} with agent task ${task.name} (${file})` };
}
