/**
 * Building the eval log (core/eval-log.ts holds its schema): re-grade a finished Evaluate result,
 * summarise each split, and (evaluateRun) run the Evaluate that produces it.
 */
import { toJson } from "@bufbuild/protobuf";

import { EvaluateResultSchema, type EvaluateProgress, type EvaluateResult } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../../sidecar/client.js";
import { ADAPTER_VARIANT } from "../core/base-vs-adapter.js";
import { EVAL_LOG_SCHEMA, type EvalLog, type EvalSettings, type LoggedTask, type SplitResult } from "../core/eval-log.js";
import { humanAgreement } from "./grader-agreement.js";
import { evaluateRunSplits, primaryGrader } from "./evaluate.js";
import { buildFingerprint } from "./fingerprint.js";
import { regrade, summarizeVariant } from "./grading.js";
import { heldOutTemplateSetFor, taskSetRef, type TaskSet } from "./task-set.js";

/** Re-grade and summarise one split of an Evaluate result (pure). Its base vs adapter is not
 *  computed here: verdict.ts compareSplits does that from the summaries' per-task scores. */
export function splitResult(settings: EvalSettings, taskSet: TaskSet, result: EvaluateResult): SplitResult {
  // an agent task's scores are its TS scorers' own (served by this process): nothing to re-grade
  const regradedScores = taskSet.agent ? 0 : regrade(result.variants, taskSet.rows, settings.graders);
  const variants = result.variants.map((v) => summarizeVariant(v, settings.graders));
  return { taskSet: taskSetRef(taskSet), regradedScores, variants };
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
  for (const r of [...taskSet.rows, ...(heldOut?.taskSet.rows ?? [])])
    tasks[r.id] = { split: r.split, label: r.label, slice: r.slice, template: r.template, answers: [...r.answers] };
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
    humanAgreement: humanAgreement(result.variants, taskSet.rows, taskSet.humanLabels, primaryGrader(settings)),
    heldOutTemplate: held,
    ...(taskSet.agent ? { agentTask: taskSet.agent.ref } : {}),
  };
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
  warmStart: { runId: string } | null = null,
): Promise<EvalLog> {
  const got = await evaluateRunSplits(client, runId, settings, taskSet, heldOut, onProgress, warmStart);
  return buildEvalLog(runId, settings, taskSet, got.main, new Date(), heldOut && got.heldOut ? { taskSet: heldOut, result: got.heldOut } : null);
}
