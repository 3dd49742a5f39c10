/**
 * report.md for an eval that is not a run's: `agent eval --adapter PATH` scores any PEFT folder
 * against the base, and `agent eval --agent-task FILE` with no run the base alone, so there is no run.json, no curve, no held-out reward and no milestone; what
 * there is (the downstream comparison on the test split and the held-out-template split, the
 * baseline check, grader agreement, the answers, sample completions) is rendered by the run report's own sections, on
 * the same analysis (analysis.ts, verdict/verdict.ts), under a header that says what was scored.
 * Written beside the eval log.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";

import { codeLine } from "../code-revision.js";
import { ADAPTER_VARIANT } from "../core/base-vs-adapter.js";
import { baselinePath, readBaseline, runsJudgedOn } from "../eval/baseline-record.js";
import { EVAL_FILE, readEvalLog, type EvalLog } from "../core/eval-log.js";
import { displayPath, REPO_ROOT, UserError, writeFileAtomic } from "../workspace.js";
import { analyzeReport, type ReportAnalysis } from "./analysis.js";
import { loadTaskPrompts, type ReportInput } from "./input.js";
import { answers } from "./sections/answers-section.js";
import { downstream } from "./sections/downstream-section.js";
import { episodes } from "./sections/episodes-section.js";
import { files } from "./sections/pending-section.js";
import { sampleCompletions } from "./sections/samples-section.js";

export const EVAL_REPORT_FILE = "report.md";

/** An eval log of an adapter given by path (`agent eval --adapter`): its adapter names no run. */
export function isAdapterPathEval(log: EvalLog): boolean {
  return log.adapter !== undefined && log.adapter.runId === "";
}

/** The eval log in runs/<name>/ when it is an `agent eval --adapter` record, else undefined. */
export function adapterEvalIn(evalsDir: string, name: string): string | undefined {
  const path = join(evalsDir, "runs", name, EVAL_FILE);
  if (!existsSync(path)) return undefined;
  try {
    return isAdapterPathEval(readEvalLog(path)) ? path : undefined;
  } catch {
    return undefined;
  }
}

function listFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => statSync(join(dir, f)).isFile())
    .sort();
}

/** The header: what was scored, on what, and why there is no milestone. */
function header(input: ReportInput, a: ReportAnalysis, ev: EvalLog): string[] {
  const held = ev.heldOutTemplate?.taskSet;
  const adapter = ev.adapter;
  if (!ev.variants.some((v) => v.name === ADAPTER_VARIANT)) {
    const base = ev.variants.find((v) => v.name === "base")?.accuracy;
    return [
      `# Base eval \`${input.runId}\`: report`,
      "",
      `Generated ${input.now.toISOString()} by \`agent eval\` from ${EVAL_FILE} (${ev.date}): the base model alone on the test split (\`agent eval\` with no run), ` +
        "to see what it does before any training: no adapter, so no comparison and no verdict.",
      codeLine(ev.fingerprint?.code?.sidecar),
      `Base model: ${ev.model.requested || "the embedded default model"} (loaded as ${ev.model.resolved}). Test split: ${ev.taskSet.n} tasks of ${ev.taskSet.path}.`,
      "",
      `**Base: ${base ? `${(100 * base.estimate).toFixed(1)}% (95% CI ${(100 * base.lower).toFixed(1)}-${(100 * base.upper).toFixed(1)}%, ${base.method})` : "-"}** on \`${ev.settings.graders[0]?.name}\`.`,
      "",
    ];
  }
  return [
    `# Adapter eval \`${input.runId}\`: report`,
    "",
    `Generated ${input.now.toISOString()} by \`agent report\` from ${EVAL_FILE} (${ev.date}). ` +
      `The adapter (sha256 ${adapter?.sha256 ? adapter.sha256.slice(0, 12) : "-"}) was given by path to \`agent eval --adapter\`: it is not a run of this sidecar, ` +
      "so there is no training curve, no held-out reward and no milestone verdict, only its downstream comparison with the base.",
    codeLine(ev.fingerprint?.code?.sidecar),
    `Base model: ${ev.model.requested || "the embedded default model"} (loaded as ${ev.model.resolved}). Test split: ${ev.taskSet.n} tasks of ${ev.taskSet.path}; held-out-template split: ${held ? `${held.n} tasks` : "none (the task file has no held-out templates, or the eval predates them)"}.`,
    "",
    `**Downstream: ${a.milestone.downstream.verdict}${a.baselineMatch.status === "match" ? "" : " (GATED on baseline.json)"}**: ${a.milestone.downstream.reason}`,
    "",
  ];
}

/** Read an adapter eval log, judge it as a run's eval would be judged, write report.md beside it. */
export function writeEvalReport(evalsDir: string, evalPath: string, now = new Date()): { path: string; analysis: ReportAnalysis; log: EvalLog } {
  if (!existsSync(evalPath)) throw new UserError(`--eval ${evalPath}: no such file`);
  let log: EvalLog;
  try {
    log = readEvalLog(evalPath);
  } catch (err) {
    throw new UserError(`--eval ${evalPath}: ${(err as Error).message.replace(`${evalPath}: `, "")}`);
  }
  const dir = dirname(evalPath);
  const baseline = readBaseline(evalsDir);
  const input: ReportInput = {
    runId: log.runId,
    run: null,
    steps: [],
    warnings: [],
    evalLog: log,
    baseline,
    baselineFile: displayPath(baselinePath(evalsDir)),
    files: listFiles(dir)
      .filter((f) => f !== EVAL_REPORT_FILE)
      .concat(EVAL_REPORT_FILE)
      .sort(),
    runsJudged: baseline ? runsJudgedOn(evalsDir, baseline) : [],
    now,
    docsDir: relative(dir, join(REPO_ROOT, "docs")).split("\\").join("/"),
    sweep: null,
    prompts: loadTaskPrompts(log),
  };
  const analysis = analyzeReport(input);
  analysis.answersPlotNote = "an adapter eval's report draws no figures; see the tables";
  const md = [
    header(input, analysis, log),
    downstream(input, analysis),
    answers(input, analysis),
    episodes(input, analysis),
    sampleCompletions(input, analysis),
    files(input, analysis),
  ]
    .flat()
    .join("\n");
  const path = join(dir, EVAL_REPORT_FILE);
  writeFileAtomic(path, md);
  return { path, analysis, log };
}
