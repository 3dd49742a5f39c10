/** Checkpoint selection (`agent select`): the validation curve over checkpoints, the rule, the
 *  chosen step and its one test result; and, from test-evals.jsonl, a warning when the test split
 *  was looked at more than once for this run. */
import { testLooksWarning } from "../../eval/test-evals.js";
import { pp } from "../../verdict/milestone.js";
import type { ReportSection } from "../analysis.js";
import { table } from "../markdown.js";
import { SELECTION_SVG } from "../checkpoint-selection-curve.js";

const pct = (a: { estimate: number; lower: number; upper: number } | null) =>
  a ? `${(a.estimate * 100).toFixed(1)}% (95% CI ${(a.lower * 100).toFixed(1)}-${(a.upper * 100).toFixed(1)}%)` : "-";

/** "; Holm p 0.012" (the comparison's p adjusted over the k - 1 comparisons with the last); "" for a
 *  selection.json written before the correction. */
function holm(p: number | null | undefined): string {
  return p === null || p === undefined ? "" : `; Holm p ${p.toPrecision(2)}`;
}

export const selectionSection: ReportSection = (input) => {
  const sel = input.selection;
  const warning = testLooksWarning(input.testEvals ?? []);
  if (!sel && !warning) return [];
  const out = ["## Checkpoint selection", ""];
  if (warning) out.push(warning, "");
  if (!sel) return out;
  out.push(
    `\`agent select\` (${sel.date.slice(0, 10)}) scored ${sel.curve.length} checkpoint(s) on a validation split: ${sel.validation.n} train-split rows of ${sel.validation.taskSet} (${sel.validation.excluded}), never the test split.`,
    "",
    `Rule: **${sel.rule}**: ${sel.ruleText}.`,
    "",
  );
  const last = sel.curve[sel.curve.length - 1]?.step;
  out.push(
    table(
      ["step", "validation exact match", `step - last (step ${last})`, "95% decision interval", "better than last", ""],
      [
        ["0 (base)", pct(sel.validation.base), "-", "-", "-", ""],
        ...sel.curve.map((p) => [
          String(p.step),
          pct(p.accuracy),
          p.vsLast?.meanDiff === null || p.vsLast?.meanDiff === undefined ? "-" : pp(p.vsLast.meanDiff),
          p.vsLast?.decision ? `${pp(p.vsLast.decision.lower)} to ${pp(p.vsLast.decision.upper)} (${p.vsLast.decision.test}${holm(p.vsLast.pHolm)})` : "-",
          p.vsLast ? (p.betterThanLast ? "yes" : "no") : "-",
          p.step === sel.chosenStep ? "**chosen**" : "",
        ]),
      ],
    ),
  );
  const t = sel.test;
  if (input.files.includes(SELECTION_SVG)) out.push("", `![validation exact match per checkpoint, the chosen one in red](${SELECTION_SVG})`);
  out.push(
    "",
    `Chosen: **step ${sel.chosenStep}** (${sel.why}).`,
    "",
    `On test (${t.n} tasks of ${t.taskSet}): base ${pct(t.base)}, step ${sel.chosenStep} ${pct(t.chosen)}; difference ${t.meanDiff === null ? "-" : pp(t.meanDiff)}` +
      (t.decision ? ` (95% decision interval ${pp(t.decision.lower)} to ${pp(t.decision.upper)}, ${t.decision.test})` : "") +
      ".",
    "",
    "The test number is untouched by the choice: the checkpoint was chosen on validation only, and test was evaluated once, after selection.",
    "",
  );
  return out;
};
