/**
 * Grading an Evaluate result in TS: every (variant, task, sample, grader) score the sidecar sends
 * is recomputed with task-rewards.ts's registry and compared for exact equality (NaN == NaN: unscorable
 * on both sides). Any mismatch throws RegradeMismatchError listing the first few: Python and TS
 * must grade identically, or no number downstream means anything.
 *
 * Per-task score = mean over the task's samples of the primary grader (exact_match), a fraction
 * in [0, 1]; a task whose samples are all unscorable has no score (NaN here, null in JSON) and
 * drops out of any pairing. A variant's summary (accuracy with its CI, every grader's mean, the
 * strict-vs-lenient kappa, pass@k) is computed once, here, and stored in the eval log.
 */
import type { Accuracy, VariantSummary } from "../core/eval-log.js";
import { passAtK, standardError, studentTQuantile, wilsonInterval } from "../core/stats/index.js";
import { buildReward, type RewardSpec } from "../core/task-rewards.js";
import { graderAgreement, secondGrader } from "./grader-agreement.js";
import { type Agreement } from "../core/eval-log.js";
import { LENIENT_GRADER, PRIMARY_GRADER, type VariantScores } from "./evaluate.js";
import type { TaskRow } from "../core/task-format.js";

// ---------------------------------------------------------------------------------------------
// Re-grading

/** One score where TS and Python disagree. NaN means unscorable; undefined means missing. */
export interface RegradeMismatch {
  variant: string;
  taskId: string;
  sample: number;
  grader: string;
  python: number | undefined;
  ts: number;
  completion: string;
}

/** TS and Python graded differently: the eval cannot be trusted. */
export class RegradeMismatchError extends Error {
  constructor(
    readonly mismatches: RegradeMismatch[],
    readonly checked: number,
  ) {
    const shown = mismatches
      .slice(0, 5)
      .map(
        (m) =>
          `  ${m.variant} / ${m.taskId} / sample ${m.sample} / ${m.grader}: python ${String(m.python)}, ts ${m.ts}, ` +
          `completion ${JSON.stringify(m.completion.length > 120 ? `${m.completion.slice(0, 120)}...` : m.completion)}`,
      )
      .join("\n");
    super(`TS re-grading disagrees with the sidecar on ${mismatches.length} of ${checked} scores; first ${Math.min(5, mismatches.length)}:\n${shown}`);
    this.name = "RegradeMismatchError";
  }
}

function sameScore(python: number | undefined, ts: number): boolean {
  if (python === undefined) return false;
  return python === ts || (Number.isNaN(python) && Number.isNaN(ts));
}

/**
 * Recompute every grader's score for every (variant, task, sample) with task-rewards.ts and compare with
 * the sidecar's score exactly (NaN == NaN). Also checks that every variant covers exactly the
 * given tasks. Returns how many scores were compared; throws RegradeMismatchError on any mismatch
 * (Error for a missing or unknown task).
 */
export function regrade(
  variants: ReadonlyArray<VariantScores>,
  rows: ReadonlyArray<Pick<TaskRow, "id" | "answers">>,
  graders: ReadonlyArray<RewardSpec>,
): number {
  const answers = new Map(rows.map((r) => [r.id, r.answers]));
  const built = graders.map((g) => buildReward(g));
  const mismatches: RegradeMismatch[] = [];
  let checked = 0;
  for (const v of variants) {
    const seen = new Set<string>();
    for (const t of v.tasks) {
      const gold = answers.get(t.taskId);
      if (gold === undefined) throw new Error(`variant ${v.name}: task ${JSON.stringify(t.taskId)} was not in the request`);
      if (seen.has(t.taskId)) throw new Error(`variant ${v.name}: task ${t.taskId} appears twice`);
      seen.add(t.taskId);
      t.samples.forEach((s, i) => {
        for (const g of built) {
          const score = g.score(s.completion, gold);
          const ts = score === null ? NaN : score;
          const python = Object.prototype.hasOwnProperty.call(s.scores, g.name) ? s.scores[g.name] : undefined;
          checked++;
          if (!sameScore(python, ts)) {
            mismatches.push({ variant: v.name, taskId: t.taskId, sample: i, grader: g.name, python, ts, completion: s.completion });
          }
        }
      });
    }
    const missing = rows.filter((r) => !seen.has(r.id));
    if (missing.length > 0) {
      throw new Error(`variant ${v.name}: ${missing.length} task(s) without results, e.g. ${missing[0].id}`);
    }
  }
  if (mismatches.length > 0) throw new RegradeMismatchError(mismatches, checked);
  return checked;
}

// ---------------------------------------------------------------------------------------------
// Scores and accuracy

/** Per-task mean of `grader` over the task's scorable samples; NaN when none is scorable. */
export function perTaskScores(variant: VariantScores, grader = PRIMARY_GRADER): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of variant.tasks) {
    let sum = 0;
    let n = 0;
    for (const s of t.samples) {
      const x = s.scores[grader];
      if (x !== undefined && !Number.isNaN(x)) {
        sum += x;
        n++;
      }
    }
    out.set(t.taskId, n > 0 ? sum / n : NaN);
  }
  return out;
}

/** Accuracy over per-task scores (NaN entries skipped). Null when nothing is scorable. */
export function accuracy(scores: Iterable<number>): Accuracy | null {
  const xs = [...scores].filter((x) => !Number.isNaN(x));
  if (xs.length === 0) return null;
  const binary = xs.every((x) => x === 0 || x === 1);
  if (binary) {
    const successes = xs.filter((x) => x === 1).length;
    const w = wilsonInterval(successes, xs.length);
    return { n: xs.length, estimate: w.estimate, lower: w.lower, upper: w.upper, method: "wilson" };
  }
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  if (xs.length < 2) return { n: 1, estimate: m, lower: NaN, upper: NaN, method: "t" };
  const h = studentTQuantile(0.975, xs.length - 1) * standardError(xs);
  return { n: xs.length, estimate: m, lower: m - h, upper: m + h, method: "t" };
}

/**
 * Mean over tasks of the unbiased pass@k of the primary grader (a sample counts as correct when it
 * scores 1); each task uses its own scorable samples n >= k. Empty when every task has 1 sample.
 */
export function meanPassAtK(variant: VariantScores, grader = PRIMARY_GRADER): Array<{ k: number; estimate: number; tasks: number }> {
  const counts = variant.tasks.map((t) => {
    const xs = t.samples.map((s) => s.scores[grader]).filter((x) => x !== undefined && !Number.isNaN(x));
    return { n: xs.length, c: xs.filter((x) => x === 1).length };
  });
  const maxK = Math.max(0, ...counts.map((c) => c.n));
  if (maxK < 2) return [];
  const out: Array<{ k: number; estimate: number; tasks: number }> = [];
  for (const k of [1, maxK]) {
    const usable = counts.filter((c) => c.n >= k);
    if (usable.length === 0) continue;
    let sum = 0;
    for (const c of usable) sum += passAtK(c.n, c.c, k);
    out.push({ k, estimate: sum / usable.length, tasks: usable.length });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// A variant's summary

function nullIfNaN(x: number): number | null {
  return Number.isNaN(x) ? null : x;
}

/** A variant's summary; `graders[0]` is the primary grader (perTask, accuracy, pass@k, agreement). */
export function summarizeVariant(v: VariantScores, graders: ReadonlyArray<RewardSpec>): VariantSummary {
  const primary = graders.length > 0 ? graders[0].name : PRIMARY_GRADER;
  const perTask = perTaskScores(v, primary);
  const second = secondGrader(primary, graders.length > 0 ? graders : [{ name: LENIENT_GRADER }]);
  const meanScores: Record<string, number | null> = {};
  for (const g of graders) {
    const xs = [...perTaskScores(v, g.name).values()].filter((x) => !Number.isNaN(x));
    meanScores[g.name] = xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
  }
  const summary: VariantSummary = {
    name: v.name,
    perTask: Object.fromEntries([...perTask].map(([id, x]) => [id, nullIfNaN(x)])),
    accuracy: accuracy(perTask.values()),
    meanScores,
    graderAgreement: second === null ? null : graderAgreement(v, primary, second),
  };
  const pk = meanPassAtK(v, primary);
  if (pk.length > 0) summary.passAtK = pk;
  return summary;
}

/** Per-task scores back from a summary (null -> NaN). */
export function scoresOf(perTask: Record<string, number | null>): Map<string, number> {
  return new Map(Object.entries(perTask).map(([id, x]) => [id, x === null ? NaN : x]));
}
