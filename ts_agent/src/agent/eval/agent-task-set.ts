/**
 * An agent task file as a task set (docs/architecture.md, "one eval pipeline"): its rows of one
 * split are task rows (id, prompt; no answers: the scorers judge the whole episode), its scorers
 * are the eval's graders (the primary one first, the one the verdict judges), and its identity is
 * the file's sha256, as for a JSONL task file. Everything downstream (Evaluate, the eval log, the
 * fingerprint, baseline.json, the verdict, report.md, JUnit) is the code every eval uses; only the
 * Evaluate request differs (it carries the AgentSpec, and this process serves the tools and
 * scorers while it runs: evaluate.ts runEvaluate).
 */
import type { EvalSettings } from "../core/eval-log.js";
import { HELDOUT_TEMPLATE_SPLIT, type Split } from "../core/task-format.js";
import { UserError, displayPath } from "../workspace.js";
import { agentTaskRef, rowsOf } from "../agent-task/agent-spec.js";
import { loadAgentTask } from "../agent-task/define.js";
import { loadTaskSet, type TaskSet } from "./task-set.js";

/** A per-turn token budget for an agent task's episodes when evaluated (the settings' maxNewTokens
 *  bounds one model turn of an episode; training's max_completion_length bounds the whole). */
export const AGENT_MAX_NEW_TOKENS = 64;

/** An agent task file (defineAgentTask in a .ts/.mts/.js/.mjs module), not a JSONL task file. */
export function isAgentTaskFile(path: string): boolean {
  return /\.(c|m)?[tj]s$/.test(path);
}

/** Load one split of an agent task file as a task set (the "test" split for an eval). */
export async function loadAgentTaskSet(path: string, split: Split, limit = 0): Promise<TaskSet> {
  const task = await loadAgentTask(path);
  if (split !== "train" && split !== "test") {
    throw new UserError(
      `${path}: an agent task has "train" and "test" rows, not ${JSON.stringify(split)}${split === HELDOUT_TEMPLATE_SPLIT ? " (no templates)" : ""}`,
    );
  }
  let rows = rowsOf(task, split);
  if (limit > 0) rows = rows.slice(0, limit);
  if (rows.length === 0) throw new UserError(`${path}: tasks: no rows with split "${split}"${split === "train" ? " (the default split)" : ""}`);
  const ref = agentTaskRef(task, path);
  return {
    path: displayPath(path),
    sha256: ref.sha256,
    split,
    limit,
    rows: rows.map((r) => ({ id: r.id, split, prompt: r.prompt, answers: typeof r.answer === "string" ? [r.answer] : [] })),
    humanLabels: new Map(),
    format: { labelField: "label", labels: null, sliceField: "slice", hasSlices: false, hasTemplates: false, splits: ["train", "test"] },
    agent: { task, ref },
  };
}

/** A task set from either kind of file: an agent task module or a JSONL task file. */
export async function loadEvalTaskSet(path: string, split: Split, limit = 0): Promise<TaskSet> {
  return isAgentTaskFile(path) ? loadAgentTaskSet(path, split, limit) : loadTaskSet(path, split, limit);
}

/** An agent task's eval settings: its scorers are the graders (the primary first) and a model
 *  turn gets AGENT_MAX_NEW_TOKENS. */
export function agentEvalSettings(settings: EvalSettings, taskSet: Pick<TaskSet, "agent">): EvalSettings {
  if (!taskSet.agent) return settings;
  return { ...settings, graders: taskSet.agent.ref.scorers.map((s) => ({ name: s.name, weight: s.weight })), maxNewTokens: AGENT_MAX_NEW_TOKENS };
}
