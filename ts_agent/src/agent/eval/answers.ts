/**
 * What a variant answers, for task sets with a closed label set (a `label` on every task): each task's
 * answer mapped to a label, each variant's answer distribution, the confusion matrix (gold label x
 * answer), and the degenerate case the report must see: a constant predictor, one label on at
 * least CONSTANT_ANSWER_SHARE of the tasks whatever the input. Accuracy alone cannot tell a model
 * that learned the mapping from one that learned the prior: a base answering money_mule on all
 * 264 tasks and an adapter answering shell_company on all 264 are both constant.
 *
 * The task is the unit: with K samples per task, a task's answer is its most frequent label over
 * its samples; a tie between the most frequent ones is TIE_ANSWER (never the label listed first,
 * which made a mixed predictor constant: two samples per task, one each of two labels, read as one
 * label on 100% of tasks). A variant whose tasks mostly have no <answer> tag is a format failure
 * (formatFailure), not a constant label: `constant` counts the labels only. A completion's label: the last <answer>...</answer>
 * (answer-text.ts extractAnswer), normalised (normalizeAnswer), matched against every label's accepted
 * answers as the task rows list them; no tag is NO_ANSWER, a tag naming no label OTHER_ANSWER.
 */
import { extractAnswer, normalizeAnswer } from "../core/answer-text.js";
import { buildReward, finalNumber, type RewardSpec } from "../core/task-rewards.js";

/** A task with no <answer> tag. */
export const NO_ANSWER = "(none)";
/** A task whose answer names no label of the set. */
export const OTHER_ANSWER = "(other)";
/** A task whose most frequent answers tie (e.g. one sample each of two labels). */
export const TIE_ANSWER = "(tie)";
/** One label on at least this share of tasks (fraction) is a constant answer. */
export const CONSTANT_ANSWER_SHARE = 0.9;
/** More than this share of tasks (fraction) with no <answer> tag is a format failure. */
export const FORMAT_FAILURE_SHARE = 0.5;

/**
 * How the primary grader reads a completion's answer: the report's answers are the ones the
 * grader reads. exact_match reads the last <answer> tag (no tag: no answer); with require_tag
 * false (exact_match_lenient) a completion without the tag is its own answer; final_number_match
 * reads the final number. `needsTag`: whether a missing tag is a format failure for this grader.
 */
export interface AnswerReader {
  read: (completion: string) => string | null;
  needsTag: boolean;
  /** the grader's name, for the words around the table */
  grader: string;
}

export const TAG_READER: AnswerReader = { read: (c) => extractAnswer(c), needsTag: true, grader: "exact_match" };

export function answerReaderFor(spec: RewardSpec): AnswerReader {
  const { name, params } = buildReward(spec);
  const tag = typeof params.tag === "string" ? params.tag : "answer";
  if (name === "final_number_match") return { read: (c) => finalNumber(c, tag), needsTag: false, grader: name };
  if (name === "exact_match" || name === "exact_match_lenient") {
    const requireTag = params.require_tag !== false;
    return { read: (c) => extractAnswer(c, tag) ?? (requireTag ? null : c.trim() === "" ? null : c), needsTag: requireTag, grader: name };
  }
  return { ...TAG_READER, grader: name };
}

/** The closed label set of a task set: each gold label and the answers that count as it. */
export interface LabelSet {
  /** in first-seen order of the rows */
  labels: string[];
  /** normalised accepted answer -> label */
  byAnswer: Map<string, string>;
}

/** One task of a variant: its gold label and every sampled completion. */
export interface LabelledTask {
  taskId: string;
  gold: string;
  completions: string[];
}

/**
 * The label set of rows that carry a gold label; null when fewer than 2 labels (an open-answer
 * task set: no distribution or confusion matrix to show). An accepted answer listed under two
 * labels stays with the first.
 */
export function labelSetOf(rows: ReadonlyArray<{ label?: string; answers: ReadonlyArray<string> }>): LabelSet | null {
  const labels: string[] = [];
  const byAnswer = new Map<string, string>();
  for (const r of rows) {
    if (!r.label) continue;
    if (!labels.includes(r.label)) labels.push(r.label);
    for (const a of [r.label, ...r.answers]) {
      const key = normalizeAnswer(a);
      if (key && !byAnswer.has(key)) byAnswer.set(key, r.label);
    }
  }
  return labels.length >= 2 ? { labels, byAnswer } : null;
}

/** The label a completion names: a label, NO_ANSWER or OTHER_ANSWER. */
export function answerLabel(completion: string, set: LabelSet, reader: AnswerReader = TAG_READER): string {
  const raw = reader.read(completion);
  if (raw === null) return NO_ANSWER;
  return set.byAnswer.get(normalizeAnswer(raw)) ?? OTHER_ANSWER;
}

/** The answer columns in order: the labels, then OTHER_ANSWER, NO_ANSWER and TIE_ANSWER. */
export function answerColumns(set: LabelSet): string[] {
  return [...set.labels, OTHER_ANSWER, NO_ANSWER, TIE_ANSWER];
}

/** A task's answer over its samples: the most frequent label; TIE_ANSWER when several share the
 *  highest count; NO_ANSWER without samples. */
export function taskAnswer(completions: ReadonlyArray<string>, set: LabelSet, reader: AnswerReader = TAG_READER): string {
  const columns = answerColumns(set);
  const counts = new Map<string, number>();
  for (const c of completions) {
    const l = answerLabel(c, set, reader);
    counts.set(l, (counts.get(l) ?? 0) + 1);
  }
  let best = NO_ANSWER;
  let bestCount = 0;
  let tied = false;
  for (const col of columns) {
    const n = counts.get(col) ?? 0;
    if (n > bestCount) [best, bestCount, tied] = [col, n, false];
    else if (n > 0 && n === bestCount) tied = true;
  }
  return tied ? TIE_ANSWER : best;
}

export interface AnswerShare {
  label: string;
  count: number;
  /** count / tasks, fraction */
  share: number;
}

/** One variant's answers over its tasks. */
export interface AnswerDistribution {
  variant: string;
  tasks: number;
  /** every answer column with at least one task, most frequent first (ties in column order) */
  shares: AnswerShare[];
  /** the most frequent answer column (a label, OTHER_ANSWER, NO_ANSWER or TIE_ANSWER) */
  top: AnswerShare;
  /** the most frequent label (labels only); null when no task's answer is a label */
  topLabel: AnswerShare | null;
  /** distinct answers given */
  distinct: number;
  /** topLabel.share >= CONSTANT_ANSWER_SHARE: one label whatever the input */
  constant: boolean;
  /** share of tasks whose answer is NO_ANSWER (fraction) */
  noAnswerShare: number;
  /** whether the primary grader needs the answer tag (AnswerReader.needsTag) */
  needsTag: boolean;
  /** needsTag and noAnswerShare > FORMAT_FAILURE_SHARE: the answers mostly lack the answer format */
  formatFailure: boolean;
}

export function answerDistribution(variant: string, tasks: ReadonlyArray<LabelledTask>, set: LabelSet, reader: AnswerReader = TAG_READER): AnswerDistribution {
  const columns = answerColumns(set);
  const counts = new Map<string, number>(columns.map((c) => [c, 0]));
  for (const t of tasks) {
    const a = taskAnswer(t.completions, set, reader);
    counts.set(a, (counts.get(a) ?? 0) + 1);
  }
  const n = tasks.length;
  const shares = columns
    .map((label) => ({ label, count: counts.get(label) ?? 0, share: n ? (counts.get(label) ?? 0) / n : 0 }))
    .filter((s) => s.count > 0)
    .sort((a, b) => b.count - a.count || columns.indexOf(a.label) - columns.indexOf(b.label));
  const top = shares[0] ?? { label: NO_ANSWER, count: 0, share: 0 };
  const topLabel = shares.find((s) => set.labels.includes(s.label)) ?? null;
  const noAnswerShare = n ? (counts.get(NO_ANSWER) ?? 0) / n : 0;
  return {
    variant,
    tasks: n,
    shares,
    top,
    topLabel,
    distinct: shares.length,
    constant: n > 0 && topLabel !== null && topLabel.share >= CONSTANT_ANSWER_SHARE,
    noAnswerShare,
    needsTag: reader.needsTag,
    formatFailure: reader.needsTag && n > 0 && noAnswerShare > FORMAT_FAILURE_SHARE,
  };
}

/** Gold label x answer counts for several variants on the same tasks. */
export interface ConfusionMatrices {
  gold: string[];
  answers: string[];
  variants: Array<{ name: string; matrix: number[][] }>;
}

export function confusionMatrices(
  variants: ReadonlyArray<{ name: string; tasks: ReadonlyArray<LabelledTask> }>,
  set: LabelSet,
  reader: AnswerReader = TAG_READER,
): ConfusionMatrices {
  const answers = answerColumns(set);
  return {
    gold: [...set.labels],
    answers,
    variants: variants.map((v) => {
      const matrix = set.labels.map(() => answers.map(() => 0));
      for (const t of v.tasks) {
        const row = set.labels.indexOf(t.gold);
        if (row >= 0) matrix[row][answers.indexOf(taskAnswer(t.completions, set, reader))]++;
      }
      return { name: v.name, matrix };
    }),
  };
}
