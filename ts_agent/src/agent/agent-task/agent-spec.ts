/**
 * An agent task as the sidecar sees it: its rows (a task row with no answers: the scorers judge
 * the episode) and its AgentSpec (tools, scorers, limits, where this process serves them, and the
 * file they come from). Training (`agent train --agent-task`) and every eval of an agent task
 * (eval/agent-task-set.ts) build their requests here.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

import type { MessageInitShape } from "@bufbuild/protobuf";

import type { AgentSpecSchema, TaskRowSchema } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { AgentTaskRef } from "../core/eval-log.js";
import { primaryScorer, type AgentTask, type AgentTaskRow } from "./define.js";
import { DEFAULT_LIMITS } from "./tool-host.js";

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
    tools: Object.keys(task.tools),
    limits: { ...DEFAULT_LIMITS, ...task.limits },
  };
}

/** The AgentSpec of a task, its tools served at `address`, recording the file it came from. */
export function agentSpec(task: AgentTask, address: string, ref: AgentTaskRef): MessageInitShape<typeof AgentSpecSchema> {
  const limits = ref.limits;
  return {
    tools: Object.entries(task.tools).map(([name, t]) => ({ name, description: t.description, parametersJson: JSON.stringify(t.parameters) })),
    scorers: Object.entries(task.scorers).map(([name, s]) => ({ name, weight: s.weight ?? 1 })),
    maxTurns: limits.maxTurns, maxToolCalls: limits.maxToolCalls, toolTimeoutMs: limits.toolTimeoutMs,
    maxToolOutputChars: limits.maxToolOutputChars, toolHost: address, systemPrompt: task.systemPrompt ?? "",
    source: { name: ref.name, path: ref.path, sha256: ref.sha256 },
  };
}
