/**
 * agent-evals/runs/<run_id>/eval.json: the eval log, in the manner of inspect_ai's EvalLog. One
 * file holds
 *   - the spec: run id, date, model (requested and resolved), task set (path, sha256, split, n),
 *     the settings (graders, samples per task, decoding, seed);
 *   - the samples: `tasks` (each evaluated task's split, label, slice, template and accepted
 *     answers) and
 *     `result`, the sidecar's EvaluateResult as proto JSON: every variant's completion and
 *     per-grader score per task and sample, for both splits, with the sidecar's metadata (the
 *     resolved base model, seconds);
 *   - the results, each under one name, computed once here from those samples: per-variant
 *     summaries (grading.ts), the eval's own base vs adapter comparison and per-slice rows
 *     (compare.ts), human agreement, and the same for the held-out-template split.
 * The milestone (verdict.ts) re-judges a log against the current baseline.json from its per-task
 * scores and templates, so a log can be judged again later without re-running the eval.
 *
 * It also records its `fingerprint` (eval/fingerprint.ts: everything that can change a score,
 * compared with baseline.json's) and the `adapter` it evaluated (run id, the sha256 of its
 * adapter_model.safetensors as the sidecar loaded it, the run's step), so the report can refuse
 * to pair it with a run whose adapter has changed since. Logs written before either existed
 * still read; the report says which check could not be made.
 *
 * Schema "agent-eval/v2". An "agent-eval/v1" file (older agents) still reads: it has no `tasks`
 * (so no template-clustered row against baseline.json) and its `result` holds the test split
 * only; the report says so.
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { toJson, type JsonValue } from "@bufbuild/protobuf";

import { EvaluateResultSchema, type EvaluateProgress, type EvaluateResult } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../../sidecar/client.js";
import { humanAgreement, type Agreement } from "../eval/agreement.js";
import { ADAPTER_VARIANT, evaluateRunSplits, type EvalSettings, type ModelRef } from "../eval/evaluate.js";
import { buildFingerprint, type Fingerprint } from "../eval/fingerprint.js";
import { regrade, scoresOf, summarizeVariant, type VariantSummary } from "../eval/grading.js";
import { heldOutTemplateSetFor, taskSetRef, type TaskSet, type TaskSetRef } from "../eval/task-set.js";
import type { Split } from "../eval/typologies.js";
import { runDir, writeFileAtomic } from "../workspace.js";
import { compareScores, sliceBreakdown, type Comparison, type SliceComparison } from "./compare.js";

/** The eval log's file name inside agent-evals/runs/<run_id>/. */
export const EVAL_FILE = "eval.json";
/** The schema this agent writes. */
export const EVAL_LOG_SCHEMA = "agent-eval/v2";

/** What the log keeps of each evaluated task besides its scores (the prompt is in the task file,
 *  named by its sha256). */
export interface LoggedTask {
  split: Split;
  /** the gold class of a closed-label task */
  label?: string;
  /** the task's value of the task set's slice field (taskSet.sliceField) */
  slice?: string;
  /** absent when the task set has no templates */
  template?: string;
  /** the answers the grader accepts (absent in logs written before it was kept) */
  answers?: string[];
}

/** The adapter an eval scored, as the sidecar loaded it (EvaluateResult.adapters). */
export interface EvaluatedAdapter {
  /** "" for an adapter given by path */
  runId: string;
  /** sha256 of adapter_model.safetensors as loaded ("" when unknown) */
  sha256: string;
  /** the run's steps_completed when its adapter was saved; null when unknown */
  step: number | null;
}

export interface EvalLog {
  /** "agent-eval/v1" for a file an older agent wrote (see the module docs) */
  schema: typeof EVAL_LOG_SCHEMA | "agent-eval/v1";
  // -- spec
  runId: string;
  /** ISO 8601 */
  date: string;
  model: ModelRef;
  taskSet: TaskSetRef;
  settings: EvalSettings;
  /** everything that can change a score (absent in logs written before it was kept) */
  fingerprint?: Fingerprint;
  /** the adapter evaluated (absent in logs written before it was kept, or without an adapter) */
  adapter?: EvaluatedAdapter;
  // -- samples
  /** task id -> split, label, slice, template, for every task of both splits (absent in v1) */
  tasks?: Record<string, LoggedTask>;
  /** the sidecar's EvaluateResult, proto JSON (NaN as "NaN"): every sample's completion and scores */
  result: JsonValue;
  /** scores compared in TS re-grading (all equal, or this file would not exist) */
  regradedScores: number;
  // -- results
  variants: VariantSummary[];
  /** the eval's own base vs the adapter (the milestone judges against baseline.json when it matches) */
  comparison: Comparison | null;
  humanAgreement: Agreement[];
  /** adapter vs base per slice on this split, Holm-adjusted across slices */
  bySlice?: SliceComparison[];
  /** the held-out-template split, evaluated in the same request (absent for older logs) */
  heldOutTemplate?: SplitResult | null;
}

/** One more split of the same eval: its own base vs adapter (no baseline.json for it). */
export interface SplitResult {
  taskSet: TaskSetRef;
  regradedScores: number;
  variants: VariantSummary[];
  comparison: Comparison | null;
  bySlice: SliceComparison[];
}

/** Re-grade and summarise one split of an Evaluate result (pure): the summaries, the eval's own
 *  base vs adapter with the template-clustered SE, and the per-slice rows. */
export function splitResult(settings: EvalSettings, taskSet: TaskSet, result: EvaluateResult): SplitResult {
  const regradedScores = regrade(result.variants, taskSet.rows, settings.graders);
  const variants = result.variants.map((v) => summarizeVariant(v, settings.graders));
  const base = variants.find((v) => v.name === "base");
  const cand = variants.find((v) => v.name === ADAPTER_VARIANT);
  const templates = taskSet.rows.every((r) => r.template !== undefined) ? new Map(taskSet.rows.map((r) => [r.id, r.template!])) : undefined;
  return {
    taskSet: taskSetRef(taskSet),
    regradedScores,
    variants,
    comparison: base && cand ? compareScores(scoresOf(base.perTask), scoresOf(cand.perTask), undefined, templates) : null,
    bySlice: base && cand ? sliceBreakdown(scoresOf(base.perTask), scoresOf(cand.perTask), taskSet.rows) : [],
  };
}

/** Both splits' results as one EvaluateResult (each variant's tasks: the test split's, then the
 *  held-out split's), as the sidecar returned them for the combined request. */
function mergedResult(main: EvaluateResult, heldOut: EvaluateResult | null): EvaluateResult {
  if (!heldOut) return main;
  return { ...main, variants: main.variants.map((v) => ({ ...v, tasks: [...v.tasks, ...(heldOut.variants.find((h) => h.name === v.name)?.tasks ?? [])] })) };
}

/**
 * Re-grade a finished Evaluate result and build the eval log (pure; no I/O). `heldOut` is the
 * held-out-template split of the same request, when there was one.
 */
export function buildEvalLog(
  runId: string,
  settings: EvalSettings,
  taskSet: TaskSet,
  result: EvaluateResult,
  date = new Date(),
  heldOut: { taskSet: TaskSet; result: EvaluateResult } | null = null,
): EvalLog {
  const main = splitResult(settings, taskSet, result);
  const held = heldOut ? splitResult(settings, heldOut.taskSet, heldOut.result) : null;
  const tasks: Record<string, LoggedTask> = {};
  for (const r of [...taskSet.rows, ...(heldOut?.taskSet.rows ?? [])]) tasks[r.id] = { split: r.split, label: r.label, slice: r.slice, template: r.template, answers: [...r.answers] };
  const model = { requested: settings.baseModel, resolved: result.baseModel };
  const adapter = result.adapters.find((a) => a.name === ADAPTER_VARIANT);
  return {
    schema: EVAL_LOG_SCHEMA,
    runId,
    date: date.toISOString(),
    model,
    taskSet: main.taskSet,
    settings,
    fingerprint: buildFingerprint({ settings, taskSet: main.taskSet, taskIds: taskSet.rows.map((r) => r.id), model, runtime: result.fingerprint ?? null }),
    ...(adapter ? { adapter: { runId: adapter.runId, sha256: adapter.sha256, step: adapter.step > 0n ? Number(adapter.step) : null } } : {}),
    tasks,
    result: toJson(EvaluateResultSchema, mergedResult(result, heldOut?.result ?? null)),
    regradedScores: main.regradedScores + (held?.regradedScores ?? 0),
    variants: main.variants,
    comparison: main.comparison,
    humanAgreement: humanAgreement(result.variants, taskSet.rows, taskSet.humanLabels),
    bySlice: main.bySlice,
    heldOutTemplate: held,
  };
}

/** Write runs/<run_id>/eval.json atomically; returns its path. */
export function writeEvalLog(evalsDir: string, log: EvalLog): string {
  const dir = runDir(evalsDir, log.runId);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, EVAL_FILE);
  writeFileAtomic(path, JSON.stringify(log, null, 2) + "\n");
  return path;
}

/** Read an eval log (v2, or v1 from an older agent); throws on a file that is neither. */
export function readEvalLog(path: string): EvalLog {
  const log = JSON.parse(readFileSync(path, "utf8")) as EvalLog;
  if (log.schema !== EVAL_LOG_SCHEMA && log.schema !== "agent-eval/v1") {
    throw new Error(`${path}: not an eval log (schema ${JSON.stringify(log.schema)}; this agent reads ${EVAL_LOG_SCHEMA} and agent-eval/v1)`);
  }
  return log;
}

/** The sentence a reader needs about a log an older agent wrote; "" for a current one. */
export function olderLogNote(log: EvalLog): string {
  if (log.schema === EVAL_LOG_SCHEMA) return "";
  return (
    `eval.json is from an older version of the agent (schema ${log.schema}, this agent writes ${EVAL_LOG_SCHEMA}): it has no per-task templates, ` +
    "so the comparison with baseline.json has no template-clustered row, and its samples cover the test split only; rerun `agent eval` to refresh it"
  );
}

/**
 * Evaluate base and the run's adapter on the task set, re-grade, and build the log. When the set
 * is the in-distribution "test" split, its held-out-template companion goes in the SAME Evaluate
 * request (one model load) and comes back as the log's `heldOutTemplate`.
 */
export async function evaluateRun(
  client: SidecarClient,
  runId: string,
  settings: EvalSettings,
  taskSet: TaskSet,
  onProgress?: (p: EvaluateProgress) => void,
  heldOut: TaskSet | null = heldOutTemplateSetFor(taskSet),
): Promise<EvalLog> {
  const got = await evaluateRunSplits(client, runId, settings, taskSet, heldOut, onProgress);
  return buildEvalLog(runId, settings, taskSet, got.main, new Date(), heldOut && got.heldOut ? { taskSet: heldOut, result: got.heldOut } : null);
}
