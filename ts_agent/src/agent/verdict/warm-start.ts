/**
 * What a warm start gave and what RL added (issue 53, docs/agents.md "Warm start"): an eval of a
 * GRPO run that started from a warm-started adapter (TrainRequest.init_adapter) scores three
 * variants on the same test tasks -- the base, the warm start alone ("warm-start") and warm start
 * + GRPO (the run's "adapter") -- and two paired comparisons answer the two questions: base ->
 * warm start (what SFT gave) and warm start -> warm start + GRPO (what RL added). Each is
 * core/base-vs-adapter.ts's compareScores (its decision interval and governing test); the two
 * governing p-values are Holm-adjusted together (two questions asked of one eval). Each step gets
 * the milestone's downstream verdict (milestone.ts downstreamCriterion: CONFIRMED when the decision
 * interval's lower bound clears +5 pp and the governing test rejects 0, here at its Holm-adjusted p;
 * FAIL when the upper bound is below +5 pp; INCONCLUSIVE below the 200 test tasks it needs). The
 * milestone still judges the run's adapter against the base (verdict.ts); this is the attribution
 * beside it.
 */
import { ADAPTER_VARIANT, WARM_START_VARIANT, compareScores, type Comparison } from "../core/base-vs-adapter.js";
import type { EvalLog } from "../core/eval-log.js";
import { holmAdjust } from "../core/stats/index.js";
import { scoresOf } from "../eval/grading.js";
import { downstreamCriterion, type CriterionResult } from "./milestone.js";
import { downstreamEvidence } from "./verdict.js";

export interface WarmStartStage {
  /** "what the warm start gave" or "what RL added" */
  question: string;
  from: string;
  to: string;
  comparison: Comparison;
  /** the governing test's p Holm-adjusted over the two stages; null where the test has no p */
  pHolm: number | null;
  /** the downstream criterion on this step, the governing test judged at its Holm-adjusted p */
  verdict: CriterionResult;
}

const ALPHA = 0.05;

/** Base -> warm start and warm start -> warm start + GRPO; null when the log has no warm-start variant. */
export function warmStartStages(log: EvalLog | null): WarmStartStage[] | null {
  const v = (name: string) => log?.variants.find((x) => x.name === name);
  const base = v("base");
  const warm = v(WARM_START_VARIANT);
  const rl = v(ADAPTER_VARIANT);
  if (!base || !warm || !rl) return null;
  const stages: WarmStartStage[] = [
    {
      question: "what the warm start gave",
      from: "base",
      to: WARM_START_VARIANT,
      comparison: compareScores(scoresOf(base.perTask), scoresOf(warm.perTask), { base: "base", candidate: WARM_START_VARIANT }),
      pHolm: null,
    },
    {
      question: "what RL added",
      from: WARM_START_VARIANT,
      to: `${WARM_START_VARIANT} + GRPO`,
      comparison: compareScores(scoresOf(warm.perTask), scoresOf(rl.perTask), { base: WARM_START_VARIANT, candidate: ADAPTER_VARIANT }),
      pHolm: null,
    },
  ].map((s) => ({ ...s, verdict: { verdict: "INCONCLUSIVE", reason: "" } as CriterionResult }));
  const withP = stages.filter((s) => s.comparison.decision?.p !== null && s.comparison.decision?.p !== undefined);
  if (withP.length) holmAdjust(withP.map((s) => s.comparison.decision!.p!)).forEach((p, i) => (withP[i].pHolm = p));
  for (const s of stages) {
    const evidence = downstreamEvidence(s.comparison, "the same eval")!;
    const holm = s.pHolm === null ? {} : { p: s.pHolm, rejects: s.pHolm < ALPHA, test: `${evidence.test}, Holm-adjusted over the 2 steps` };
    s.verdict = downstreamCriterion({ ...evidence, ...holm, contrast: `${s.to} - ${s.from}` });
  }
  return stages;
}
