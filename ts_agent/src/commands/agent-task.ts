/**
 * The --agent-task forms of `agent train` and `agent demo` (docs/agents.md); `agent eval`,
 * `agent baseline set`, `report`, `compare`, `select`, `export`, `delete` and `resume` take an
 * agent run or an agent task file through their own code (an agent task file is a task set:
 * eval/agent-task-set.ts).
 *
 * train: the preflight (pipeline/agent-preflight.ts: no group of the base's episodes with a
 * spread refuses to start unless --force), then a TrainRequest from --config (grpo, lora,
 * base_model, held_out) with the task's train rows and its AgentSpec; this process serves the tools and scorers while the run trains
 * (pipeline/agent-run.ts: Ctrl-C cancels instead of detaching); run.json and the artifacts are
 * downloaded into <evals dir>/runs/<run_id>/ as for any run. Exit 0 when the run SUCCEEDED.
 *
 * demo: demonstration episodes from the task's `reference` calls (written under --data-root, the
 * sidecar's data root), the embedded agent model built from them (base_model "embedded:<that
 * file>"), baseline.json for that base (when missing), training, `agent eval` of the run and its
 * report.md with the milestone. An agent program (defineAgentProgram) has no demonstrations to
 * build a model from: refused, naming `run`.
 *
 * `--agent-program FILE` (train, eval, plan, sweep: agentProgramArgv) is `--agent-task FILE` for a
 * file whose default export is an agent program, refused for any other: one pipeline, one flag
 * that says which kind of file the user meant.
 */
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { create } from "@bufbuild/protobuf";

import { rowsOf } from "../agent/agent-task/agent-spec.js";
import { embeddedBaseModel } from "../agent/core/base-model.js";
import { loadAgentTask } from "../agent/agent-task/define.js";
import { PROGRAM_NO_DEMONSTRATIONS, writeDemonstrations } from "../agent/agent-task/demonstrations.js";
import { writeReport } from "../agent/report/run-report.js";
import { loadTrainRequest } from "../agent/train/run.js";
import { milestoneLine, reasonAfterLabel } from "../agent/verdict/milestone.js";
import { UserError, dataRoot } from "../agent/workspace.js";
import { TrainRequestSchema } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { RunState, type SidecarClient } from "../sidecar/client.js";
import { resumeAgentRun, trainAgentRun } from "../pipeline/agent-run.js";
import { ensureBaseline } from "../pipeline/baseline-step.js";
import { evalRun } from "../pipeline/evaluate-adapter.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, evalTargetFromFlags, numberFlag } from "./flags.js";

const TASK_FLAGS = { ...GLOBAL_FLAGS, ...EVALS_DIR_FLAG, "agent-task": { type: "string" }, config: { type: "string" }, "run-id": { type: "string" } } as const;

/** argv with `--agent-program FILE` as `--agent-task FILE`, once FILE loaded as an agent program
 *  (refused, one line, when its default export has no `run`, or when --agent-task is given too). */
export async function agentProgramArgv(argv: string[]): Promise<string[]> {
  const out: string[] = [];
  let file: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") {
      out.push(...argv.slice(i));
      break;
    }
    if (a !== "--agent-program" && !a.startsWith("--agent-program=")) {
      out.push(a);
      continue;
    }
    if (file !== undefined) throw new UserError("--agent-program: given twice: give one agent program");
    file = a === "--agent-program" ? argv[++i] : a.slice("--agent-program=".length);
    if (!file || file.startsWith("-")) throw new UserError("--agent-program: needs a FILE (an agent program, defineAgentProgram)");
    out.push("--agent-task", file);
  }
  if (file === undefined) return argv;
  if (argv.some((a) => a === "--agent-task" || a.startsWith("--agent-task=")))
    throw new UserError("--agent-program and --agent-task both name the agent: give one");
  await loadAgentTask(file, { program: true });
  return out;
}

async function configOf(path: string | undefined) {
  return path ? loadTrainRequest(resolve(path)) : create(TrainRequestSchema);
}

export async function trainAgentTask(argv: string[], client: SidecarClient): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...TASK_FLAGS,
      resume: { type: "string" },
      force: { type: "boolean" },
      "accept-changed-task": { type: "boolean" },
      "init-from": { type: "string" },
    },
    allowPositionals: false,
  });
  const file = values["agent-task"]!;
  if (values.resume) {
    if (values.config || values["run-id"]) throw new UserError("--resume RUN continues the run as it was requested: leave out --config and --run-id");
    return resumeAgentRun(client, values, values.resume, file, values["accept-changed-task"]);
  }
  const config = await configOf(values.config);
  const initFrom = values["init-from"];
  if (initFrom) {
    // GRPO from a warm start's adapter, on the base it was trained on
    const warm = await client.getRun(initFrom);
    if (config.baseModel && config.baseModel !== (warm.request?.baseModel ?? "")) {
      throw new UserError(
        `--init-from ${initFrom}: it was trained on ${warm.request?.baseModel || "the embedded default model"}, not --config's base_model ${config.baseModel}`,
      );
    }
    config.baseModel = warm.request?.baseModel ?? "";
  }
  return (await trainAgentRun(client, values, file, config, { runId: values["run-id"], force: values.force, initFrom })).code;
}

export async function demoAgentTask(argv: string[], client: SidecarClient): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...TASK_FLAGS,
      "data-root": { type: "string" },
      seed: { type: "string" },
      force: { type: "boolean" },
      "demonstrations-from": { type: "string" },
    },
    allowPositionals: false,
  });
  const file = values["agent-task"]!;
  const seed = values.seed === undefined ? undefined : numberFlag("--seed", values.seed, { min: 0, max: 2 ** 32 - 1, integer: true });
  const config = await configOf(values.config);
  const task = await loadAgentTask(file);
  // an agent program has no reference calls: its embedded agent model is built from an agent task's demonstrations
  const from = values["demonstrations-from"];
  if (task.run && !from) throw new UserError(`${file}: run: ${PROGRAM_NO_DEMONSTRATIONS}; or give --demonstrations-from AGENT_TASK_FILE`);
  if (!task.run && from) throw new UserError(`--demonstrations-from: only for an agent program; ${file} has its own reference`);
  const source = from ? await loadAgentTask(from) : task;
  if (from && (source.run || !source.reference)) throw new UserError(`--demonstrations-from ${from}: must be an agent task with reference(task)`);
  const root = resolve(values["data-root"] ?? dataRoot());
  const relative = join("sidecar-data", "agent-demos", `${source.name}.demos.jsonl`);
  mkdirSync(join(root, dirname(relative)), { recursive: true });
  const n = await writeDemonstrations(source, rowsOf(source, "train"), join(root, relative));
  console.log(`== ${n} demonstration episodes: ${join(root, relative)} (the embedded agent model is built from them once, then cached)`);
  const baseModel = embeddedBaseModel(relative);
  const paths = evalTargetFromFlags({ tasks: file, "evals-dir": values["evals-dir"] });
  const target = { ...paths, settings: { ...paths.settings, baseModel } };
  await ensureBaseline(client, target, "demo", Date.now());
  const trained = await trainAgentRun(client, values, file, config, { runId: values["run-id"], baseModel, seed, force: values.force });
  const out = trained.outcome;
  if (!out) return trained.code;
  if (out.state === RunState.SUCCEEDED) await evalRun(client, out.runId, target);
  const { path, analysis } = writeReport(target.evalsDir, out.runId);
  console.log(`[demo] ${milestoneLine(analysis.milestone)}`);
  console.log(`       ${reasonAfterLabel(analysis.milestone)}`);
  console.log(`[demo] report: ${path}`);
  return out.state === RunState.SUCCEEDED && analysis.milestone.verdict !== "FAIL" ? 0 : 1;
}
