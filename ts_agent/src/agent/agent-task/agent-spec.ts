/**
 * An agent task as the sidecar sees it: its rows (a task row with no answers: the scorers judge
 * the episode) and its AgentSpec (tools, scorers, limits, where this process serves them, and the
 * file they come from). Training (`agent train --agent-task`) and every eval of an agent task
 * (eval/agent-task-set.ts) build their requests here. An agent program's AgentSpec has `program`
 * and no tools (the program sends its own with each request to the sidecar's endpoint).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

import type { MessageInitShape } from "@bufbuild/protobuf";

import type { AgentSpecSchema, TaskRowSchema } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { AgentTaskRef } from "../core/eval-log.js";
import { isAgentProgram, primaryScorer, type AgentTask, type AgentTaskRow } from "./define.js";
import { DEFAULT_LIMITS, DEFAULT_ROLLOUT_TIMEOUT_MS } from "./tool-host.js";

/** The task's rows of one split (a row without `split` is a train row). */
export function rowsOf(task: AgentTask, split: "train" | "test"): AgentTaskRow[] {
  return task.tasks.filter((r) => (r.split ?? "train") === split);
}

export function taskRows(rows: AgentTaskRow[]): Array<MessageInitShape<typeof TaskRowSchema>> {
  return rows.map((r) => ({ id: r.id, prompt: r.prompt, answers: typeof r.answer === "string" ? [r.answer] : [] }));
}

/** sha256 (hex) of a file's bytes. */
export function fileSha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

const sha = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

/** A task's limits with the defaults filled: an agent program's also with its rollout timeout. */
export function limitsOf(task: AgentTask): AgentTaskRef["limits"] {
  return { ...DEFAULT_LIMITS, ...(isAgentProgram(task) ? { rolloutTimeoutMs: DEFAULT_ROLLOUT_TIMEOUT_MS } : {}), ...task.limits };
}

/**
 * sha256 of each part of a task: "tools.<name>" (description, JSON schema, run's source),
 * "scorers.<name>" (weight, score's source), "limits" (with the defaults filled), "system_prompt",
 * "tasks" (every row), and for an agent program "program" (run's source). A changed file is compared with a run's by these (changedParts), so a
 * refusal names what changed. A function's source is its own text: a helper it calls is not in it.
 */
export function agentTaskParts(task: AgentTask): Record<string, string> {
  const parts: Record<string, string> = {};
  for (const [name, t] of Object.entries(task.tools ?? {})) parts[`tools.${name}`] = sha(JSON.stringify([t.description, t.parameters, String(t.run)]));
  for (const [name, s] of Object.entries(task.scorers)) parts[`scorers.${name}`] = sha(JSON.stringify([s.weight ?? 1, String(s.score)]));
  if (task.run) parts.program = sha(String(task.run));
  parts.limits = sha(JSON.stringify(limitsOf(task)));
  parts.system_prompt = sha(task.systemPrompt ?? "");
  parts.tasks = sha(JSON.stringify(task.tasks));
  return parts;
}

/** The parts that differ between a run's record and a task as it is now: changed, added, removed. */
export function changedParts(recorded: Record<string, string>, now: Record<string, string>): string[] {
  const names = [...new Set([...Object.keys(recorded), ...Object.keys(now)])].sort();
  return names.flatMap((n) => (recorded[n] === now[n] ? [] : [recorded[n] === undefined ? `${n} (added)` : now[n] === undefined ? `${n} (removed)` : n]));
}

/** What a run and an eval log record of the agent task: its name, file and sha256, scorers (the
 *  primary first), tools and limits. */
export function agentTaskRef(task: AgentTask, file: string): AgentTaskRef {
  const primary = primaryScorer(task);
  const names = [primary, ...Object.keys(task.scorers).filter((n) => n !== primary)];
  return {
    name: task.name,
    path: resolve(file),
    sha256: fileSha256(file),
    scorers: names.map((name) => ({ name, weight: task.scorers[name].weight ?? 1 })),
    tools: Object.keys(task.tools ?? {}),
    limits: limitsOf(task),
    parts: agentTaskParts(task),
  };
}

/** The AgentSpec of a task, its tools (or its program's rollouts) served at `address`, recording the
 *  file it came from. An agent program's spec carries no tools and no tool limits (it runs its own). */
export function agentSpec(task: AgentTask, address: string, ref: AgentTaskRef): MessageInitShape<typeof AgentSpecSchema> {
  const limits = ref.limits;
  const program = isAgentProgram(task);
  return {
    tools: Object.entries(task.tools ?? {}).map(([name, t]) => ({ name, description: t.description, parametersJson: JSON.stringify(t.parameters) })),
    scorers: Object.entries(task.scorers).map(([name, s]) => ({ name, weight: s.weight ?? 1 })),
    maxTurns: limits.maxTurns,
    ...(program
      ? { program: { timeoutMs: limits.rolloutTimeoutMs ?? DEFAULT_ROLLOUT_TIMEOUT_MS } }
      : { maxToolCalls: limits.maxToolCalls, toolTimeoutMs: limits.toolTimeoutMs, maxToolOutputChars: limits.maxToolOutputChars }),
    toolHost: address,
    systemPrompt: task.systemPrompt ?? "",
    source: { name: ref.name, path: ref.path, sha256: ref.sha256, parts: ref.parts ?? {} },
  };
}
