/**
 * Checkpoint selection on a validation split (`agent select`): the rule that picks a checkpoint
 * from its validation scores, which train-split rows a run did not train on (the validation rows),
 * and runs/<run_id>/selection.json, which the report's selection section reads.
 *
 * Rules (stated in the output and the report):
 * - "last-unless-better" (default): the last checkpoint, unless an earlier one beats it on the
 *   same validation tasks beyond its decision interval (compareScores: earlier - last, the
 *   interval excludes 0 and the difference is positive); among several such, the highest mean.
 * - "best": the highest validation mean (a tie goes to the later step).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

import type { TrainRequest } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { Accuracy } from "../core/eval-log.js";
import type { TaskRow } from "../core/task-format.js";
import { runDir } from "../workspace.js";
import { compareScores, type Decision } from "../core/base-vs-adapter.js";

export const SELECTION_FILE = "selection.json";
export const SELECTION_SCHEMA = "agent-select/v1";
export const RULES = ["last-unless-better", "best"] as const;
export type SelectionRule = (typeof RULES)[number];

export const RULE_TEXT: Record<SelectionRule, string> = {
  "last-unless-better": "the last checkpoint, unless an earlier one is better on validation beyond its 95% decision interval (paired, same tasks; among several, the highest mean)",
  best: "the checkpoint with the highest validation mean (a tie goes to the later step)",
};

/** One checkpoint on the validation split. */
export interface CurvePoint {
  step: number;
  /** primary grader's accuracy with its 95% CI */
  accuracy: Accuracy | null;
  /** this checkpoint - the last one, paired on the validation tasks (null for the last itself) */
  vsLast: { n: number; meanDiff: number | null; decision: Decision | null } | null;
  /** better than the last beyond the decision interval */
  betterThanLast: boolean;
}

export interface SelectionRecord {
  schema: typeof SELECTION_SCHEMA;
  runId: string;
  date: string;
  rule: SelectionRule;
  ruleText: string;
  validation: { taskSet: string; split: "train"; n: number; excluded: string; base: Accuracy | null };
  curve: CurvePoint[];
  chosenStep: number;
  why: string;
  test: {
    taskSet: string;
    n: number;
    base: Accuracy | null;
    chosen: Accuracy | null;
    meanDiff: number | null;
    decision: Decision | null;
  };
}

/** Pick a checkpoint by `rule` from per-step validation scores (pure). `scores` in step order. */
export function chooseCheckpoint(rule: SelectionRule, points: ReadonlyArray<{ step: number; scores: Map<string, number>; accuracy: Accuracy | null }>): { curve: CurvePoint[]; chosenStep: number; why: string } {
  if (points.length === 0) throw new Error("chooseCheckpoint: no checkpoints");
  const sorted = [...points].sort((a, b) => a.step - b.step);
  const last = sorted[sorted.length - 1];
  const curve: CurvePoint[] = sorted.map((p) => {
    if (p === last) return { step: p.step, accuracy: p.accuracy, vsLast: null, betterThanLast: false };
    const c = compareScores(last.scores, p.scores, { base: `step ${last.step}`, candidate: `step ${p.step}` });
    const better = !!(c.decision?.rejects && c.paired && c.paired.meanDiff > 0);
    return { step: p.step, accuracy: p.accuracy, vsLast: { n: c.n, meanDiff: c.paired?.meanDiff ?? null, decision: c.decision }, betterThanLast: better };
  });
  const mean = (p: CurvePoint) => p.accuracy?.estimate ?? -Infinity;
  const highest = (ps: CurvePoint[]) => ps.reduce((b, p) => (mean(p) >= mean(b) ? p : b));
  if (rule === "best") {
    const b = highest(curve);
    return { curve, chosenStep: b.step, why: `step ${b.step} has the highest validation mean` };
  }
  const better = curve.filter((p) => p.betterThanLast);
  if (better.length === 0) return { curve, chosenStep: last.step, why: `no earlier checkpoint is better than the last (step ${last.step}) beyond its decision interval` };
  const b = highest(better);
  return { curve, chosenStep: b.step, why: `step ${b.step} beats the last (step ${last.step}) on validation beyond its decision interval` };
}

/**
 * The prompts a run trained on, from its request and the task file's train rows as the agent sent
 * them: the dataset's rows (inline, or `jsonlRows` for a jsonl_path dataset: its split filter and
 * limit applied here), less the held-out tail when the held-out prompts come from the dataset (the
 * last held_out.num_prompts rows, default 32: never trained on).
 */
export function trainedPrompts(request: TrainRequest, jsonlRows: ReadonlyArray<{ prompt: string; split?: string }> | null): { trained: Set<string>; heldOut: number } {
  const ds = request.dataset;
  let rows: Array<{ prompt: string }>;
  if (ds?.source.case === "inline") rows = [...ds.source.value.rows];
  else if (ds?.source.case === "jsonlPath") {
    if (!jsonlRows) throw new Error("trainedPrompts: a jsonl_path dataset needs its rows");
    rows = ds.split ? jsonlRows.filter((r) => r.split === ds.split) : [...jsonlRows];
  } else rows = [];
  if (ds && ds.limit > 0) rows = rows.slice(0, ds.limit);
  const fromDataset = !request.heldOut?.dataset?.source.case;
  const k = fromDataset ? Math.min(rows.length, request.heldOut?.numPrompts ?? 32) : 0;
  return { trained: new Set(rows.slice(0, rows.length - k).map((r) => r.prompt)), heldOut: k };
}

/** The validation rows: train-split rows whose prompt the run did not train on (pure). */
export function validationRows(trainSplit: ReadonlyArray<TaskRow>, trained: ReadonlySet<string>): TaskRow[] {
  return trainSplit.filter((r) => !trained.has(r.prompt));
}

/** runs/<run_id>/selection.json, or null. */
export function readSelection(evalsDir: string, runId: string): SelectionRecord | null {
  const path = join(runDir(evalsDir, runId), SELECTION_FILE);
  if (!existsSync(path)) return null;
  const rec = JSON.parse(readFileSync(path, "utf8")) as SelectionRecord;
  return rec.schema === SELECTION_SCHEMA ? rec : null;
}
