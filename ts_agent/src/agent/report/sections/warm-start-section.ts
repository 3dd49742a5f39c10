/**
 * report.md's "Warm start, then RL" section (verdict/warm-start.ts): base, warm start and warm
 * start + GRPO side by side on the same test tasks, and the two paired comparisons (what the warm
 * start gave, what RL added) with their decision intervals, governing tests and Holm-adjusted p.
 * Nothing for a run that did not start from a warm start.
 */
import { decisionInterval } from "../../verdict/verdict.js";
import { DOWNSTREAM_MIN_DELTA_PP, MIN_MILESTONE_TASKS, pp } from "../../verdict/milestone.js";
import { warmStartStages } from "../../verdict/warm-start.js";
import type { ReportSection } from "../analysis.js";
import { pct1, table } from "../markdown.js";

/** How the eval decoded: greedy, or K episodes a task sampled at T. */
function decoding(settings: { samplesPerTask: number; temperature: number }): string {
  if (settings.temperature === 0) return "greedy";
  const k = settings.samplesPerTask;
  return `${k === 1 ? "one episode" : `${k} episodes`} each sampled at temperature ${settings.temperature}`;
}

export const warmStart: ReportSection = (input) => {
  const log = input.evalLog;
  const stages = warmStartStages(log);
  if (!log || !stages) return [];
  const acc = (name: string) => {
    const a = log.variants.find((v) => v.name === name)?.accuracy;
    return a ? `${pct1(a.estimate)} (95% CI ${pct1(a.lower)}-${pct1(a.upper)})` : "-";
  };
  const p = (x: number | null | undefined) => (x === null || x === undefined ? "-" : x.toPrecision(2));
  return [
    "## Warm start, then RL",
    "",
    `The run started from a warm-started adapter; the eval scored the base, the warm start alone and warm start + GRPO on the same ${log.taskSet.n} test tasks, ${decoding(log.settings)} ` +
      `(\`${log.settings.graders[0]?.name}\`, the task as the unit). Each step is a paired comparison (its decision interval and governing test, as the milestone's); ` +
      "the two p-values are Holm-adjusted together, and each step's verdict is the milestone's downstream rule (CONFIRMED: the interval's lower bound clears " +
      `+${DOWNSTREAM_MIN_DELTA_PP} pp and the governing test rejects 0 at its Holm-adjusted p; at least ${MIN_MILESTONE_TASKS} test tasks).`,
    "",
    ...stages.map((s) => `- ${s.question}: **${s.verdict.verdict}** (${s.verdict.reason})`),
    "",
    table(
      ["variant", "success"],
      [
        ["base", acc("base")],
        ["warm start", acc("warm-start")],
        ["warm start + GRPO", acc("adapter")],
      ],
    ),
    "",
    table(
      ["question", "from -> to", "delta", "95% interval", "governing test", "p", "p (Holm, 2)", "verdict"],
      stages.map((s) => {
        const d = s.comparison.decision;
        return [
          s.question,
          `${s.from} -> ${s.to}`,
          s.comparison.paired ? pp(s.comparison.paired.meanDiff) : "-",
          d ? `${decisionInterval(d)} (${d.method})` : "-",
          d?.test ?? "-",
          p(d?.p),
          p(s.pHolm),
          s.verdict.verdict,
        ];
      }),
    ),
    "",
  ];
};
