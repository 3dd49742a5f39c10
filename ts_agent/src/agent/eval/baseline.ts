/**
 * agent-evals/baseline.json: the base model's score on the test split, the fixed reference every
 * run's adapter is compared with.
 *
 * - `setBaseline` evaluates the base model only (no adapters), re-grades in TS like every eval,
 *   and writes the file. It refuses to replace an existing baseline unless `force`: the check runs
 *   before the (slow) evaluation and again at write time, where the no-clobber write is a hard
 *   link of the finished temp file (fails with EEXIST), so two writers cannot both win.
 * - Hygiene (a baseline replaced after results were seen is a forking path): --force needs a
 *   reason; the replaced baseline is appended, whole, to agent-evals/baseline-history.jsonl with
 *   that reason and how many runs had been judged on it, and the new baseline.json records the
 *   replacement (`replaced`), which the report shows. `runsJudgedOn` counts the run folders whose
 *   eval.json matches a baseline: the report warns when one baseline and test split are reused.
 * - `matchBaseline` says whether a baseline is comparable with an eval: same model (requested and
 *   resolved identity), same task file (sha256), split, primary grader (name and effective
 *   params), samples per task, decoding (temperature, max_new_tokens), seed, and every evaluated
 *   task present in the baseline. Anything else gates the milestone verdict.
 */
import { appendFileSync, existsSync, linkSync, mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

import type { EvaluateProgress } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../../sidecar/client.js";
import { buildReward, type ParamValue } from "../train/grpo.js";
import { fsyncDirectory, writeFileAtomic } from "../workspace.js";
import { PRIMARY_GRADER, checkSettings, evaluateRequest, modelIdentity, runEvaluate, type EvalSettings, type ModelRef } from "./evaluate.js";
import { regrade, summarizeVariant, type Accuracy } from "./grading.js";
import { taskSetRef, type TaskSet, type TaskSetRef } from "./task-set.js";

export const BASELINE_FILE = "baseline.json";

/** The primary grader with every param filled in (what "same grader" means). */
export interface GraderRef {
  name: string;
  params: Record<string, ParamValue>;
}

export interface Baseline {
  schema: "agent-baseline/v1";
  /** ISO 8601 */
  date: string;
  model: ModelRef;
  taskSet: TaskSetRef;
  grader: GraderRef;
  samplesPerTask: number;
  temperature: number;
  maxNewTokens: number;
  seed: number;
  /** per-task primary-grader score of the base model, a fraction (null = unscorable) */
  perTask: Record<string, number | null>;
  /** mean per-task score with its 95% CI (fractions) */
  accuracy: Accuracy | null;
  /** every grader's mean (fractions) */
  meanScores: Record<string, number | null>;
  /** the full settings used, for the record */
  settings: EvalSettings;
  /** set when this baseline replaced another with --force (absent for a first baseline) */
  replaced?: BaselineReplacement;
}

/** What a --force replacement records in the new baseline.json. */
export interface BaselineReplacement {
  /** the --reason given */
  reason: string;
  /** the replaced baseline's date */
  previousDate: string;
  /** runs whose eval.json had been judged on the replaced baseline */
  runsJudgedOnPrevious: number;
}

/** The history file next to baseline.json: one replaced baseline per line. */
export const BASELINE_HISTORY_FILE = "baseline-history.jsonl";

/** --force without a reason. */
export class BaselineReasonRequiredError extends Error {
  constructor() {
    super("replacing baseline.json needs a reason (--force --reason TEXT): it is recorded in baseline.json and the history, and the report shows it");
    this.name = "BaselineReasonRequiredError";
  }
}

/** A baseline is already there and --force was not given. */
export class BaselineExistsError extends Error {
  constructor(readonly path: string) {
    super(`${path} exists; refusing to overwrite it (pass --force to replace the baseline)`);
    this.name = "BaselineExistsError";
  }
}

export function baselinePath(evalsDir: string): string {
  return join(evalsDir, BASELINE_FILE);
}

export function primaryGraderRef(settings: EvalSettings): GraderRef {
  const spec = settings.graders.find((g) => g.name === PRIMARY_GRADER);
  if (!spec) throw new Error(`eval settings: graders must include ${PRIMARY_GRADER}`);
  const built = buildReward(spec);
  return { name: built.name, params: built.params };
}

/** Read baseline.json; null when absent. Throws on a file that is not a baseline. */
export function readBaseline(evalsDir: string): Baseline | null {
  const path = baselinePath(evalsDir);
  if (!existsSync(path)) return null;
  const obj = JSON.parse(readFileSync(path, "utf8")) as Baseline;
  if (obj.schema !== "agent-baseline/v1") throw new Error(`${path}: not an agent-baseline/v1 file (schema ${JSON.stringify(obj.schema)})`);
  return obj;
}

/**
 * Write baseline.json atomically. Without `force`, an existing file is never replaced: the temp
 * file is hard-linked into place (EEXIST -> BaselineExistsError). With `force`, rename over it.
 */
export function writeBaseline(evalsDir: string, baseline: Baseline, force: boolean): string {
  mkdirSync(evalsDir, { recursive: true });
  const path = baselinePath(evalsDir);
  const data = JSON.stringify(baseline, null, 2) + "\n";
  if (force) {
    writeFileAtomic(path, data);
    return path;
  }
  const tmp = `${path}.new-${process.pid}`;
  writeFileAtomic(tmp, data);
  try {
    linkSync(tmp, path);
    fsyncDirectory(evalsDir); // make the new link durable, like writeFileAtomic's rename
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") throw new BaselineExistsError(path);
    throw err;
  } finally {
    rmSync(tmp, { force: true });
  }
  return path;
}

/** Build the baseline record from the base variant of an evaluation. */
export function buildBaseline(
  settings: EvalSettings,
  taskSet: TaskSet,
  model: ModelRef,
  base: ReturnType<typeof summarizeVariant>,
  date = new Date(),
): Baseline {
  return {
    schema: "agent-baseline/v1",
    date: date.toISOString(),
    model,
    taskSet: taskSetRef(taskSet),
    grader: primaryGraderRef(settings),
    samplesPerTask: settings.samplesPerTask,
    temperature: settings.temperature,
    maxNewTokens: settings.maxNewTokens,
    seed: settings.seed,
    perTask: base.perTask,
    accuracy: base.accuracy,
    meanScores: base.meanScores,
    settings,
  };
}

/** The run ids under evalsDir/runs whose eval.json was judged on `baseline` (it matches). */
export function runsJudgedOn(evalsDir: string, baseline: Baseline): string[] {
  const runs = join(evalsDir, "runs");
  if (!existsSync(runs)) return [];
  const out: string[] = [];
  for (const id of readdirSync(runs).sort()) {
    const p = join(runs, id, "eval.json");
    if (!existsSync(p)) continue;
    try {
      const ev = JSON.parse(readFileSync(p, "utf8")) as { model: ModelRef; taskSet: TaskSetRef; settings: EvalSettings; variants: Array<{ name: string; perTask: Record<string, unknown> }> };
      const adapter = ev.variants.find((v) => v.name !== "base");
      const m = matchBaseline(baseline, { model: ev.model, taskSet: ev.taskSet, settings: ev.settings, taskIds: Object.keys(adapter?.perTask ?? {}) });
      if (m.status === "match") out.push(id);
    } catch {
      // an unreadable eval.json judges nothing
    }
  }
  return out;
}

/** Append the baseline being replaced to the history file (one JSON object per line). */
export function appendBaselineHistory(evalsDir: string, entry: { replacedAt: string; reason: string; runsJudged: string[]; baseline: Baseline }): string {
  const path = join(evalsDir, BASELINE_HISTORY_FILE);
  appendFileSync(path, JSON.stringify(entry) + "\n");
  return path;
}

/** The replaced baselines, oldest first; [] when there is no history. */
export function readBaselineHistory(evalsDir: string): Array<{ replacedAt: string; reason: string; runsJudged: string[]; baseline: Baseline }> {
  const path = join(evalsDir, BASELINE_HISTORY_FILE);
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as { replacedAt: string; reason: string; runsJudged: string[]; baseline: Baseline });
}

/** Evaluate the base model on the task set and write baseline.json (refused if present, unless
 *  force with a reason; the replaced one goes to the history). */
export async function setBaseline(
  client: SidecarClient,
  opts: {
    evalsDir: string;
    settings: EvalSettings;
    taskSet: TaskSet;
    force?: boolean;
    /** required with force when a baseline exists */
    reason?: string;
    onProgress?: (p: EvaluateProgress) => void;
  },
): Promise<{ path: string; baseline: Baseline }> {
  const force = opts.force ?? false;
  const path = baselinePath(opts.evalsDir);
  if (!force && existsSync(path)) throw new BaselineExistsError(path); // before minutes of generation
  const reason = (opts.reason ?? "").trim();
  if (force && existsSync(path) && reason === "") throw new BaselineReasonRequiredError();
  checkSettings(opts.settings);
  const result = await runEvaluate(client, evaluateRequest(opts.settings, opts.taskSet), opts.onProgress);
  regrade(result.variants, opts.taskSet.rows, opts.settings.graders);
  const base = result.variants.find((v) => v.name === "base");
  if (!base) throw new Error("Evaluate returned no base variant");
  const baseline = buildBaseline(
    opts.settings,
    opts.taskSet,
    { requested: opts.settings.baseModel, resolved: result.baseModel },
    summarizeVariant(base, opts.settings.graders),
  );
  const previous = force ? readBaseline(opts.evalsDir) : null;
  if (previous) {
    const judged = runsJudgedOn(opts.evalsDir, previous);
    baseline.replaced = { reason, previousDate: previous.date, runsJudgedOnPrevious: judged.length };
    appendBaselineHistory(opts.evalsDir, { replacedAt: baseline.date, reason, runsJudged: judged, baseline: previous });
  }
  return { path: writeBaseline(opts.evalsDir, baseline, force), baseline };
}

/** Whether a baseline can stand in for an eval's base variant. */
export type BaselineMatch =
  | { status: "match" }
  | { status: "missing" }
  | { status: "mismatch"; reasons: string[] };

/** What an eval ran with, as needed to judge comparability. */
export interface EvalIdentity {
  model: ModelRef;
  taskSet: TaskSetRef;
  settings: EvalSettings;
  /** the task ids the adapter was scored on */
  taskIds: Iterable<string>;
}

function stableJson(x: Record<string, unknown>): string {
  return JSON.stringify(Object.keys(x).sort().map((k) => [k, x[k]]));
}

export function matchBaseline(baseline: Baseline | null, ev: EvalIdentity): BaselineMatch {
  if (!baseline) return { status: "missing" };
  const reasons: string[] = [];
  const diff = (what: string, a: unknown, b: unknown) => {
    if (a !== b) reasons.push(`${what}: baseline ${JSON.stringify(a)}, eval ${JSON.stringify(b)}`);
  };
  diff("model", baseline.model.requested || "(embedded default)", ev.model.requested || "(embedded default)");
  diff("resolved model", modelIdentity(baseline.model.resolved), modelIdentity(ev.model.resolved));
  diff("task-set sha256", baseline.taskSet.sha256, ev.taskSet.sha256);
  diff("split", baseline.taskSet.split, ev.taskSet.split);
  const grader = primaryGraderRef(ev.settings);
  diff("grader", `${baseline.grader.name} ${stableJson(baseline.grader.params)}`, `${grader.name} ${stableJson(grader.params)}`);
  diff("samples per task", baseline.samplesPerTask, ev.settings.samplesPerTask);
  diff("temperature", baseline.temperature, ev.settings.temperature);
  diff("max_new_tokens", baseline.maxNewTokens, ev.settings.maxNewTokens);
  diff("seed", baseline.seed, ev.settings.seed);
  const missing = [...ev.taskIds].filter((id) => !Object.prototype.hasOwnProperty.call(baseline.perTask, id));
  if (missing.length > 0) {
    reasons.push(`${missing.length} evaluated task(s) are not in the baseline (it has ${Object.keys(baseline.perTask).length}), e.g. ${missing[0]}`);
  }
  return reasons.length ? { status: "mismatch", reasons } : { status: "match" };
}
