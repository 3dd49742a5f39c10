/**
 * baseline.json as `agent demo` and `agent sweep` begin (kept, or set when missing, never
 * replaced), and the one line every command prints for a baseline.
 */
import { baselinePath, readBaseline, setBaseline, type Baseline } from "../agent/eval/baseline-record.js";
import { progressPrinter, settingsForTaskSet } from "../agent/eval/evaluate.js";
import { loadEvalTaskSet } from "../agent/eval/agent-task-set.js";
import type { SidecarClient } from "../sidecar/client.js";
import type { EvalTarget } from "./eval-target.js";

/** `agent demo` and `agent sweep`, step 1: keep baseline.json, or set it when it is missing (never --force). */
export async function ensureBaseline(client: SidecarClient, target: EvalTarget, tag: string, t0: number): Promise<void> {
  const existing = readBaseline(target.evalsDir);
  if (existing) {
    console.log(`[${tag}] kept ${baselinePath(target.evalsDir)}: ${describeBaseline(existing)}`);
    return;
  }
  const taskSet = await loadEvalTaskSet(target.tasksPath, target.settings.split, target.settings.limit);
  console.log(`[${tag}] no baseline yet: evaluating the base model on ${taskSet.rows.length} ${taskSet.split} tasks`);
  const { path, baseline } = await setBaseline(client, {
    evalsDir: target.evalsDir,
    settings: settingsForTaskSet(target.settings, taskSet),
    taskSet,
    onProgress: progressPrinter("baseline"),
  });
  console.log(`[${tag}] wrote ${path}: ${describeBaseline(baseline)} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
}

/** One line: the baseline's model, task set, grader and accuracy. */
export function describeBaseline(b: Baseline): string {
  const a = b.accuracy;
  return (
    `baseline ${b.date}: model ${b.model.requested || "(embedded default)"} (${b.model.resolved}), ` +
    `${b.taskSet.n} ${b.taskSet.split} tasks of ${b.taskSet.path} (sha256 ${b.taskSet.sha256.slice(0, 12)}), ` +
    `${b.grader.name} ${a ? `${(a.estimate * 100).toFixed(1)}% (95% CI ${(a.lower * 100).toFixed(1)}-${(a.upper * 100).toFixed(1)}%, ${a.method})` : "-"}, seed ${b.seed}`
  );
}
