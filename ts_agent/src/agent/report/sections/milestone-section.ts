/** The milestone verdict: each criterion with its threshold, verdict and numbers, the baseline's
 *  state, the headline, and how to read it (rules: docs/verdict.md). */
import {
  DOWNSTREAM_MIN_DELTA_PP,
  MIN_HELDOUT_PROMPTS,
  MIN_MILESTONE_TASKS,
  REWARD_MIN_RELATIVE_CHANGE,
  pct,
  reasonAfterLabel,
} from "../../verdict/milestone.js";
import type { ReportSection } from "../analysis.js";
import { table } from "../markdown.js";
import { POWER_CSV, POWER_SVG } from "../power-curve.js";

export const milestone: ReportSection = (input, a) => {
  const m = a.milestone;
  const out: string[] = ["## Milestone verdict", ""];
  out.push(
    table(
      ["criterion", "threshold", "verdict", "numbers"],
      [
        [
          "held-out reward, end vs step 0",
          `PASS: >= ${pct(REWARD_MIN_RELATIVE_CHANGE, 0)} and CI lower > 0; CONFIRMED: CI lower >= ${pct(REWARD_MIN_RELATIVE_CHANGE, 0)}; >= ${MIN_HELDOUT_PROMPTS} prompts`,
          m.reward.verdict,
          m.reward.reason,
        ],
        [
          "downstream accuracy, adapter - base",
          `PASS: >= +${DOWNSTREAM_MIN_DELTA_PP} pp and the governing test rejects 0; CONFIRMED: CI lower >= +${DOWNSTREAM_MIN_DELTA_PP} pp; n >= ${MIN_MILESTONE_TASKS}`,
          m.downstream.verdict,
          m.downstream.reason,
        ],
        a.baselineMatch.status === "own"
          ? ["baseline", "the run's own", "OWN", a.baselineMatch.text]
          : [
              "baseline.json",
              "present and matching",
              a.baselineMatch.status === "match" ? "OK" : "GATED",
              (a.baselineMatch.status === "mismatch" ? a.baselineMatch.reasons.join("; ") : a.baselineMatch.status) +
                (input.baseline ? `; ${input.runsJudged.length} run(s) judged on it` : "") +
                (input.baseline?.replaced
                  ? `; it REPLACED the baseline of ${input.baseline.replaced.previousDate} (${input.baseline.replaced.runsJudgedOnPrevious} run(s) had been judged on that one): "${input.baseline.replaced.reason}"`
                  : ""),
            ],
      ],
    ),
  );
  out.push("");
  out.push(`**${a.label}**: ${reasonAfterLabel(m)}`);
  out.push("");
  const dec = a.comparison?.decision;
  const docs = input.docsDir ?? "docs";
  out.push(
    `How to read it: CONFIRMED means the interval's lower bound clears the threshold itself; PASS is a point-estimate gate ` +
      `(the estimate clears the threshold and the interval excludes 0), so a model whose true effect equals the threshold passes about half the time at large n. ` +
      (dec ? `The downstream test that governs "excludes 0" is the ${dec.test} (interval: ${dec.method}). ` : "") +
      `The rules, which test governs and the levels: [docs/verdict.md](${docs}/verdict.md). ` +
      (a.power ? `Power curve (P(PASS) against the true delta, for several n): ![P(PASS) vs true delta](${POWER_SVG}) (data: \`${POWER_CSV}\`).` : ""),
  );
  out.push("");
  return out;
};
