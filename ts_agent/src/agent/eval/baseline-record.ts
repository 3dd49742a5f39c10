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
 * - `matchBaseline` says whether a baseline is comparable with an eval: their fingerprints
 *   (fingerprint.ts: task set, grader, model and weights, prompt format and chat template,
 *   decoding, device and dtype) agree field by field and the baseline holds every evaluated task.
 *   A gating difference is named; batch size and library versions only warn. A baseline.json
 *   older than the fingerprint still reads: its fingerprint is rebuilt from what it recorded, and
 *   the rest is "not recorded".
 */
import { existsSync, linkSync, mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

import type { EvaluateProgress } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../../sidecar/client.js";
import type { EvalFingerprint } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { appendLine, fsyncDirectory, writeFileAtomic } from "../workspace.js";
import { checkSettings, evaluateRequest, runEvaluate } from "./evaluate.js";
import { type EvalSettings, type ModelRef } from "../core/eval-log.js";
import { buildFingerprint, compareFingerprints, fingerprintGates, primaryGraderRef, type FingerprintRow, type GraderRef } from "./fingerprint.js";
import { type Fingerprint } from "../core/eval-log.js";
import { regrade, summarizeVariant } from "./grading.js";
import { type Accuracy } from "../core/eval-log.js";
import { taskSetRef, type TaskSet } from "./task-set.js";
import { type TaskSetRef } from "../core/eval-log.js";

export { primaryGraderRef, type GraderRef } from "./fingerprint.js";

export const BASELINE_FILE = "baseline.json";

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
  /** everything that can change a score (absent in a baseline.json older than it) */
  fingerprint?: Fingerprint;
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

/** Build the baseline record from the base variant of an evaluation; `runtime` is what the
 *  sidecar resolved (EvaluateResult.fingerprint). */
export function buildBaseline(
  settings: EvalSettings,
  taskSet: TaskSet,
  model: ModelRef,
  base: ReturnType<typeof summarizeVariant>,
  date = new Date(),
  runtime: EvalFingerprint | null = null,
): Baseline {
  const ref = taskSetRef(taskSet);
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
    fingerprint: buildFingerprint({ settings, taskSet: ref, taskIds: Object.keys(base.perTask), model, runtime }),
  };
}

/** baseline.json's fingerprint; for an older file, rebuilt from what it recorded (the sidecar's
 *  run-time half is then "not recorded"). */
export function baselineFingerprint(b: Baseline): Fingerprint {
  if (b.fingerprint) return b.fingerprint;
  const settings = { ...b.settings, samplesPerTask: b.samplesPerTask, temperature: b.temperature, maxNewTokens: b.maxNewTokens, seed: b.seed };
  return buildFingerprint({ settings, taskSet: b.taskSet, taskIds: Object.keys(b.perTask), model: b.model, grader: b.grader });
}

/** An eval log as far as its fingerprint goes (structurally core/eval-log.ts's EvalLog). */
export interface FingerprintedEval {
  model: ModelRef;
  taskSet: TaskSetRef;
  settings: EvalSettings;
  fingerprint?: Fingerprint;
  variants: ReadonlyArray<{ name: string; perTask: Record<string, unknown> }>;
}

/** The task ids an eval scored the adapter on (the first variant that is not the base). */
export function evalTaskIds(ev: FingerprintedEval): string[] {
  return Object.keys(ev.variants.find((v) => v.name !== "base")?.perTask ?? ev.variants[0]?.perTask ?? {});
}

/** An eval's fingerprint; for an eval.json older than it, rebuilt from what it recorded. */
export function evalFingerprint(ev: FingerprintedEval): Fingerprint {
  return ev.fingerprint ?? buildFingerprint({ settings: ev.settings, taskSet: ev.taskSet, taskIds: evalTaskIds(ev), model: ev.model });
}

/** baseline.json's fingerprint against an eval's, field by field (fingerprint.ts). */
export function compareWithBaseline(b: Baseline, ev: EvalIdentity): FingerprintRow[] {
  const ids = [...ev.taskIds];
  const evalFp = ev.fingerprint ?? buildFingerprint({ settings: ev.settings, taskSet: ev.taskSet, taskIds: ids, model: ev.model });
  return compareFingerprints(baselineFingerprint(b), evalFp, { baseline: Object.keys(b.perTask), eval: ids });
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
      const ev = JSON.parse(readFileSync(p, "utf8")) as FingerprintedEval;
      const m = matchBaseline(baseline, {
        model: ev.model,
        taskSet: ev.taskSet,
        settings: ev.settings,
        taskIds: evalTaskIds(ev),
        fingerprint: evalFingerprint(ev),
      });
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
  appendLine(path, JSON.stringify(entry)); // one O_APPEND write: agents replacing at once lose no entry
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
  checkSettings(opts.settings, opts.taskSet);
  const result = await runEvaluate(client, evaluateRequest(opts.settings, opts.taskSet), opts.onProgress, opts.taskSet.agent);
  if (!opts.taskSet.agent) regrade(result.variants, opts.taskSet.rows, opts.settings.graders);
  const base = result.variants.find((v) => v.name === "base");
  if (!base) throw new Error("Evaluate returned no base variant");
  const baseline = buildBaseline(
    opts.settings,
    opts.taskSet,
    { requested: opts.settings.baseModel, resolved: result.baseModel },
    summarizeVariant(base, opts.settings.graders),
    new Date(),
    result.fingerprint ?? null,
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
  | { status: "mismatch"; reasons: string[] }
  /** a run judged against a baseline of its own, not baseline.json (a ranked-preference run with
   *  no eval: step 0 of its held-out groups); `text` says which */
  | { status: "own"; text: string };

/** What an eval ran with, as needed to judge comparability. */
export interface EvalIdentity {
  model: ModelRef;
  taskSet: TaskSetRef;
  settings: EvalSettings;
  /** the task ids the adapter was scored on */
  taskIds: Iterable<string>;
  /** the eval's fingerprint (rebuilt from the fields above when absent) */
  fingerprint?: Fingerprint;
}

/** Whether baseline.json's fingerprint agrees with the eval's in every field that gates
 *  (fingerprint.ts); each gating difference is one reason, named by its field. */
export function matchBaseline(baseline: Baseline | null, ev: EvalIdentity): BaselineMatch {
  if (!baseline) return { status: "missing" };
  const reasons = fingerprintGates(compareWithBaseline(baseline, ev));
  return reasons.length ? { status: "mismatch", reasons } : { status: "match" };
}
