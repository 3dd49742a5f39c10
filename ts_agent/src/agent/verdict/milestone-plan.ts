/**
 * `agent plan`'s numbers before training: can a split of this size detect the milestone's +5 pp?
 * The required n, the MDE and P(PASS | true +5 pp) (simulated through the real gate) under two
 * models of how the errors overlap, "conversions" (optimistic) and "independent" (pessimistic);
 * commands/plan.ts explains why and reads the inputs.
 */
import { minimumDetectableEffect, normalQuantile, plannedPairedSd, requiredNForDelta, simulatedOperatingCharacteristic } from "../core/stats/index.js";
import type { Split } from "../core/task-format.js";
import { DOWNSTREAM_MIN_DELTA, DOWNSTREAM_MIN_DELTA_PP, MIN_MILESTONE_TASKS } from "./milestone.js";

/** One error-overlap model's numbers. */
export interface PlanScenario {
  model: "conversions" | "independent";
  sdDiff: number;
  /** pairs for 80% power at +5 pp (before the milestone's floor of MIN_MILESTONE_TASKS) */
  requiredN: number;
  /** P(the two models disagree on a task) under this model at +5 pp: the simulation's discordance */
  discordance: number;
  /** per split: MDE (fraction), P(PASS) / P(CONFIRMED | delta = threshold) at its size (simulated),
   *  whether P(PASS) >= PLAN_PASS_PROBABILITY there, and the true delta (fraction) at which P(PASS)
   *  reaches it (normal approximation, at sdDiff) */
  bySplit: Array<{ split: Split; n: number; mde: number; pPass: number; pConfirm: number; detectable: boolean; deltaForPass: number }>;
}

/** The P(PASS | true +5 pp) a split needs before the plan calls it able to detect +5 pp. */
export const PLAN_PASS_PROBABILITY = 0.8;

/** The smallest true delta at which P(PASS) >= p at n by the normal approximation:
 *  max(threshold, z_.975 se) + z_p se, se = sd / sqrt(n) (stats.operatingCharacteristic inverted). */
function deltaForPassProbability(threshold: number, sd: number, n: number, p: number): number {
  const se = sd / Math.sqrt(n);
  return Math.max(threshold, normalQuantile(0.975) * se) + normalQuantile(p) * se;
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
    const planned = plannedPairedSd(pBase, threshold, { model });
    const sd = planned.sdDiff;
    const requiredN = requiredNForDelta(threshold, sd);
    return {
      model,
      sdDiff: sd,
      requiredN,
      discordance: planned.discordance,
      bySplit: splits
        .filter((s) => s.n > 0)
        .map((s) => {
          const sim = simulatedOperatingCharacteristic(threshold, planned.discordance, s.n, { threshold });
          return {
            split: s.split,
            n: s.n,
            mde: minimumDetectableEffect(s.n, sd),
            pPass: sim.pPass,
            pConfirm: sim.pConfirm,
            detectable: s.n >= MIN_MILESTONE_TASKS && sim.pPass >= PLAN_PASS_PROBABILITY,
            deltaForPass: deltaForPassProbability(threshold, sd, s.n, PLAN_PASS_PROBABILITY),
          };
        }),
    };
  });
  return { pBase, baseSource, threshold, splits, scenarios };
}

const pp1 = (x: number) => `${(x * 100).toFixed(1)} pp`;

export function planLines(p: Plan): string[] {
  const lines: string[] = [];
  lines.push(
    `base accuracy ${(p.pBase * 100).toFixed(1)}% (${p.baseSource}); milestone +${DOWNSTREAM_MIN_DELTA_PP} pp, alpha .05 two-sided, power .8, n >= ${MIN_MILESTONE_TASKS}`,
  );
  for (const s of p.scenarios) {
    const what = s.model === "conversions" ? "conversions only (optimistic)" : "independent errors (pessimistic)";
    const floor = s.requiredN < MIN_MILESTONE_TASKS ? ` (the milestone's floor is ${MIN_MILESTONE_TASKS})` : "";
    lines.push(`${what}: sd of differences ${s.sdDiff.toFixed(3)}, required n = ${s.requiredN}${floor}`);
    for (const b of s.bySplit) {
      const head = `  ${b.split} (${b.n} tasks): MDE ${pp1(b.mde)} (power .8 to reject 0), P(PASS | true +${DOWNSTREAM_MIN_DELTA_PP} pp) = ${b.pPass.toFixed(2)}, P(CONFIRMED) = ${b.pConfirm.toFixed(2)} (simulated)`;
      if (b.detectable) lines.push(`${head}: can detect it`);
      else if (b.n < MIN_MILESTONE_TASKS) lines.push(`${head}: cannot detect it (below the milestone's ${MIN_MILESTONE_TASKS} tasks)`);
      else
        lines.push(
          `${head}: cannot reliably detect it; P(PASS) reaches ${PLAN_PASS_PROBABILITY} from a true +${(b.deltaForPass * 100).toFixed(1)} pp at this n (normal approximation)`,
        );
    }
  }
  const test = p.scenarios.map((s) => s.bySplit.find((b) => b.split === "test"));
  if (test.every((b) => b?.detectable)) lines.push(`verdict: the test split can detect +${DOWNSTREAM_MIN_DELTA_PP} pp under both models.`);
  else if (test.some((b) => b?.detectable))
    lines.push(`verdict: the test split can detect +${DOWNSTREAM_MIN_DELTA_PP} pp only if the adapter's errors overlap the base's; plan for the other model.`);
  else if (test.some((b) => b && b.n < MIN_MILESTONE_TASKS))
    lines.push(`verdict: the test split is too small for the milestone (< ${MIN_MILESTONE_TASKS} tasks); add test tasks.`);
  else {
    lines.push(
      `verdict: no n gets P(PASS | true +${DOWNSTREAM_MIN_DELTA_PP} pp) to ${PLAN_PASS_PROBABILITY}: PASS needs the estimate itself >= +${DOWNSTREAM_MIN_DELTA_PP} pp, ` +
        `about a coin flip when the truth is exactly +${DOWNSTREAM_MIN_DELTA_PP} pp (the normal approximation's limit is 0.5 as n grows). ` +
        `More tasks (the required n above) make the test reject 0 at +${DOWNSTREAM_MIN_DELTA_PP} pp; PASS is likely only for an adapter better than the threshold, by the margins above.`,
    );
  }
  lines.push("CONFIRMED needs the CI's lower bound above +5 pp: an effect well above the threshold.");
  return lines;
}
