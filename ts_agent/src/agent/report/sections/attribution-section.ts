/** Attribution: docs/attribution.md's table applied to this run: the curves in words, the rows
 *  that fired (or the nearest ones), and the whole table with each row's conditions. */
import { nearMisses } from "../attribution.js";
import { describeFeatures } from "../curve-features.js";
import type { ReportSection } from "../analysis.js";
import { table } from "../markdown.js";

export const attribution: ReportSection = (input, a) => {
  const docs = input.docsDir ?? "docs";
  const out: string[] = ["## Attribution (docs/attribution.md's table applied to this run)", ""];
  out.push(`The table, each row's conditions and thresholds: [docs/attribution.md](${docs}/attribution.md).`);
  out.push("");
  if (a.preference) {
    out.push(
      "_Not applicable to a ranked-preference run: the table reads GRPO's reward curve, KL and frac_reward_zero_std. See the ranked-preference section._",
    );
    out.push("");
  }
  out.push("What the curves show:");
  out.push("");
  for (const line of describeFeatures(a.features)) out.push(`- ${line}`);
  out.push("");
  const fired = a.attribution.filter((x) => x.fired);
  if (fired.length === 0) {
    out.push("**No row of the table fired for this run.**");
    const near = nearMisses(a.attribution);
    if (near.length > 0) {
      out.push("");
      out.push("Nearest rows (every condition held but one; read together, they say what this run looks like):");
      out.push("");
      for (const x of near) {
        out.push(
          `- **${x.row.curve} / KL ${x.row.kl} / frac_reward_zero_std ${x.row.fracZeroStd}** (likely cause _${x.row.likelyCause}_; next change _${x.row.nextChange}_): every condition held except this run's "${x.missed[0]}".`,
        );
      }
    }
  } else {
    out.push("Rows that fired:");
    out.push("");
    for (const x of fired) {
      out.push(
        `- **${x.row.curve} / KL ${x.row.kl} / frac_reward_zero_std ${x.row.fracZeroStd}**: likely cause _${x.row.likelyCause}_; next change: _${x.row.nextChange}_ (${x.evidence}).`,
      );
    }
  }
  out.push("");
  out.push(
    table(
      ["reward curve", "KL", "frac_reward_zero_std", "likely cause", "next change", "fired", "conditions on this run"],
      a.attribution.map((x) => [x.row.curve, x.row.kl, x.row.fracZeroStd, x.row.likelyCause, x.row.nextChange, x.fired ? "**yes**" : "no", x.evidence]),
    ),
  );
  out.push("");
  out.push("Thresholds are the named constants in `ts_agent/src/agent/report/attribution.ts` and `curve-features.ts`.");
  out.push("");
  return out;
};
