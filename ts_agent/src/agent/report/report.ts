/**
 * agent-evals/runs/<run_id>/report.md: the first-run report, one section after another.
 *
 * input.ts reads the run folder (run.json, events.jsonl, eval.json, summary.json) and
 * baseline.json; analysis.ts judges the run once (verdict/verdict.ts) and adds what only the
 * report shows; each section in sections/ renders its part; this file joins them in SECTIONS'
 * order and writes report.md with the power curve beside it. Adding a section: one file in
 * sections/ exporting a ReportSection, and one line in SECTIONS.
 */
import { join } from "node:path";

import { writeFileAtomic } from "../workspace.js";
import { analyzeReport, type ReportAnalysis, type ReportSection } from "./analysis.js";
import { loadReportInput, type ReportInput } from "./input.js";
import { POWER_CSV, POWER_SVG, powerCsv, powerSvg } from "./power.js";
import { attribution } from "./sections/attribution.js";
import { downstream } from "./sections/downstream.js";
import { heldOutReward } from "./sections/held-out.js";
import { milestone } from "./sections/milestone.js";
import { overview } from "./sections/overview.js";
import { files, pending } from "./sections/pending.js";
import { preferenceSection } from "./sections/preference.js";
import { tco } from "./sections/tco.js";

export const REPORT_FILE = "report.md";

/** The sections of report.md, in order. */
export const SECTIONS: readonly ReportSection[] = [
  overview,
  preferenceSection,
  heldOutReward,
  downstream,
  milestone,
  attribution,
  tco,
  pending,
  files,
];

export function renderReport(input: ReportInput, a: ReportAnalysis): string {
  return SECTIONS.flatMap((section) => section(input, a)).join("\n");
}

/** Load, analyze, render and write agent-evals/runs/<run_id>/report.md atomically. */
export function writeReport(evalsDir: string, runId: string, now = new Date()): { path: string; analysis: ReportAnalysis } {
  const input = loadReportInput(evalsDir, runId, now);
  const analysis = analyzeReport(input);
  const written = [REPORT_FILE];
  if (analysis.power) {
    writeFileAtomic(join(evalsDir, "runs", runId, POWER_CSV), powerCsv(analysis.power));
    writeFileAtomic(join(evalsDir, "runs", runId, POWER_SVG), powerSvg(analysis.power));
    written.push(POWER_CSV, POWER_SVG);
  }
  for (const f of written) if (!input.files.includes(f)) input.files.push(f);
  input.files.sort();
  const path = join(evalsDir, "runs", runId, REPORT_FILE);
  writeFileAtomic(path, renderReport(input, analysis));
  return { path, analysis };
}
