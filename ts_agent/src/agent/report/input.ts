/**
 * What the report reads, all from disk and nothing from the sidecar: run.json (the Run proto as
 * JSON), events.jsonl (TrainStep metrics and warnings), eval.json (the eval log), summary.json's
 * time_breakdown, ../../baseline.json, the list of files in the run folder, and the evaluated
 * task file's prompts (eval.json names the file by path and sha256 and keeps no prompt).
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";

import { fromJson, type JsonValue } from "@bufbuild/protobuf";

import { RunEventSchema, RunSchema, type Run } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { baselinePath, readBaseline, runsJudgedOn, type Baseline } from "../eval/baseline-record.js";
import { EVAL_FILE, readEvalLog, type EvalLog } from "../core/eval-log.js";
import { readSelection, type SelectionRecord } from "../verdict/checkpoint-selection-rule.js";
import { loadTaskFile } from "../eval/tasks.js";
import { readTestEvals, type TestEvalRecord } from "../eval/test-evals.js";
import { SWEEPS_DIR, SWEEP_FILE, SWEEP_REPORT, type SweepSummary } from "../replicate/across-seeds.js";
import { displayPath, REPO_ROOT } from "../workspace.js";
import type { StepMetrics } from "./curve-features.js";
import { parseStepTimeBreakdown, type StepTimeBreakdown } from "./tco.js";

export interface RunWarningLine {
  code: string;
  message: string;
  step: number;
}

/** Everything the report reads. */
export interface ReportInput {
  runId: string;
  run: Run | null;
  steps: StepMetrics[];
  warnings: RunWarningLine[];
  evalLog: EvalLog | null;
  baseline: Baseline | null;
  /** the baseline.json read (or looked for), as displayPath names it: the verdict's reason says it */
  baselineFile?: string;
  /** files present in the run folder, relative, '/'-separated */
  files: string[];
  /** run ids whose eval.json was judged on this baseline and test split (this run included) */
  runsJudged: string[];
  now: Date;
  /** summary.json's time_breakdown (the run's measured step time by phase), when downloaded */
  timeBreakdown?: StepTimeBreakdown | null;
  /** the project's docs/ folder relative to the run folder (report.md links into it), '/'-separated */
  docsDir?: string;
  /** the sweep this run is a seed of (`agent sweep`), when one lists it */
  sweep?: RunSweep | null;
  /** runs/<run_id>/selection.json (`agent select`), when there is one */
  selection?: SelectionRecord | null;
  /** runs/<run_id>/test-evals.jsonl: every eval of this run on the test split */
  testEvals?: TestEvalRecord[];
  /** the evaluated tasks' prompts, from the task file eval.json names (null without an eval log) */
  prompts?: TaskPrompts | null;
}

/** The prompts of the task file an eval read, by task id; `note` says why there are none ("" when read). */
export interface TaskPrompts {
  byId: Record<string, string>;
  note: string;
}

/** The prompts of the eval log's task file, when the file is still the one evaluated (same sha256). */
export function loadTaskPrompts(log: EvalLog | null): TaskPrompts | null {
  if (!log || log.agentTask) return null; // an agent task's prompts are in its transcripts
  const path = resolve(REPO_ROOT, log.taskSet.path);
  const none = (why: string): TaskPrompts => ({ byId: {}, note: `prompts not shown: ${log.taskSet.path} ${why}` });
  if (!existsSync(path)) return none("is not here (eval.json keeps no prompt)");
  const sha256 = createHash("sha256").update(readFileSync(path)).digest("hex");
  if (sha256 !== log.taskSet.sha256) return none(`changed since the eval (sha256 ${sha256.slice(0, 12)}, the eval's ${log.taskSet.sha256.slice(0, 12)})`);
  try {
    return { byId: Object.fromEntries(loadTaskFile(path).rows.map((r) => [r.id, r.prompt])), note: "" };
  } catch (err) {
    return none(`could not be read (${(err as Error).message})`);
  }
}

/** A sweep that lists this run: its summary and its report relative to the run folder. */
export interface RunSweep {
  summary: SweepSummary;
  /** '/'-separated, e.g. ../../sweeps/<id>/report.md */
  report: string;
}

/** The newest sweep (by its sweep.json's mtime) under <evals dir>/sweeps/ that lists the run. */
export function findSweep(evalsDir: string, runId: string): RunSweep | null {
  const root = join(evalsDir, SWEEPS_DIR);
  if (!existsSync(root)) return null;
  let best: { summary: SweepSummary; dir: string; mtime: number } | null = null;
  for (const name of readdirSync(root)) {
    const file = join(root, name, SWEEP_FILE);
    if (!existsSync(file)) continue;
    let summary: SweepSummary;
    try {
      summary = JSON.parse(readFileSync(file, "utf8")) as SweepSummary;
    } catch {
      continue; // a damaged sweep file must not stop the report
    }
    if (!Array.isArray(summary.seeds) || !summary.seeds.some((s) => s.runId === runId)) continue;
    const mtime = statSync(file).mtimeMs;
    if (!best || mtime > best.mtime) best = { summary, dir: join(root, name), mtime };
  }
  if (!best) return null;
  const runFolder = join(evalsDir, "runs", runId);
  return { summary: best.summary, report: relative(runFolder, join(best.dir, SWEEP_REPORT)).split("\\").join("/") };
}

function listFiles(dir: string, root = dir): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...listFiles(p, root));
    else out.push(relative(root, p).split("\\").join("/"));
  }
  return out;
}

/** Read a run's local artifacts; missing files become nulls / empty lists. */
export function loadReportInput(evalsDir: string, runId: string, now = new Date()): ReportInput {
  const dir = join(evalsDir, "runs", runId);
  if (!existsSync(dir)) throw new Error(`${dir} does not exist (train with \`agent train\` or \`agent demo\` first)`);
  const runPath = join(dir, "run.json");
  const run = existsSync(runPath) ? fromJson(RunSchema, JSON.parse(readFileSync(runPath, "utf8")) as JsonValue, { ignoreUnknownFields: true }) : null;
  const steps: StepMetrics[] = [];
  const warnings: RunWarningLine[] = [];
  const eventsPath = join(dir, "events.jsonl");
  if (existsSync(eventsPath)) {
    for (const line of readFileSync(eventsPath, "utf8").split("\n")) {
      if (line.trim() === "") continue;
      const ev = fromJson(RunEventSchema, JSON.parse(line) as JsonValue, { ignoreUnknownFields: true });
      if (ev.kind.case === "trainStep") steps.push({ step: Number(ev.kind.value.step), metrics: ev.kind.value.metrics });
      if (ev.kind.case === "warning") warnings.push({ code: ev.kind.value.code, message: ev.kind.value.message, step: Number(ev.kind.value.step) });
    }
  }
  const evalPath = join(dir, EVAL_FILE);
  const evalLog = existsSync(evalPath) ? readEvalLog(evalPath) : null;
  const baseline = readBaseline(evalsDir);
  const summaryPath = join(dir, "summary.json");
  const timeBreakdown = existsSync(summaryPath)
    ? parseStepTimeBreakdown((JSON.parse(readFileSync(summaryPath, "utf8")) as { time_breakdown?: unknown }).time_breakdown)
    : null;
  const docsDir = relative(dir, join(REPO_ROOT, "docs")).split("\\").join("/");
  return {
    runId,
    run,
    steps,
    warnings,
    evalLog,
    baseline,
    baselineFile: displayPath(baselinePath(evalsDir)),
    files: listFiles(dir),
    runsJudged: baseline ? runsJudgedOn(evalsDir, baseline) : [],
    now,
    timeBreakdown,
    docsDir,
    sweep: findSweep(evalsDir, runId),
    selection: readSelection(evalsDir, runId),
    testEvals: readTestEvals(evalsDir, runId),
    prompts: loadTaskPrompts(evalLog),
  };
}
