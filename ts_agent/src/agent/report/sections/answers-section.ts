/** Answers: what each variant says: the answer distribution (the share of tasks per answer; open
 *  answers: each variant's most frequent ones), whether a variant is a constant predictor, and for
 *  closed label sets the confusion matrix (gold label x answer) as tables and as
 *  confusion-matrix.png (matplotlib, drawn by writeReport). */
import { CONSTANT_ANSWER_SHARE } from "../../eval/answers.js";
import type { ReportSection } from "../analysis.js";
import type { SplitAnswers } from "../answer-analysis.js";
import { table } from "../markdown.js";

export const CONFUSION_PNG = "confusion-matrix.png";
export const CONFUSION_SPEC = "confusion-matrix.json";

const pct0 = (x: number) => `${(x * 100).toFixed(0)}%`;
/** Open answers: the most frequent answers of each variant shown by name. */
const OPEN_TOP = 5;
const OTHERS = "(every other answer)";

function splitLines(s: SplitAnswers): string[] {
  const out: string[] = [`### ${s.split} (${s.tasks} tasks)`, ""];
  const names = s.distributions.map((d) => d.variant);
  // open answers: each variant's OPEN_TOP most frequent answers (the rest summed in one row)
  const open = s.confusion === null;
  const given = open
    ? [...new Set(s.distributions.flatMap((d) => d.shares.slice(0, OPEN_TOP).map((x) => x.label)))]
    : s.confusion!.answers.filter((l) => s.distributions.some((d) => d.shares.some((x) => x.label === l)));
  const rest = (d: (typeof s.distributions)[number]) => d.shares.filter((x) => !given.includes(x.label)).reduce((t, x) => t + x.count, 0);
  const labels = open && s.distributions.some((d) => rest(d) > 0) ? [...given, OTHERS] : given;
  out.push(
    table(
      ["answer", ...names],
      labels.map((l) => [
        l,
        ...s.distributions.map((d) => {
          if (l === OTHERS) return `${rest(d)} (${pct0(rest(d) / (d.tasks || 1))})`;
          const x = d.shares.find((y) => y.label === l);
          return x ? `${x.count} (${pct0(x.share)})` : "0";
        }),
      ]),
    ),
  );
  out.push("");
  for (const d of s.distributions) {
    out.push(
      `- ${d.variant}: ${d.distinct} distinct answer(s); most frequent ${d.top.label} on ${d.top.count}/${d.tasks} tasks (${pct0(d.top.share)})` +
        (d.constant ? ` — **a constant answer** (>= ${pct0(CONSTANT_ANSWER_SHARE)} of tasks whatever the input: it learned the prior, not the mapping)` : ""),
    );
  }
  out.push("");
  for (const v of s.confusion?.variants ?? []) {
    out.push(`Confusion matrix, ${v.name} (rows: gold label; columns: answer):`, "");
    out.push(
      table(
        ["gold \\ answer", ...s.confusion!.answers],
        v.matrix.map((row, i) => [s.confusion!.gold[i], ...row.map(String)]),
      ),
    );
    out.push("");
  }
  return out;
}

export const answers: ReportSection = (input, a) => {
  if (!a.answers) return [];
  const out: string[] = ["## Answers: what each variant says", ""];
  const read = a.answers.needsTag
    ? `the last <answer> tag, as the primary grader ${a.answers.grader} reads it; (none) = no tag`
    : `as the primary grader ${a.answers.grader} reads it: it needs no <answer> tag, so an answer without one is read as given${a.answers.grader === "final_number_match" ? " (its final number)" : ""}; (none) = nothing to read`;
  out.push(
    a.answers.closed
      ? "Accuracy cannot tell a model that learned the mapping from one that learned the prior: each task's answer (its most frequent label over its samples; " +
          `${read}) per variant, and where it lands against the gold label. A variant that gives one label on >= ${pct0(CONSTANT_ANSWER_SHARE)} of tasks is a constant predictor (the attribution table's constant-answer rows).`
      : `An open-answer task (no closed label set, so no confusion matrix): each task's answer (its most frequent answer over its samples; ${read}) per variant, normalised as the graders compare them. ` +
          `A variant that gives one answer on >= ${pct0(CONSTANT_ANSWER_SHARE)} of tasks is a constant predictor (the attribution table's constant-answer rows).`,
  );
  out.push("");
  if (a.answers.closed && a.answersPlotNote) out.push(`_${CONFUSION_PNG} not drawn: ${a.answersPlotNote}. The tables below hold the same counts._`, "");
  else if (a.answers.closed && input.files.includes(CONFUSION_PNG))
    out.push(`![confusion matrices, gold label x answer, ${a.answers.splits[0].split} split](${CONFUSION_PNG})`, "");
  for (const s of a.answers.splits) out.push(...splitLines(s));
  return out;
};
