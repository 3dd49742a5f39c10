/**
 * Checkpoint selection on a validation split (`agent select`): the rule that picks a checkpoint
 * from its validation scores, which train-split rows a run did not train on (the validation rows),
 * and runs/<run_id>/selection.json, which the report's selection section reads.
 *
 * Rules (stated in the output and the report):
 * - "last-unless-better" (default): the last checkpoint, unless an earlier one beats it on the
 *   same validation tasks (compareScores: earlier - last, the difference positive and the
 *   governing test's p, Holm-adjusted over the k - 1 comparisons with the last, below .05: the
 *   family-wise error of switching to an earlier checkpoint that is not better stays at 5%; without
 *   the correction 10 equal checkpoints switched 15% of the time); among several such, the highest
 *   mean.
 * - "best": the highest validation mean (a tie goes to the later step).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

import type { TrainRequest } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { Accuracy } from "../core/eval-log.js";
import type { TaskRow } from "../core/task-format.js";
import { runDir } from "../workspace.js";
import { DECISION_ALPHA, compareScores, type Decision } from "../core/base-vs-adapter.js";
import { holmAdjust } from "../core/stats/index.js";

export const SELECTION_FILE = "selection.json";
export const SELECTION_SCHEMA = "agent-select/v1";
export const RULES = ["last-unless-better", "best"] as const;
export type SelectionRule = (typeof RULES)[number];

export const RULE_TEXT: Record<SelectionRule, string> = {
  "last-unless-better":
    "the last checkpoint, unless an earlier one is better on validation by its governing test with Holm's adjustment over the k - 1 comparisons with the last (family-wise 5%; paired, same tasks; among several, the highest mean)",
  best: "the checkpoint with the highest validation mean (a tie goes to the later step)",
};

/** One checkpoint on the validation split. */
export interface CurvePoint {
  step: number;
  /** primary grader's accuracy with its 95% CI */
  accuracy: Accuracy | null;
  /** this checkpoint - the last one, paired on the validation tasks (null for the last itself) */
  vsLast: {
    n: number;
    meanDiff: number | null;
    decision: Decision | null;
    /** the decision's p, Holm-adjusted over the k - 1 comparisons with the last (an undefined p
     *  counts as 1); null when there is no decision */
    pHolm: number | null;
  } | null;
  /** better than the last: a positive difference with pHolm < .05 */
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
export function chooseCheckpoint(
  rule: SelectionRule,
  points: ReadonlyArray<{ step: number; scores: Map<string, number>; accuracy: Accuracy | null }>,
): { curve: CurvePoint[]; chosenStep: number; why: string } {
  if (points.length === 0) throw new Error("chooseCheckpoint: no checkpoints");
  const sorted = [...points].sort((a, b) => a.step - b.step);
  const last = sorted[sorted.length - 1];
  const earlier = sorted
    .slice(0, -1)
    .map((p) => ({ p, c: compareScores(last.scores, p.scores, { base: `step ${last.step}`, candidate: `step ${p.step}` }, undefined, { bootstrap: false }) }));
  // one family: the k - 1 comparisons with the last, Holm-adjusted (an undefined p is 1)
  const adjusted = earlier.length ? holmAdjust(earlier.map(({ c }) => c.decision?.p ?? 1)) : [];
  const curve: CurvePoint[] = earlier.map(({ p, c }, i) => {
    const pHolm = c.decision ? adjusted[i] : null;
    const better = !!(c.paired && c.paired.meanDiff > 0 && pHolm !== null && pHolm < DECISION_ALPHA);
    return {
      step: p.step,
      accuracy: p.accuracy,
      vsLast: { n: c.n, meanDiff: c.paired?.meanDiff ?? null, decision: c.decision, pHolm },
      betterThanLast: better,
    };
  });
  curve.push({ step: last.step, accuracy: last.accuracy, vsLast: null, betterThanLast: false });
  const mean = (p: CurvePoint) => p.accuracy?.estimate ?? -Infinity;
  const highest = (ps: CurvePoint[]) => ps.reduce((b, p) => (mean(p) >= mean(b) ? p : b));
  if (rule === "best") {
    const b = highest(curve);
    return { curve, chosenStep: b.step, why: `step ${b.step} has the highest validation mean` };
  }
  const better = curve.filter((p) => p.betterThanLast);
  const family = `Holm-adjusted over ${earlier.length} comparison${earlier.length === 1 ? "" : "s"} with the last`;
  if (better.length === 0)
    return { curve, chosenStep: last.step, why: `no earlier checkpoint is better than the last (step ${last.step}) by its governing test, ${family}` };
  const b = highest(better);
  return {
    curve,
    chosenStep: b.step,
    why: `step ${b.step} beats the last (step ${last.step}) on validation by its governing test (p ${b.vsLast!.pHolm!.toPrecision(2)}, ${family})`,
  };
}

/**
 * The prompts a run trained on, from its request and the task file's train rows as the agent sent
 * them: the dataset's rows (inline, or `jsonlRows` for a jsonl_path dataset: its split filter and
 * limit applied here), less the held-out tail when the held-out prompts come from the dataset (the
 * last held_out.num_prompts rows, default 32: never trained on).
 */
export function trainedPrompts(
  request: TrainRequest,
  jsonlRows: ReadonlyArray<{ prompt: string; split?: string }> | null,
): { trained: Set<string>; heldOut: number } {
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
