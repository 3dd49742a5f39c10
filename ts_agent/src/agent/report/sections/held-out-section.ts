/** Held-out reward, step 0 vs end (GRPO runs): the two measurements and the relative change the
 *  reward criterion judges, as the verdict computed it (verdict/held-out-reward.ts). */
import { MIN_HELDOUT_PROMPTS, REWARD_MIN_RELATIVE_CHANGE, pct } from "../../verdict/milestone.js";
import type { ReportSection } from "../analysis.js";
import { f3, table } from "../markdown.js";

export const heldOutReward: ReportSection = (input, a) => {
  if (a.preference) return []; // the ranked-preference section replaces this one
  const out: string[] = ["## Held-out reward: step 0 vs end", ""];
  const r = input.run?.result;
  const v = a.reward;
  if (r?.startReward && r.endReward && v) {
    const rows = [r.startReward, r.endReward].map((h) => [
      String(h.step),
      f3(h.mean),
      `${f3(h.ciLow)} to ${f3(h.ciHigh)}`,
      h.ciMethod || "-",
      `${h.numPrompts} x ${h.samplesPerPrompt}`,
    ]);
    out.push(table(["step", "mean reward", "95% CI", "CI method", "prompts x samples"], rows));
    out.push("");
    const absolute = v.endMean - v.startMean;
    out.push(
      `Absolute change end - start: **${absolute >= 0 ? "+" : ""}${absolute.toFixed(3)}**; relative change (end - start) / |start|: **${pct(v.relativeChange)}** ` +
        `(95% paired bootstrap CI over prompts ${pct(v.relativeChangeCiLow)} to ${pct(v.relativeChangeCiHigh)}${v.computedFrom ? `; ${v.computedFrom}` : ""}); the milestone needs >= ${pct(REWARD_MIN_RELATIVE_CHANGE, 0)} ` +
        `on at least ${MIN_HELDOUT_PROMPTS} prompts. Same fixed held-out prompts and sampling seed at both ends. ` +
        "A bootstrap resample whose start mean is 0 has an unbounded relative change; a bound that reaches one is printed as unbounded, never dropped.",
    );
  } else {
    out.push("_No held-out result in run.json._");
  }
  out.push("");
  return out;
};
