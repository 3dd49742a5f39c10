/** The ranked-preference section (in place of the held-out reward): pairwise accuracy, group win
 *  rate, win margin and consistency with their intervals (numbers: ../preference.ts). */
import type { Interval } from "../../core/stats/index.js";
import { MIN_HELDOUT_PROMPTS } from "../../verdict/milestone.js";
import type { ReportSection } from "../analysis.js";
import { f3, table } from "../markdown.js";

export const preferenceSection: ReportSection = (_input, a) => {
  const p = a.preference;
  if (!p) return [];
  const out: string[] = [];
  const ci = (x: Interval | null) => (x && Number.isFinite(x.lower) && Number.isFinite(x.upper) ? `${f3(x.lower)} to ${f3(x.upper)}` : "-");
  const num = (x: number | null) => (x === null || !Number.isFinite(x) ? "-" : f3(x));
  out.push("## Ranked preference: held-out groups");
  out.push("");
  out.push(
    `${p.groups} held-out groups (no sampling: every response of a group is scored by the implicit reward beta * log(pi / pi_ref), beta = ${p.beta}). ` +
      "At step 0 the policy is its own reference, so every score is 0 and pairwise accuracy is 0.5 by construction: the change, not a ratio to 0.5, is the signal.",
  );
  out.push("");
  out.push(
    table(
      ["metric", "step 0", "end", "95% CI", "what it is"],
      [
        [
          "pairwise accuracy",
          num(p.startPairwise),
          num(p.endPairwise),
          `${ci(p.endPairwiseCi)} (bootstrap over groups)`,
          "share of ordered pairs whose better response scores higher (ties 1/2)",
        ],
        [
          "pairwise accuracy, end - step 0",
          "",
          `${p.change >= 0 ? "+" : ""}${num(p.change)}`,
          `${ci(p.changeCi)} (paired bootstrap over groups, 2000 resamples, seed 0)`,
          "the learning signal",
        ],
        [
          "group win rate",
          "",
          num(p.groupWinRate),
          p.groupWinRateCi ? `${ci(p.groupWinRateCi)} (${p.groupWinRateMethod})` : "-",
          "share of groups whose top-scored response is in the human top 2",
        ],
        [
          "win margin",
          "",
          num(p.winMargin),
          p.winMarginCi ? `${ci(p.winMarginCi)} (percentile bootstrap over groups, 2000 resamples, seed 0)` : "- (no per-group margins from the sidecar)",
          "mean human-rank gap between the model's pick and its runner-up",
        ],
        [
          "preference consistency",
          "",
          num(p.consistency),
          p.consistencyCi ? `${ci(p.consistencyCi)} (percentile bootstrap over prompts, 2000 resamples, seed 0)` : "- (no per-prompt values from the sidecar)",
          "mean sd of the implicit score across repeated scoring passes (lower = more consistent)",
        ],
      ],
    ),
  );
  out.push("");
  if (p.trainCurve.length > 0) {
    out.push(
      "Training curve (TRL's DPO metrics, first -> last logged step): " +
        p.trainCurve.map((c) => `${c.key} ${f3(c.first)} -> ${f3(c.last)} (${c.steps} steps)`).join("; ") +
        ". The held-out curve above is the same run's pairwise accuracy per logged step.",
    );
    out.push("");
  }
  if (p.groups < MIN_HELDOUT_PROMPTS) {
    out.push(
      `_Only ${p.groups} held-out groups: too few for these intervals to mean much (raise preference.num_held_out_groups to >= ${MIN_HELDOUT_PROMPTS})._`,
    );
    out.push("");
  }
  return out;
};
