/**
 * `agent train --agent-task FILE` and `agent eval --agent-task FILE --run ID`: an agent task
 * defined in TypeScript (docs/agents.md) trained and judged through the sidecar. This process
 * serves the task's tools and scorers (AgentToolHostService) for as long as the run or the
 * Evaluate needs them; the sidecar's episode runner generates the model's turns.
 *
 * train: a TrainRequest from --config (optional: grpo, lora, base_model, held_out) with the
 * task's train rows and its AgentSpec; progress lines show reward, turns per episode, tool-call
 * rate and tool errors per step. Exit 0 when the run SUCCEEDED, 1 otherwise. If this process
 * dies mid-run, the run FAILS naming the tool host (its checkpoints stay on the sidecar).
 *
 * eval: base vs the run's adapter on the task's test rows (K episodes each), judged per task;
 * report.md (episodes section, transcripts), eval.json and junit.xml under --out; with
 * --threshold T the exit code is 1 when the adapter's success is below T (as promptfoo's).
 */
import { mkdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { create, fromJson, toJsonString, type MessageInitShape } from "@bufbuild/protobuf";

import { loadAgentTask, type AgentTask, type AgentTaskRow } from "../agent/agent-task/define.js";
import { writeDemonstrations } from "../agent/agent-task/demonstrations.js";
import { agentSpec, judgeAgentEval, junitXml, pp, rowsOf, taskRows, type AgentJudgement } from "../agent/agent-task/episode-eval.js";
import { startToolHost } from "../agent/agent-task/tool-host.js";
import { episodesReport } from "../agent/report/episodes-report.js";
import { runEvaluate } from "../agent/eval/evaluate.js";
import { dataRoot, evalsDirOrDefault, UserError, writeFileAtomic } from "../agent/workspace.js";
import { EvaluateResultSchema, GrpoConfigSchema, TrainRequestSchema, type EvaluateResult, type RunEvent, type TrainRequest } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { RunState, runStateName, type SidecarClient } from "../sidecar/client.js";
import { GLOBAL_FLAGS } from "./flags.js";

function number(flag: string, value: string | undefined, lo: number, hi: number, integer: boolean): number | undefined {
  if (value === undefined) return undefined;
  const x = Number(value);
  if (!Number.isFinite(x) || x < lo || x > hi || (integer && !Number.isInteger(x))) {
    throw new UserError(`${flag}: must be ${integer ? "an integer" : "a number"} in [${lo}, ${hi}], got ${JSON.stringify(value)}`);
  }
  return x;
}

function readConfig(path: string | undefined): TrainRequest {
  if (!path) return create(TrainRequestSchema);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new UserError(`--config ${path}: ${String((err as Error).message).split("\n")[0]}`);
  }
  try {
    return fromJson(TrainRequestSchema, json as never);
  } catch (err) {
    throw new UserError(`--config ${path}: ${String((err as Error).message).split("\n")[0]}`);
  }
}

function stepLine(step: bigint, maxSteps: bigint, m: Record<string, number>): string {
  const f = (k: string, d = 3) => (m[k] === undefined ? "-" : m[k].toFixed(d));
  return `step ${step}/${maxSteps}  reward ${f("reward")}  turns/episode ${f("episodes/turns", 2)}  tool calls/episode ${f("tools/call_frequency", 2)}  ` +
    `tool errors/call ${f("tools/failure_frequency", 2)}  limits hit ${f("episodes/limit_hit", 2)}`;
}

/** Follow a run's events, printing the progress lines; the run id and whether it SUCCEEDED. */
async function follow(events: AsyncIterable<RunEvent>): Promise<{ runId: string; succeeded: boolean }> {
  let state: RunState | undefined;
  let runId = "";
  for await (const ev of events) {
    runId = ev.runId || runId;
    if (ev.kind.case === "trainStep") {
      console.log(stepLine(ev.kind.value.step, ev.kind.value.maxSteps, ev.kind.value.metrics));
    } else if (ev.kind.case === "warning") {
      console.log(`warning: ${ev.kind.value.message}`);
    } else if (ev.kind.case === "stateChange") {
      state = ev.kind.value.state;
      console.log(`run ${runId}: ${runStateName(state)}${ev.kind.value.reason ? ` (${ev.kind.value.reason})` : ""}`);
    }
  }
  return { runId, succeeded: state === RunState.SUCCEEDED };
}

function loadRows(task: AgentTask, file: string, split: "train" | "test"): AgentTaskRow[] {
  const rows = rowsOf(task, split);
  if (rows.length === 0) throw new UserError(`${file}: tasks: no rows with split "${split}"${split === "train" ? " (the default split)" : ""}`);
  return rows;
}

/** Train on the task's train rows while this process serves its tools; `baseModel` overrides the config's. */
async function trainOn(client: SidecarClient, task: AgentTask, file: string, config: string | undefined, runId: string | undefined,
  baseModel?: string, seed?: number): Promise<{ runId: string; succeeded: boolean }> {
  const rows = loadRows(task, file, "train");
  const req = readConfig(config);
  if (seed !== undefined) req.grpo = { ...(req.grpo ?? create(GrpoConfigSchema)), seed: BigInt(seed) };
  if (req.rewards.length) throw new UserError(`--config ${config}: rewards: must be empty for an agent task (its scorers are the reward)`);
  const host = await startToolHost(task);
  try {
    const request: MessageInitShape<typeof TrainRequestSchema> = {
      baseModel: baseModel ?? req.baseModel, mode: req.mode, grpo: req.grpo, lora: req.lora, runtime: req.runtime, heldOut: req.heldOut,
      runId: runId ?? req.runId,
      dataset: { source: { case: "inline", value: { rows: taskRows(rows) } } },
      agent: agentSpec(task, host.address),
    };
    console.log(`agent task ${task.name}: ${rows.length} train tasks, tools ${Object.keys(task.tools).join(", ")}, scorers ${Object.keys(task.scorers).join(", ")}; tools served at ${host.address}`);
    return await follow(client.train(request));
  } finally {
    await host.close();
  }
}

/** Base vs the run's adapter on the test rows; report.md, eval.json, junit.xml under `out`. */
async function evalOn(client: SidecarClient, task: AgentTask, file: string, runId: string, samples: number, out: string): Promise<AgentJudgement> {
  const rows = loadRows(task, file, "test");
  const run = await client.getRun(runId);
  const host = await startToolHost(task);
  let result: EvaluateResult;
  try {
    // runEvaluate prints a warning the sidecar streams (a GGUF base converted first)
    result = await runEvaluate(client, {
      baseModel: run.request?.baseModel ?? "",
      adapters: [{ name: "adapter", source: { case: "runId", value: runId } }],
      tasks: { source: { case: "inline", value: { rows: taskRows(rows) } } },
      samplesPerTask: samples, temperature: samples > 1 ? 1 : 0, maxNewTokens: run.request?.grpo?.maxCompletionLength ?? 64,
      agent: agentSpec(task, host.address),
    });
  } finally {
    await host.close();
  }
  const j = judgeAgentEval(task, result);
  mkdirSync(out, { recursive: true });
  writeFileAtomic(join(out, "eval.json"), JSON.stringify({ judgement: j, result: JSON.parse(toJsonString(EvaluateResultSchema, result)) }, null, 2) + "\n");
  writeFileAtomic(join(out, "junit.xml"), junitXml(task, result, j));
  writeFileAtomic(join(out, "report.md"), episodesReport(task, result, j, runId) + "\n");
  console.log(`${task.name}: base ${(100 * j.base.success).toFixed(1)}% -> adapter ${(100 * j.adapter.success).toFixed(1)}% on ${j.n} test tasks; ` +
    `delta ${pp(j.delta)} [${pp(j.ci.lower)}, ${pp(j.ci.upper)}] (${j.method})`);
  console.log(`verdict: ${j.verdict} (${j.reason})`);
  console.log(`wrote ${join(out, "report.md")}, eval.json, junit.xml`);
  return j;
}

const TASK_FLAGS = { ...GLOBAL_FLAGS, "agent-task": { type: "string" }, "evals-dir": { type: "string" } } as const;

export async function trainAgentTask(argv: string[], client: SidecarClient): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { ...TASK_FLAGS, config: { type: "string" }, "run-id": { type: "string" }, resume: { type: "string" } }, allowPositionals: false });
  const task = await loadAgentTask(values["agent-task"]!);
  if (values.resume) return (await resumeOn(client, task, values.resume)).succeeded ? 0 : 1;
  return (await trainOn(client, task, values["agent-task"]!, values.config, values["run-id"])).succeeded ? 0 : 1;
}

/**
 * Continue a FAILED or CANCELLED agent run (its agent process died, say) from its last
 * checkpoint: serve the tools again on the port its request names (the sidecar's worker calls
 * that address), ask the sidecar to resume it, and follow it to its end.
 */
async function resumeOn(client: SidecarClient, task: AgentTask, runId: string): Promise<{ runId: string; succeeded: boolean }> {
  const run = await client.getRun(runId);
  const address = run.request?.agent?.toolHost ?? "";
  const port = Number(address.split(":").pop());
  if (!address || !Number.isInteger(port) || port <= 0) throw new UserError(`--resume ${runId}: not an agent run (its request has no agent.tool_host)`);
  let host;
  try {
    host = await startToolHost(task, port);
  } catch (err) {
    throw new UserError(`--resume ${runId}: cannot serve the tools on ${address} again, where the run calls them (${String((err as Error).message).split("\n")[0]})`);
  }
  try {
    await client.resumeRun(runId);
    console.log(`agent task ${task.name}: run ${runId} resumed from its last checkpoint; tools served at ${host.address}`);
    return await follow(client.watchRun(runId));
  } finally {
    await host.close();
  }
}

export async function evalAgentTask(argv: string[], client: SidecarClient): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { ...TASK_FLAGS, run: { type: "string" }, samples: { type: "string" }, threshold: { type: "string" }, out: { type: "string" } }, allowPositionals: false });
  if (!values.run) throw new UserError("agent eval --agent-task: --run ID is required (the run whose adapter is evaluated)");
  const samples = number("--samples", values.samples, 1, 64, true) ?? 1;
  const threshold = number("--threshold", values.threshold, 0, 1, false);
  const task = await loadAgentTask(values["agent-task"]!);
  const out = values.out ?? join(evalsDirOrDefault(values["evals-dir"]), "agent-runs", task.name, values.run);
  const j = await evalOn(client, task, values["agent-task"]!, values.run, samples, out);
  if (threshold !== undefined && j.adapter.success < threshold) {
    console.log(`threshold: the adapter's success ${(100 * j.adapter.success).toFixed(1)}% is below ${(100 * threshold).toFixed(1)}%: exit 1`);
    return 1;
  }
  return 0;
}

/**
 * `agent demo --agent-task FILE`: demonstration episodes from the task's `reference` calls (written
 * under --data-root, the sidecar's data root), the embedded agent model built from them
 * (base_model "embedded:<that file>"), training, then base vs adapter on the test rows.
 */
export async function demoAgentTask(argv: string[], client: SidecarClient): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { ...TASK_FLAGS, config: { type: "string" }, "run-id": { type: "string" }, "data-root": { type: "string" }, out: { type: "string" }, seed: { type: "string" } }, allowPositionals: false });
  const file = values["agent-task"]!;
  const seed = number("--seed", values.seed, 0, 2 ** 32 - 1, true);
  const task = await loadAgentTask(file);
  const root = resolve(values["data-root"] ?? dataRoot());
  const relative = join("sidecar-data", "agent-demos", `${task.name}.demos.jsonl`);
  mkdirSync(join(root, dirname(relative)), { recursive: true });
  const n = await writeDemonstrations(task, loadRows(task, file, "train"), join(root, relative));
  console.log(`== ${n} demonstration episodes: ${join(root, relative)} (the embedded agent model is built from them once, then cached)`);
  const trained = await trainOn(client, task, file, values.config, values["run-id"], `embedded:${relative}`, seed);
  if (!trained.succeeded) return 1;
  const out = values.out ?? join(evalsDirOrDefault(values["evals-dir"]), "agent-runs", task.name, trained.runId);
  const j = await evalOn(client, task, file, trained.runId, 1, out);
  return j.verdict === "FAIL" ? 1 : 0;
}
