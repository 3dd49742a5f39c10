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
import { join } from "node:path";
import { parseArgs } from "node:util";

import { create, fromJson, toJsonString, type MessageInitShape } from "@bufbuild/protobuf";

import { loadAgentTask, type AgentTask } from "../agent/agent-task/define.js";
import { agentSpec, judgeAgentEval, junitXml, pp, rowsOf, taskRows } from "../agent/agent-task/episode-eval.js";
import { startToolHost } from "../agent/agent-task/tool-host.js";
import { episodesReport } from "../agent/report/episodes-report.js";
import { evalsDirOrDefault, UserError, writeFileAtomic } from "../agent/workspace.js";
import { EvaluateResultSchema, TrainRequestSchema, type EvaluateResult, type TrainRequest } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
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

async function follow(client: SidecarClient, events: AsyncIterable<{ event?: unknown }> | AsyncGenerator<unknown>): Promise<number> {
  let state: RunState | undefined;
  let runId = "";
  for await (const raw of events as AsyncIterable<Record<string, unknown>>) {
    const ev = raw as { runId: string; kind: { case: string; value: Record<string, unknown> } };
    runId = ev.runId || runId;
    if (ev.kind.case === "trainStep") {
      const s = ev.kind.value as { step: bigint; maxSteps: bigint; metrics: Record<string, number> };
      console.log(stepLine(s.step, s.maxSteps, s.metrics));
    } else if (ev.kind.case === "warning") {
      console.log(`warning: ${(ev.kind.value as { message: string }).message}`);
    } else if (ev.kind.case === "stateChange") {
      const sc = ev.kind.value as { state: RunState; reason: string };
      state = sc.state;
      console.log(`run ${runId}: ${runStateName(sc.state)}${sc.reason ? ` (${sc.reason})` : ""}`);
    }
  }
  return state === RunState.SUCCEEDED ? 0 : 1;
}

export async function trainAgentTask(argv: string[], client: SidecarClient): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { ...GLOBAL_FLAGS, "agent-task": { type: "string" }, config: { type: "string" }, "run-id": { type: "string" }, "evals-dir": { type: "string" } }, allowPositionals: false });
  const task = await loadAgentTask(values["agent-task"]!);
  const rows = rowsOf(task, "train");
  if (rows.length === 0) throw new UserError(`${values["agent-task"]}: tasks: no rows with split "train" (the default split)`);
  const host = await startToolHost(task);
  try {
    const req = readConfig(values.config);
    if (req.rewards.length) throw new UserError(`--config ${values.config}: rewards: must be empty for an agent task (its scorers are the reward)`);
    const request: MessageInitShape<typeof TrainRequestSchema> = {
      baseModel: req.baseModel, mode: req.mode, grpo: req.grpo, lora: req.lora, runtime: req.runtime, heldOut: req.heldOut,
      runId: values["run-id"] ?? req.runId,
      dataset: { source: { case: "inline", value: { rows: taskRows(rows) } } },
      agent: agentSpec(task, host.address),
    };
    console.log(`agent task ${task.name}: ${rows.length} train tasks, tools ${Object.keys(task.tools).join(", ")}, scorers ${Object.keys(task.scorers).join(", ")}; tools served at ${host.address}`);
    return await follow(client, client.train(request));
  } finally {
    await host.close();
  }
}

export async function evalAgentTask(argv: string[], client: SidecarClient): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { ...GLOBAL_FLAGS, "agent-task": { type: "string" }, run: { type: "string" }, samples: { type: "string" }, threshold: { type: "string" }, out: { type: "string" }, "evals-dir": { type: "string" } }, allowPositionals: false });
  if (!values.run) throw new UserError("agent eval --agent-task: --run ID is required (the run whose adapter is evaluated)");
  const samples = number("--samples", values.samples, 1, 64, true) ?? 1;
  const threshold = number("--threshold", values.threshold, 0, 1, false);
  const task: AgentTask = await loadAgentTask(values["agent-task"]!);
  const rows = rowsOf(task, "test");
  if (rows.length === 0) throw new UserError(`${values["agent-task"]}: tasks: no rows with split "test"`);
  const run = await client.getRun(values.run);
  const host = await startToolHost(task);
  let result: EvaluateResult | undefined;
  try {
    for await (const r of client.evaluate({
      baseModel: run.request?.baseModel ?? "",
      adapters: [{ name: "adapter", source: { case: "runId", value: values.run } }],
      tasks: { source: { case: "inline", value: { rows: taskRows(rows) } } },
      samplesPerTask: samples, temperature: samples > 1 ? 1 : 0, maxNewTokens: run.request?.grpo?.maxCompletionLength ?? 64,
      agent: agentSpec(task, host.address),
    })) {
      if (r.kind.case === "result") result = r.kind.value;
    }
  } finally {
    await host.close();
  }
  if (!result) throw new Error("Evaluate ended without a result");
  const j = judgeAgentEval(task, result);
  const out = values.out ?? join(evalsDirOrDefault(values["evals-dir"]), "agent-tasks", task.name, values.run);
  mkdirSync(out, { recursive: true });
  writeFileAtomic(join(out, "eval.json"), JSON.stringify({ judgement: j, result: JSON.parse(toJsonString(EvaluateResultSchema, result)) }, null, 2) + "\n");
  writeFileAtomic(join(out, "junit.xml"), junitXml(task, result, j));
  writeFileAtomic(join(out, "report.md"), episodesReport(task, result, j, values.run) + "\n");
  console.log(`${task.name}: base ${(100 * j.base.success).toFixed(1)}% -> adapter ${(100 * j.adapter.success).toFixed(1)}% on ${j.n} test tasks; ` +
    `delta ${pp(j.delta)} [${pp(j.ci.lower)}, ${pp(j.ci.upper)}] (${j.method})`);
  console.log(`verdict: ${j.verdict} (${j.reason})`);
  console.log(`wrote ${join(out, "report.md")}, eval.json, junit.xml`);
  if (threshold !== undefined && j.adapter.success < threshold) {
    console.log(`threshold: the adapter's success ${(100 * j.adapter.success).toFixed(1)}% is below ${(100 * threshold).toFixed(1)}%: exit 1`);
    return 1;
  }
  return 0;
}

