/**
 * `agent select` and `agent compare` score a run on rows of the --tasks file: a file other than the
 * one the run trained on would score it on another task (issue 30, item 8: exit 0 and a selection
 * from the other file's rows). The run's own task file is its dataset's jsonl_path (read under
 * $PY_TRAINER_DATA_ROOT, as agent select reads it), or, for rows sent inline, the file they came
 * from: a --tasks file that holds none of them is another one (its eval.json names the file its
 * eval used, when there is one). Where the run's file cannot be read here, nothing is judged.
 *
 * Issue 32, item 1 ("the run decides"): without --tasks / --base-model, a command given a run id
 * takes both from the run's own request (`targetForRun`): the AML file and model are defaults only
 * when neither the run nor a flag says otherwise.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { isAbsolute, join, relative, resolve } from "node:path";

import { EVAL_FILE } from "../agent/core/eval-log.js";
import { embeddedBaseModel, parseBaseModel } from "../agent/core/base-model.js";
import { defaultTasksPath, loadTaskFile } from "../agent/eval/tasks.js";
import { readLocalRun } from "../agent/train/run.js";
import { REPO_ROOT, UserError, appendLine, dataRoot, displayPath, runDataRoot, runDir } from "../agent/workspace.js";
import { agentTaskParts, changedParts } from "../agent/agent-task/agent-spec.js";
import { loadAgentTask } from "../agent/agent-task/define.js";
import type { Run } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../sidecar/client.js";
import type { EvalTarget } from "./eval-target.js";

export { runDataRoot };

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

/** The task file runs/<id>/eval.json says its eval used, or "". */
function evalTaskFile(evalsDir: string, runId: string): string {
  try {
    const log = JSON.parse(readFileSync(join(runDir(evalsDir, runId), EVAL_FILE), "utf8")) as { taskSet?: { path?: string } };
    return log.taskSet?.path ?? "";
  } catch {
    return "";
  }
}

/** A run with its request: runs/<id>/run.json when it holds one, else the sidecar's record. */
export async function runWithRequest(client: SidecarClient, evalsDir: string, runId: string): Promise<Run> {
  const local = readLocalRun(evalsDir, runId);
  return local?.request ? local : await client.getRun(runId);
}

/** The task file a run trained on, from its own request: its dataset's jsonl_path, else the file
 *  of its `embedded:<file>` base (what `agent demo --tasks FILE` trains on), else the file its
 *  eval.json names; null when nothing says (the AML default). */
export function runTaskFile(run: Run, evalsDir: string): string | null {
  const req = run.request;
  if (req?.agent?.source?.path) return req.agent.source.path; // an agent run: the file it recorded
  const source = req?.dataset?.source;
  const root = runDataRoot(run.runId, evalsDir);
  if (source?.case === "jsonlPath") return resolve(root, source.value);
  const base = parseBaseModel(req?.baseModel ?? "");
  if (base.kind === "embedded") return resolve(root, base.path);
  // eval.json names its file as displayPath wrote it: repo-relative inside the repository
  const fromEval = evalTaskFile(evalsDir, run.runId);
  return fromEval ? resolve(REPO_ROOT, fromEval) : null;
}

/**
 * The embedded model of a task file as a request names it: "embedded:<path under the sidecar's
 * data root>" ($PY_TRAINER_DATA_ROOT, else the repository, as scripts/demo.sh starts the
 * sidecar); "" for the AML file, whose embedded model is the default one.
 */
export function embeddedBaseFor(tasksPath: string): string {
  if (resolve(tasksPath) === defaultTasksPath()) return "";
  const root = resolve(dataRoot());
  const rel = relative(root, resolve(tasksPath));
  if (rel.startsWith("..") || isAbsolute(rel)) {
    throw new UserError(
      `--tasks ${tasksPath}: the embedded model of a task file is built by the sidecar from a file under its data root (${root}; set PY_TRAINER_DATA_ROOT if the sidecar has another); put the file there, or name a base_model in --config`,
    );
  }
  return embeddedBaseModel(rel);
}

const baseName = (base: string) => (base === "" ? "the embedded default model" : base);

/**
 * The eval target of a command given run `runId`: the run's own task file and base model unless a
 * flag names them; a --base-model or --tasks that conflicts with the run is a one-line UserError
 * (exit 2) naming both values.
 */
export async function targetForRun(client: SidecarClient, command: string, runId: string, target: EvalTarget): Promise<EvalTarget> {
  const run = await runWithRequest(client, target.evalsDir, runId);
  const base = run.request?.baseModel ?? "";
  const asked = target.settings.baseModel;
  if (asked !== "" && asked !== base) {
    throw new UserError(
      `agent ${command}: ${runId} was trained on ${baseName(base)}; --base-model ${asked} would score its adapter on another base (leave --base-model out)`,
    );
  }
  let tasksPath = target.tasksPath;
  if (target.tasksGiven) await checkRunTaskFile(client, command, target.evalsDir, runId, tasksPath);
  else tasksPath = runTaskFile(run, target.evalsDir) ?? defaultTasksPath();
  await checkAgentTaskFile(run, command, tasksPath);
  return { ...target, tasksPath, tasksGiven: true, settings: { ...target.settings, baseModel: base } };
}

/**
 * An agent run is judged and resumed with the agent task file it trained with, unchanged: its
 * tools and scorers are the reward and the grader. A one-line UserError (exit 2) when the file the
 * run recorded (AgentSpec.source) is not here, or when its bytes changed since: the refusal names
 * both sha256 and what changed, part by part (agent-spec.ts agentTaskParts: a tool, an agent
 * program's run, a scorer, the limits, the system prompt, the tasks). `accept` (resume's --accept-changed-task) goes on with
 * the changed file and records it in runs/<run_id>/agent-task-changes.jsonl.
 */
export async function checkAgentTaskFile(
  run: Pick<Run, "runId" | "request">,
  command: string,
  tasksPath: string,
  opts: { accept?: boolean; evalsDir?: string } = {},
): Promise<void> {
  const source = run.request?.agent?.source;
  if (!run.request?.agent) return;
  if (!source?.path) {
    throw new UserError(
      `agent ${command}: run ${run.runId} trains an agent task but does not record its file (an older run): pass --agent-task FILE to name it`,
    );
  }
  if (!existsSync(tasksPath)) throw new UserError(`agent ${command}: run ${run.runId}'s agent task file ${source.path} is not here: pass --agent-task FILE`);
  const now = sha256(tasksPath);
  if (!source.sha256 || now === source.sha256) return;
  const recorded = source.parts ?? {};
  const changed = Object.keys(recorded).length ? changedParts(recorded, agentTaskParts(await loadAgentTask(tasksPath))) : [];
  const what = !Object.keys(recorded).length
    ? "the run records no parts to compare (an older run)"
    : changed.length
      ? `changed: ${changed.join(", ")}`
      : `no ${"program" in recorded ? "program" : "tool"}, scorer, limit, system prompt or task changed in its own text (a comment, or a helper they call, may have)`;
  const shas = `sha256 ${now.slice(0, 12)} now, ${source.sha256.slice(0, 12)} in the run`;
  if (!opts.accept) {
    throw new UserError(
      `agent ${command}: ${displayPath(tasksPath)} changed since run ${run.runId} trained on it (${shas}; ${what}): ` +
        (command === "resume"
          ? "restore the file the run used, or pass --accept-changed-task to go on with this one (recorded)"
          : "restore the file the run used"),
    );
  }
  console.log(`agent ${command}: going on with the changed ${displayPath(tasksPath)} (${shas}; ${what}): recorded in ${AGENT_TASK_CHANGES}`);
  if (opts.evalsDir) {
    mkdirSync(runDir(opts.evalsDir, run.runId), { recursive: true });
    appendLine(
      join(runDir(opts.evalsDir, run.runId), AGENT_TASK_CHANGES),
      JSON.stringify({ date: new Date().toISOString(), command, path: tasksPath, from: source.sha256, to: now, changed }),
    );
  }
}

/** runs/<run_id>/agent-task-changes.jsonl: each time a run went on with a changed agent task file. */
export const AGENT_TASK_CHANGES = "agent-task-changes.jsonl";

/** targetForRun for several runs (agent compare): they must share the task file and the base. */
export async function targetForRuns(client: SidecarClient, command: string, runIds: string[], target: EvalTarget): Promise<EvalTarget> {
  const targets: EvalTarget[] = [];
  for (const runId of runIds) targets.push(await targetForRun(client, command, runId, target));
  for (const [i, t] of targets.entries()) {
    if (t.settings.baseModel !== targets[0].settings.baseModel) {
      throw new UserError(
        `agent ${command}: ${runIds[0]} was trained on ${baseName(targets[0].settings.baseModel)} and ${runIds[i]} on ${baseName(t.settings.baseModel)}: one Evaluate scores every adapter on one base`,
      );
    }
    if (t.tasksPath !== targets[0].tasksPath) {
      throw new UserError(
        `agent ${command}: ${runIds[0]} trained on ${displayPath(targets[0].tasksPath)} and ${runIds[i]} on ${displayPath(t.tasksPath)}: compare runs of one task file`,
      );
    }
  }
  return targets[0];
}

/** Throw a one-line UserError (exit 2) naming both files when `tasksPath` is not run `runId`'s task file. */
export async function checkRunTaskFile(client: SidecarClient, command: string, evalsDir: string, runId: string, tasksPath: string): Promise<void> {
  const run = await runWithRequest(client, evalsDir, runId);
  const source = run.request?.dataset?.source;
  const given = displayPath(tasksPath);
  const hint = "pass --tasks with the run's own task file";
  if (run.request?.agent) return; // an agent run: checkAgentTaskFile compares the file's sha256
  if (source?.case === "jsonlPath") {
    const own = resolve(runDataRoot(runId, evalsDir), source.value);
    if (!existsSync(own) || !existsSync(tasksPath) || sha256(own) === sha256(tasksPath)) return;
    throw new UserError(`agent ${command}: run ${runId} trained on ${displayPath(own)}, not ${given}: ${hint} (--tasks ${displayPath(own)})`);
  }
  if (source?.case === "inline" && source.value.rows.length > 0) {
    const prompts = new Set(loadTaskFile(tasksPath).rows.map((r) => r.prompt));
    if (source.value.rows.some((r) => prompts.has(r.prompt))) return;
    const other = evalTaskFile(evalsDir, runId);
    throw new UserError(
      `agent ${command}: run ${runId} trained on none of the rows of ${given}: its ${source.value.rows.length} inline train rows come from ${other ? `${other} (its eval.json's task file)` : "another task file"}; ${hint}`,
    );
  }
}
