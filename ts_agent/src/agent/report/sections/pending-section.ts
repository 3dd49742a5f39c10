/** What is pending (the analysis lists it), and the files in the run folder. */
import type { ReportSection } from "../analysis.js";

export const pending: ReportSection = (_input, a) => {
  const out: string[] = ["## Pending", ""];
  if (a.pending.length === 0) out.push("Nothing: every input of this report is present.");
  for (const p of a.pending) out.push(`- ${p}`);
  out.push("");
  return out;
};

export const files: ReportSection = (input) => {
  const out: string[] = ["## Files in this folder", ""];
  for (const f of input.files.filter((f) => !f.startsWith("adapter/"))) out.push(`- \`${f}\``);
  const adapterFiles = input.files.filter((f) => f.startsWith("adapter/"));
  if (adapterFiles.length) out.push(`- \`adapter/\` (${adapterFiles.map((f) => f.slice("adapter/".length)).join(", ")})`);
  out.push("");
  return out;
};
