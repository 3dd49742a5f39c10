/**
 * Grader agreement: Cohen's kappa between the strict grader (exact_match) and the lenient one
 * (exact_match_lenient) over a variant's tasks. Human labels: a task row may carry an optional
 * `human_label` (the label a human annotator assigned to the case). Then kappa(gold label,
 * human label) over those tasks says how trustworthy the gold labels are, and kappa(strict grader
 * vs gold, strict grader vs the human label) over their completions whether the grade depends on
 * whose label it is.
 */
import type { Agreement } from "../core/eval-log.js";
import { buildReward, type RewardSpec } from "../core/task-rewards.js";
import { LENIENT_GRADER, PRIMARY_GRADER, type VariantScores } from "./evaluate.js";
import { cohenKappa } from "../core/stats/index.js";
import type { TaskRow } from "../core/task-format.js";

function kappaOf(what: string, r1: Array<string | number>, r2: Array<string | number>): Agreement | null {
  if (r1.length === 0) return null;
  const plain = cohenKappa(r1, r2);
  let same = 0;
  for (let i = 0; i < r1.length; i++) if (r1[i] === r2[i]) same++;
  return {
    what,
    n: r1.length,
    observedAgreement: same / r1.length,
    kappa: plain.kappa,
    se: plain.se,
    note: plain.kappa === null ? "undefined: both raters put every item in one category" : "",
  };
}

/** Graders that grade the answer itself (format and stop graders grade something else). */
const ANSWER_GRADERS = ["exact_match", "exact_match_lenient", "final_number_match"];

/**
 * The grader the primary one is compared with: the lenient one, or, when the primary IS the
 * lenient one, the next answer grader the settings name; null when there is no second grader (a
 * grader is never compared with itself).
 */
export function secondGrader(primary: string, graders: ReadonlyArray<{ name: string }>): string | null {
  if (primary !== LENIENT_GRADER) return graders.some((g) => g.name === LENIENT_GRADER) ? LENIENT_GRADER : null;
  return graders.map((g) => g.name).find((n) => n !== primary && ANSWER_GRADERS.includes(n)) ?? null;
}

/**
 * Strict vs lenient grader on a variant, with the TASK as the unit: with one sample per task,
 * plain kappa over the tasks; with K > 1 samples, linearly weighted kappa over the per-task means
 * (ordinal categories 0, 1/K, ..., 1; only samples both graders scored), so the SE does not
 * count a task's K samples as independent items.
 */
export function graderAgreement(variant: VariantScores, strict = PRIMARY_GRADER, lenient = LENIENT_GRADER): Agreement | null {
  const k = Math.max(0, ...variant.tasks.map((t) => t.samples.length));
  const r1: number[] = [];
  const r2: number[] = [];
  for (const t of variant.tasks) {
    let s1 = 0;
    let s2 = 0;
    let n = 0;
    for (const s of t.samples) {
      const x = s.scores[strict];
      const y = s.scores[lenient];
      if (x === undefined || y === undefined || Number.isNaN(x) || Number.isNaN(y)) continue;
      s1 += x;
      s2 += y;
      n++;
    }
    if (n === 0) continue;
    if (k <= 1) {
      r1.push(s1);
      r2.push(s2);
    } else {
      // per-task means on the grid of K: a task with fewer scorable samples is rounded onto it
      r1.push(Math.round((s1 / n) * k) / k);
      r2.push(Math.round((s2 / n) * k) / k);
    }
  }
  const what = `${strict} vs ${lenient} (${variant.name})`;
  if (k <= 1) return kappaOf(what, r1, r2);
  if (r1.length === 0) return null;
  const categories = Array.from({ length: k + 1 }, (_, i) => i / k);
  const w = cohenKappa(r1, r2, { weights: "linear", categories });
  let same = 0;
  for (let i = 0; i < r1.length; i++) if (r1[i] === r2[i]) same++;
  return {
    what: `${what}, per-task means of ${k} samples, linear weights`,
    n: r1.length,
    observedAgreement: same / r1.length,
    kappa: w.kappa,
    se: w.se,
    note: w.kappa === null ? "undefined: both raters put every task in one category" : "",
  };
}

/**
 * Agreement with human labels (see the module docs): gold label vs human label per task, and
 * the strict grader against gold vs the same grader against the human label per completion.
 * Empty when no evaluated task has a human label.
 */
export function humanAgreement(
  variants: ReadonlyArray<VariantScores>,
  rows: ReadonlyArray<TaskRow>,
  humanLabels: ReadonlyMap<string, string>,
  strict: RewardSpec = { name: PRIMARY_GRADER },
): Agreement[] {
  const labelled = rows.filter((r) => humanLabels.has(r.id) && r.label !== undefined);
  if (labelled.length === 0) return [];
  const out: Agreement[] = [];
  const gold = kappaOf(
    "gold label vs human label (tasks)",
    labelled.map((r) => r.label!),
    labelled.map((r) => humanLabels.get(r.id)!),
  );
  if (gold) out.push(gold);
  const grader = buildReward(strict);
  const byId = new Map(labelled.map((r) => [r.id, r]));
  for (const v of variants) {
    const r1: number[] = [];
    const r2: number[] = [];
    for (const t of v.tasks) {
      const row = byId.get(t.taskId);
      if (!row) continue;
      for (const s of t.samples) {
        const vsGold = grader.score(s.completion, row.answers);
        const vsHuman = grader.score(s.completion, [humanLabels.get(row.id)!]);
        if (vsGold === null || vsHuman === null) continue;
        r1.push(vsGold);
        r2.push(vsHuman);
      }
    }
    const k = kappaOf(`${strict.name} vs gold vs ${strict.name} vs human label (${v.name})`, r1, r2);
    if (k) out.push(k);
  }
  return out;
}
