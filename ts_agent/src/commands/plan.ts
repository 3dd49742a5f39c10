/**
 * `agent plan`: before training, can the test split detect the milestone's +5 pp at all? From
 * baseline.json's per-task scores (the base model's accuracy p) and the task file's split sizes,
 * the required n and the minimum detectable effect (alpha .05 two-sided, power .8) and
 * P(PASS | true delta = +5 pp) at the available n. No sidecar needed.
 *
 * What is deliberate: the sd of the per-task differences is unknown before an adapter exists, so
 * the plan brackets it with two models of how the errors overlap (stats.plannedPairedSd):
 * "conversions" (the adapter only fixes base errors: the smallest sd, optimistic) and
 * "independent" (the two are right independently: pessimistic, since two models of one task
 * usually err together). The truth usually lies between; a split is called able to detect +5 pp
 * only when it is under both.
 */
import { parseArgs } from "node:util";

import { baselinePath, readBaseline } from "../agent/eval/baseline.js";
import { loadTasks, splitTasks } from "../agent/eval/tasks.js";
import type { Split } from "../agent/eval/typologies.js";
import { DOWNSTREAM_MIN_DELTA, DOWNSTREAM_MIN_DELTA_PP, MIN_MILESTONE_TASKS } from "../agent/verdict/milestone.js";
import { minimumDetectableEffect, operatingCharacteristic, plannedPairedSd, requiredNForDelta } from "../agent/eval/stats.js";
import { EVAL_FLAGS, GLOBAL_FLAGS, evalTargetFromFlags, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "before training: required n and MDE for the milestone's +5 pp at the available test size",
  usage: "agent plan [--tasks PATH] [--evals-dir DIR] [--base-accuracy P]",
  flags: [
    ["--tasks PATH", "task file (default agent-evals/tasks/aml_typology.jsonl)"],
    ["--evals-dir DIR", "where baseline.json lives (default agent-evals/)"],
    ["--base-accuracy P", "the base model's accuracy as a fraction, instead of baseline.json's"],
  ],
  examples: ["agent plan", "agent plan --base-accuracy 0.12"],
  notes: "The sd of the differences is bracketed by two models of error overlap (conversions: optimistic; independent: pessimistic).",
};

/** One error-overlap model's numbers. */
export interface PlanScenario {
  model: "conversions" | "independent";
  sdDiff: number;
  /** pairs for 80% power at +5 pp (before the milestone's floor of MIN_MILESTONE_TASKS) */
  requiredN: number;
  /** per split: MDE (fraction) and P(PASS | delta = threshold) at its size */
  bySplit: Array<{ split: Split; n: number; mde: number; pPass: number; detectable: boolean }>;
}

export interface Plan {
  pBase: number;
  baseSource: string;
  threshold: number;
  splits: Array<{ split: Split; n: number }>;
  scenarios: PlanScenario[];
}

/** The plan for a base accuracy and the available split sizes (pure). */
export function planMilestone(pBase: number, splits: Array<{ split: Split; n: number }>, baseSource: string): Plan {
  const threshold = DOWNSTREAM_MIN_DELTA;
  const scenarios: PlanScenario[] = (["conversions", "independent"] as const).map((model) => {
    const sd = plannedPairedSd(pBase, threshold, { model }).sdDiff;
    const requiredN = requiredNForDelta(threshold, sd);
    return {
      model,
      sdDiff: sd,
      requiredN,
      bySplit: splits
        .filter((s) => s.n > 0)
        .map((s) => ({
          split: s.split,
          n: s.n,
          mde: minimumDetectableEffect(s.n, sd),
          pPass: operatingCharacteristic(threshold, sd, s.n, { threshold }).pPass,
          detectable: s.n >= Math.max(requiredN, MIN_MILESTONE_TASKS),
        })),
    };
  });
  return { pBase, baseSource, threshold, splits, scenarios };
}

const pp1 = (x: number) => `${(x * 100).toFixed(1)} pp`;

export function planLines(p: Plan): string[] {
  const lines: string[] = [];
  lines.push(`base accuracy ${(p.pBase * 100).toFixed(1)}% (${p.baseSource}); milestone +${DOWNSTREAM_MIN_DELTA_PP} pp, alpha .05 two-sided, power .8, n >= ${MIN_MILESTONE_TASKS}`);
  for (const s of p.scenarios) {
    const what = s.model === "conversions" ? "conversions only (optimistic)" : "independent errors (pessimistic)";
    const floor = s.requiredN < MIN_MILESTONE_TASKS ? ` (the milestone's floor is ${MIN_MILESTONE_TASKS})` : "";
    lines.push(`${what}: sd of differences ${s.sdDiff.toFixed(3)}, required n = ${s.requiredN}${floor}`);
    for (const b of s.bySplit) {
      lines.push(
        `  ${b.split} (${b.n} tasks): MDE ${pp1(b.mde)}, P(PASS | true +${DOWNSTREAM_MIN_DELTA_PP} pp) = ${b.pPass.toFixed(2)}: ${b.detectable ? "can detect it" : "cannot reliably detect it"}`,
      );
    }
  }
  const test = p.scenarios.map((s) => s.bySplit.find((b) => b.split === "test"));
  if (test.every((b) => b?.detectable)) lines.push(`verdict: the test split can detect +${DOWNSTREAM_MIN_DELTA_PP} pp under both models.`);
  else if (test.some((b) => b?.detectable)) lines.push(`verdict: the test split can detect +${DOWNSTREAM_MIN_DELTA_PP} pp only if the adapter's errors overlap the base's (between the two models); plan for the larger n.`);
  else lines.push(`verdict: the test split is too small to detect +${DOWNSTREAM_MIN_DELTA_PP} pp; expect INCONCLUSIVE unless the effect is much larger, or add test tasks.`);
  lines.push("PASS at a true delta equal to the threshold is about a coin flip at any n (a point-estimate gate); CONFIRMED needs the CI's lower bound above it.");
  return lines;
}

export const command: CommandHandler = async (argv, _client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...EVAL_FLAGS, "base-accuracy": { type: "string" }, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) {
    console.error(`usage: ${help.usage}`);
    return 2;
  }
  const target = evalTargetFromFlags(values);
  let pBase: number;
  let source: string;
  if (values["base-accuracy"] !== undefined) {
    pBase = Number(values["base-accuracy"]);
    if (!(pBase >= 0 && pBase <= 1)) {
      console.error(`agent plan: --base-accuracy must be a fraction in [0, 1], got ${values["base-accuracy"]}`);
      return 2;
    }
    source = "--base-accuracy";
  } else {
    const b = readBaseline(target.evalsDir);
    if (!b?.accuracy) {
      console.error(`agent plan: no baseline at ${baselinePath(target.evalsDir)}: run \`agent baseline set\`, or pass --base-accuracy P`);
      return 1;
    }
    pBase = b.accuracy.estimate;
    source = `baseline.json of ${b.date}, ${b.accuracy.n} tasks`;
  }
  if (pBase + DOWNSTREAM_MIN_DELTA > 1) {
    console.error(`agent plan: a base accuracy of ${pBase} leaves no room for +${DOWNSTREAM_MIN_DELTA_PP} pp`);
    return 1;
  }
  const rows = loadTasks(target.tasksPath);
  const splits = (["test", "test_heldout_template"] as const).map((split) => ({ split, n: splitTasks(rows, split).length }));
  for (const line of planLines(planMilestone(pBase, splits, source))) console.log(line);
  return 0;
};
