/**
 * What each variant of an eval answers, read from the eval log's samples (eval/answers.ts does the
 * counting): per split, every variant's answer distribution for any task set (open answers: each
 * distinct answer counted as given), and for a closed label set (the log's per-task gold label and
 * accepted answers) the confusion matrices. The attribution
 * table's constant-answer rows read `constantAnswers`; the answers section renders the rest.
 */
import { fromJson } from "@bufbuild/protobuf";

import { EvaluateResultSchema } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import {
  answerDistribution,
  answerReaderFor,
  confusionMatrices,
  labelSetOf,
  type AnswerDistribution,
  type AnswerReader,
  type ConfusionMatrices,
  type LabelSet,
  type LabelledTask,
} from "../eval/answers.js";
import { normalizeAnswer } from "../core/answer-text.js";
import { ADAPTER_VARIANT } from "../core/base-vs-adapter.js";
import type { EvalLog } from "../core/eval-log.js";

/** One split's answers. */
export interface SplitAnswers {
  split: string;
  tasks: number;
  distributions: AnswerDistribution[];
  /** gold label x answer; null for open answers (no closed label set) */
  confusion: ConfusionMatrices | null;
}

export interface AnswerAnalysis {
  /** the test split first, then the held-out-template split when the log has it */
  splits: SplitAnswers[];
  /** closed-label (a gold label on every task) or open-answer */
  closed: boolean;
  /** the primary grader, and whether it needs the answer tag (how the answers were read) */
  grader: string;
  needsTag: boolean;
}

/** What the constant-answer rows read: the test split's base and adapter distributions. */
export interface AnswerSignal {
  base: AnswerDistribution | null;
  adapter: AnswerDistribution | null;
}

export const NO_ANSWER_SIGNAL: AnswerSignal = { base: null, adapter: null };

/** Open answers (no closed label set): every answer any variant gave is its own "label", so the
 *  distributions count each distinct answer (normalised as the graders compare them). */
function openAnswerSet(completions: Iterable<string>, reader: AnswerReader): LabelSet {
  const labels: string[] = [];
  const byAnswer = new Map<string, string>();
  for (const c of completions) {
    const raw = reader.read(c);
    const key = raw === null ? "" : normalizeAnswer(raw);
    if (key && !byAnswer.has(key)) (byAnswer.set(key, key), labels.push(key));
  }
  return { labels, byAnswer };
}

/** The log's answers per split, for any task set: with a closed label set (every task's gold label,
 *  docs/tasks.md) the confusion matrices too; null for a log without per-task records or of an agent task. */
export function answerAnalysis(log: EvalLog | null): AnswerAnalysis | null {
  // an agent task's answers are episodes, read by its scorers: the episodes section shows them
  if (!log?.tasks || log.agentTask) return null;
  const tasks = log.tasks;
  const result = fromJson(EvaluateResultSchema, log.result);
  const closed =
    log.taskSet.labels !== null && Object.values(tasks).every((t) => t.label !== undefined)
      ? labelSetOf(Object.values(tasks).map((t) => ({ label: t.label, answers: t.answers ?? [] })))
      : null;
  const reader = answerReaderFor(log.settings.graders[0] ?? { name: "exact_match" });
  const set =
    closed ??
    openAnswerSet(
      result.variants.flatMap((v) => v.tasks.flatMap((t) => t.samples.map((x) => x.completion))),
      reader,
    );
  const splitNames = [log.taskSet.split, ...(log.heldOutTemplate ? [log.heldOutTemplate.taskSet.split] : [])];
  const splits: SplitAnswers[] = [];
  for (const split of splitNames) {
    const variants = result.variants.map((v) => ({
      name: v.name,
      tasks: v.tasks
        .filter((t) => tasks[t.taskId]?.split === split)
        .map((t): LabelledTask => ({ taskId: t.taskId, gold: tasks[t.taskId].label ?? "", completions: t.samples.map((s) => s.completion) })),
    }));
    const n = variants[0]?.tasks.length ?? 0;
    if (n === 0) continue;
    splits.push({
      split,
      tasks: n,
      distributions: variants.map((v) => answerDistribution(v.name, v.tasks, set, reader)),
      confusion: closed ? confusionMatrices(variants, closed, reader) : null,
    });
  }
  return splits.length ? { splits, closed: closed !== null, grader: reader.grader, needsTag: reader.needsTag } : null;
}

export function answerSignal(a: AnswerAnalysis | null): AnswerSignal {
  const first = a?.splits[0];
  if (!first) return NO_ANSWER_SIGNAL;
  return {
    base: first.distributions.find((d) => d.variant === "base") ?? null,
    adapter: first.distributions.find((d) => d.variant === ADAPTER_VARIANT) ?? null,
  };
}
