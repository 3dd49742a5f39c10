/**
 * agent-evals/runs/<run_id>/report.md: the first-run report, one section after another.
 *
 * input.ts reads the run folder (run.json, events.jsonl, eval.json, summary.json) and
 * baseline.json; analysis.ts judges the run once (verdict/verdict.ts) and adds what only the
 * report shows; each section in sections/ renders its part; this file joins them in SECTIONS'
 * order and writes report.md with the power curve beside it. Adding a section: one file in
 * sections/ exporting a ReportSection, and one line in SECTIONS.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { pyTrainerBin, writeFileAtomic } from "../workspace.js";
import { analyzeReport, type ReportAnalysis, type ReportSection } from "./analysis.js";
import { loadReportInput, type ReportInput } from "./input.js";
import { POWER_CSV, POWER_SVG, powerCsv, powerSvg } from "./power-curve.js";
import { PREFERENCE_SVG, preferenceSvg } from "./preference-curve.js";
import { CONFUSION_PNG, CONFUSION_SPEC, answers } from "./sections/answers-section.js";
import { attribution } from "./sections/attribution-section.js";
import { downstream } from "./sections/downstream-section.js";
import { episodes } from "./sections/episodes-section.js";
import { warmStart } from "./sections/warm-start-section.js";
import { heldOutReward } from "./sections/held-out-section.js";
import { milestone } from "./sections/milestone-section.js";
import { overview } from "./sections/overview-section.js";
import { files, pending } from "./sections/pending-section.js";
import { preferenceSection } from "./sections/preference-section.js";
import { replicates } from "./sections/replicates-section.js";
import { sampleCompletions } from "./sections/samples-section.js";
import { selectionSection } from "./sections/checkpoint-selection-section.js";
import { tco } from "./sections/tco-section.js";

export const REPORT_FILE = "report.md";

/** The sections of report.md, in order. */
export const SECTIONS: readonly ReportSection[] = [
  overview,
  preferenceSection,
  heldOutReward,
  downstream,
  warmStart,
  answers,
  episodes,
  sampleCompletions,
  milestone,
  selectionSection,
  replicates,
  attribution,
  tco,
  pending,
  files,
];

export function renderReport(input: ReportInput, a: ReportAnalysis): string {
  return SECTIONS.flatMap((section) => section(input, a)).join("\n");
}

/** How the figure is drawn: `py-trainer plot confusion SPEC PNG` in a process of its own. The
 *  unit tests that are not about the figure put an in-process stand-in here (they start no
 *  process); nothing else changes it. */
export const confusionPlotter = {
  run: (bin: string, args: string[]): { status: number | null; stderr: string; error?: Error } => spawnSync(bin, args, { encoding: "utf8", timeout: 120_000 }),
};

/** confusion-matrix.png of the first split's answers, through `py-trainer plot confusion`;
 *  returns why it was not drawn ("" when it was), or null when there is none to draw (open
 *  answers: no closed label set, the answer table only). */
function drawConfusion(dir: string, runId: string, a: ReportAnalysis): string | null {
  const first = a.answers?.splits[0];
  if (!first?.confusion) return null;
  const spec = JSON.stringify({ title: `${runId}: ${first.split} split, ${first.tasks} tasks`, ...first.confusion }) + "\n";
  const specPath = join(dir, CONFUSION_SPEC);
  // a report re-rendered on the same eval (agent report again, a sweep's final pass) keeps its figure
  if (existsSync(join(dir, CONFUSION_PNG)) && existsSync(specPath) && readFileSync(specPath, "utf8") === spec) return "";
  writeFileAtomic(specPath, spec);
  const bin = pyTrainerBin();
  if (!existsSync(bin)) return `py-trainer not found at ${bin} (set PY_TRAINER_BIN)`;
  const r = confusionPlotter.run(bin, ["plot", "confusion", join(dir, CONFUSION_SPEC), join(dir, CONFUSION_PNG)]);
  if (r.status === 0) return "";
  return `py-trainer plot confusion failed (${r.error?.message ?? `exit ${r.status}`}: ${(r.stderr ?? "").trim().split("\n").pop() ?? ""})`;
}

/** Load, analyze, render and write agent-evals/runs/<run_id>/report.md atomically. */
export function writeReport(evalsDir: string, runId: string, now = new Date()): { path: string; analysis: ReportAnalysis } {
  const input = loadReportInput(evalsDir, runId, now);
  const analysis = analyzeReport(input);
  const written = [REPORT_FILE];
  const dir = join(evalsDir, "runs", runId);
  const note = analysis.answers ? drawConfusion(dir, runId, analysis) : null;
  if (note !== null) {
    analysis.answersPlotNote = note;
    written.push(CONFUSION_SPEC);
    if (!note && existsSync(join(dir, CONFUSION_PNG))) written.push(CONFUSION_PNG);
  }
  if (analysis.preference && analysis.preference.curve.length) {
    writeFileAtomic(join(dir, PREFERENCE_SVG), preferenceSvg(analysis.preference.curve, `${runId}: held-out pairwise accuracy per logged step`));
    written.push(PREFERENCE_SVG);
  }
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
