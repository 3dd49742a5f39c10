/**
 * The eval harness: run the sidecar's Evaluate on the same tasks for the base model and an
 * adapter, re-grade every completion in TS, and compute the paired comparison the report judges.
 *
 * What is deliberate
 * - Tasks go to the sidecar INLINE from the TS loader (loadTasks + splitTasks), so the ids, prompts
 *   and answers graded here are exactly the ones generated from; the task set is identified by the
 *   sha256 of the task file's bytes.
 * - Every (variant, task, sample, grader) score the sidecar sends is recomputed with grpo.ts's
 *   registry and compared for exact equality (NaN == NaN: unscorable on both sides). Any mismatch
 *   throws RegradeMismatchError listing the first few: Python and TS must grade identically, or
 *   no number downstream means anything.
 * - Per-task score = mean over the task's samples of the primary grader (exact_match), a fraction
 *   in [0, 1]; a task whose samples are all unscorable has no score and drops out of the pairing.
 * - The comparison is paired by task id, candidate minus base (stats.ts convention d = b - a), all
 *   as FRACTIONS (0.05 = +5 percentage points); the report converts to pp. CIs: the percentile
 *   bootstrap over tasks (pairedBootstrapCI, 10 000 resamples, seed 0) is the one the milestone
 *   uses; the paired t interval is shown next to it.
 * - Grader agreement: Cohen's kappa between the strict grader (exact_match) and the lenient one
 *   (exact_match_lenient) over every (task, sample) of a variant. Human labels: a task row may carry
 *   an optional `human_label` (the typology a human annotator assigned to the case). Then the
 *   harness reports kappa(gold typology, human label) over those tasks (how trustworthy the gold
 *   labels are), and kappa(strict grader vs gold, strict grader vs the human label) over their
 *   completions (whether the grade depends on whose label it is).
 */
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

import { toJson, type JsonObject, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";

import {
  EvaluateRequestSchema,
  EvaluateResultSchema,
  type EvaluateProgress,
  type EvaluateResult,
} from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../../sidecar/client.js";
import { buildReward, type RewardSpec } from "../train/grpo.js";
import { REPO_ROOT, displayPath, runDir, writeFileAtomic } from "../workspace.js";
import {
  clusteredMeanSE,
  cohenKappa,
  holmAdjust,
  passAtK,
  minimumDetectableEffect,
  pairedBootstrapCI,
  pairedComparison,
  requiredNForDelta,
  standardError,
  studentTQuantile,
  tangoScoreInterval,
  wilsonInterval,
  type BootstrapInterval,
  type ClusteredMean,
  type PairedComparison,
} from "./stats.js";
import { loadTasks, splitTasks } from "./tasks.js";
import type { Split, TaskRow } from "./typologies.js";

// ---------------------------------------------------------------------------------------------
// Settings

/** The strict grader: the milestone's downstream metric (answer tag, exact label match). */
export const PRIMARY_GRADER = "exact_match";
/** The lenient grader compared with the strict one by Cohen's kappa. */
export const LENIENT_GRADER = "exact_match_lenient";
/** Percentile-bootstrap resamples and seed for the paired CI (fixed, so reports are reproducible). */
export const BOOTSTRAP_RESAMPLES = 10_000;
export const BOOTSTRAP_SEED = 0;
/** Variant name of the adapter under test in the Evaluate request. */
export const ADAPTER_VARIANT = "adapter";

/** How an evaluation is run. Baseline and eval must agree on all of it to be comparable. */
export interface EvalSettings {
  /** "" = the sidecar's embedded default model; else a path under its data root or a hub id */
  baseModel: string;
  split: Split;
  /** use the first `limit` tasks of the split, in file order (0 = all) */
  limit: number;
  /** every completion gets every grader's score; must include PRIMARY_GRADER and LENIENT_GRADER */
  graders: RewardSpec[];
  /** K samples per task */
  samplesPerTask: number;
  /** 0 = greedy */
  temperature: number;
  maxNewTokens: number;
  seed: number;
  /** prompts per generate() call (speed only; not part of the comparability check) */
  batchSize: number;
}

export const DEFAULT_EVAL_SETTINGS: Readonly<EvalSettings> = {
  baseModel: "",
  split: "test",
  limit: 0,
  graders: [{ name: PRIMARY_GRADER }, { name: LENIENT_GRADER }, { name: "format" }],
  samplesPerTask: 1,
  temperature: 0,
  maxNewTokens: 32,
  seed: 0,
  batchSize: 64,
};

// ---------------------------------------------------------------------------------------------
// Task set

/** A task split as evaluated: where it came from and which rows. */
export interface TaskSet {
  /** repo-relative when inside the repo, else absolute */
  path: string;
  /** lowercase hex sha256 of the task file's bytes */
  sha256: string;
  split: Split;
  limit: number;
  rows: TaskRow[];
  /** optional human annotations: task id -> the typology a human assigned */
  humanLabels: Map<string, string>;
}

/** Load the task file, take one split (and at most `limit` rows), hash the file, read human labels. */
export function loadTaskSet(path: string, split: Split, limit = 0): TaskSet {
  const bytes = readFileSync(path);
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  let rows = splitTasks(loadTasks(path), split);
  if (limit > 0) rows = rows.slice(0, limit);
  if (rows.length === 0) throw new Error(`${path}: no tasks in split ${JSON.stringify(split)}`);
  // loadTasks keeps only the documented fields; human_label is optional, so read it here.
  const humanLabels = new Map<string, string>();
  for (const line of bytes.toString("utf8").split("\n")) {
    if (line.trim() === "") continue;
    const obj = JSON.parse(line) as { id?: unknown; human_label?: unknown };
    if (typeof obj.id === "string" && typeof obj.human_label === "string" && obj.human_label !== "") {
      humanLabels.set(obj.id, obj.human_label);
    }
  }
  return { path: displayPath(path), sha256, split, limit, rows, humanLabels };
}

// ---------------------------------------------------------------------------------------------
// Running Evaluate

/** The Evaluate request for these settings: base (unless skipBase) and the named adapters. */
export function evaluateRequest(
  settings: EvalSettings,
  taskSet: TaskSet,
  adapters: ReadonlyArray<{ name: string; runId: string }> = [],
): MessageInitShape<typeof EvaluateRequestSchema> {
  return {
    baseModel: settings.baseModel,
    adapters: adapters.map((a) => ({ name: a.name, source: { case: "runId" as const, value: a.runId } })),
    tasks: {
      source: {
        case: "inline" as const,
        value: { rows: taskSet.rows.map((r) => ({ id: r.id, prompt: r.prompt, answers: r.answers })) },
      },
    },
    graders: settings.graders.map((g) => ({ name: g.name, weight: g.weight, params: g.params as JsonObject | undefined })),
    samplesPerTask: settings.samplesPerTask,
    temperature: settings.temperature,
    maxNewTokens: settings.maxNewTokens,
    seed: BigInt(settings.seed),
    batchSize: settings.batchSize,
  };
}

/** Stream Evaluate to its one result; progress goes to `onProgress`. */
export async function runEvaluate(
  client: SidecarClient,
  request: MessageInitShape<typeof EvaluateRequestSchema>,
  onProgress: (p: EvaluateProgress) => void = () => undefined,
): Promise<EvaluateResult> {
  let result: EvaluateResult | undefined;
  for await (const res of client.evaluate(request)) {
    if (res.kind.case === "progress") onProgress(res.kind.value);
    else if (res.kind.case === "result") result = res.kind.value;
  }
  if (!result) throw new Error("Evaluate ended without a result");
  return result;
}

// ---------------------------------------------------------------------------------------------
// Re-grading

/** One completion and the scores the sidecar gave it (structurally a proto GradedSample). */
export interface SampleScores {
  completion: string;
  scores: { readonly [grader: string]: number };
}
export interface TaskScores {
  taskId: string;
  samples: ReadonlyArray<SampleScores>;
}
/** One variant's per-task results (structurally a proto VariantResult). */
export interface VariantScores {
  name: string;
  tasks: ReadonlyArray<TaskScores>;
}

/** One score where TS and Python disagree. NaN means unscorable; undefined means missing. */
export interface RegradeMismatch {
  variant: string;
  taskId: string;
  sample: number;
  grader: string;
  python: number | undefined;
  ts: number;
  completion: string;
}

/** TS and Python graded differently: the eval cannot be trusted. */
export class RegradeMismatchError extends Error {
  constructor(
    readonly mismatches: RegradeMismatch[],
    readonly checked: number,
  ) {
    const shown = mismatches
      .slice(0, 5)
      .map(
        (m) =>
          `  ${m.variant} / ${m.taskId} / sample ${m.sample} / ${m.grader}: python ${String(m.python)}, ts ${m.ts}, ` +
          `completion ${JSON.stringify(m.completion.length > 120 ? `${m.completion.slice(0, 120)}...` : m.completion)}`,
      )
      .join("\n");
    super(
      `TS re-grading disagrees with the sidecar on ${mismatches.length} of ${checked} scores; first ${Math.min(5, mismatches.length)}:\n${shown}`,
    );
    this.name = "RegradeMismatchError";
  }
}

function sameScore(python: number | undefined, ts: number): boolean {
  if (python === undefined) return false;
  return python === ts || (Number.isNaN(python) && Number.isNaN(ts));
}

/**
 * Recompute every grader's score for every (variant, task, sample) with grpo.ts and compare with
 * the sidecar's score exactly (NaN == NaN). Also checks that every variant covers exactly the
 * given tasks. Returns how many scores were compared; throws RegradeMismatchError on any mismatch
 * (Error for a missing or unknown task).
 */
export function regrade(
  variants: ReadonlyArray<VariantScores>,
  rows: ReadonlyArray<Pick<TaskRow, "id" | "answers">>,
  graders: ReadonlyArray<RewardSpec>,
): number {
  const answers = new Map(rows.map((r) => [r.id, r.answers]));
  const built = graders.map((g) => buildReward(g));
  const mismatches: RegradeMismatch[] = [];
  let checked = 0;
  for (const v of variants) {
    const seen = new Set<string>();
    for (const t of v.tasks) {
      const gold = answers.get(t.taskId);
      if (gold === undefined) throw new Error(`variant ${v.name}: task ${JSON.stringify(t.taskId)} was not in the request`);
      if (seen.has(t.taskId)) throw new Error(`variant ${v.name}: task ${t.taskId} appears twice`);
      seen.add(t.taskId);
      t.samples.forEach((s, i) => {
        for (const g of built) {
          const score = g.score(s.completion, gold);
          const ts = score === null ? NaN : score;
          const python = Object.prototype.hasOwnProperty.call(s.scores, g.name) ? s.scores[g.name] : undefined;
          checked++;
          if (!sameScore(python, ts)) {
            mismatches.push({ variant: v.name, taskId: t.taskId, sample: i, grader: g.name, python, ts, completion: s.completion });
          }
        }
      });
    }
    const missing = rows.filter((r) => !seen.has(r.id));
    if (missing.length > 0) {
      throw new Error(`variant ${v.name}: ${missing.length} task(s) without results, e.g. ${missing[0].id}`);
    }
  }
  if (mismatches.length > 0) throw new RegradeMismatchError(mismatches, checked);
  return checked;
}

// ---------------------------------------------------------------------------------------------
// Scores and accuracy

/** Per-task mean of `grader` over the task's scorable samples; NaN when none is scorable. */
export function perTaskScores(variant: VariantScores, grader = PRIMARY_GRADER): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of variant.tasks) {
    let sum = 0;
    let n = 0;
    for (const s of t.samples) {
      const x = s.scores[grader];
      if (x !== undefined && !Number.isNaN(x)) {
        sum += x;
        n++;
      }
    }
    out.set(t.taskId, n > 0 ? sum / n : NaN);
  }
  return out;
}

/** A mean score (fraction) with its 95% CI. */
export interface Accuracy {
  n: number;
  /** fraction in [0, 1] */
  estimate: number;
  lower: number;
  upper: number;
  /** "wilson" for 0/1 per-task scores, "t" (mean -/+ t_{n-1} se) otherwise */
  method: "wilson" | "t";
}

/** Accuracy over per-task scores (NaN entries skipped). Null when nothing is scorable. */
export function accuracy(scores: Iterable<number>): Accuracy | null {
  const xs = [...scores].filter((x) => !Number.isNaN(x));
  if (xs.length === 0) return null;
  const binary = xs.every((x) => x === 0 || x === 1);
  if (binary) {
    const successes = xs.filter((x) => x === 1).length;
    const w = wilsonInterval(successes, xs.length);
    return { n: xs.length, estimate: w.estimate, lower: w.lower, upper: w.upper, method: "wilson" };
  }
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  if (xs.length < 2) return { n: 1, estimate: m, lower: NaN, upper: NaN, method: "t" };
  const h = studentTQuantile(0.975, xs.length - 1) * standardError(xs);
  return { n: xs.length, estimate: m, lower: m - h, upper: m + h, method: "t" };
}

// ---------------------------------------------------------------------------------------------
// Paired comparison

/** Candidate vs base, paired by task id. Every difference is candidate - base, as a FRACTION. */
export interface Comparison {
  baseLabel: string;
  candidateLabel: string;
  /** tasks with a scorable score on both sides */
  n: number;
  /** candidate tasks left out: no scorable base score, or no candidate score */
  unpaired: number;
  /** paired ids, in candidate order */
  taskIds: string[];
  /** stats.pairedComparison(base, candidate); null when n < 2 */
  paired: PairedComparison | null;
  /** percentile bootstrap CI of the mean difference (the milestone's CI); null when n < 2 */
  bootstrap: BootstrapInterval | null;
  /** pairs needed to detect the observed difference (alpha .05 two-sided, power .8); null + reason when undefined */
  requiredN: number | null;
  requiredNNote: string;
  /** minimum detectable |difference| at this n (fraction); null when n < 2 or the differences have no spread */
  mde: number | null;
  /** the interval and test the milestone decides on; null when n < 2 */
  decision: Decision | null;
  /** sensitivity row: the mean difference's SE with tasks clustered by narrative template (Miller
   *  2024); null without templates or with fewer than 2 */
  clustered: (ClusteredMean & { clusteredBy: string }) | null;
}

/** The decision interval for the mean difference and the test that governs "excludes 0". */
export interface Decision {
  /** e.g. "Tango score interval" */
  method: string;
  /** e.g. "exact McNemar test" */
  test: string;
  lower: number;
  upper: number;
  /** the test's two-sided p (exact McNemar, or the paired t test's) */
  p: number | null;
  /** the test rejects a difference of 0 at alpha .05 */
  rejects: boolean;
}

/** Alpha of the governing test (two-sided), matching the 95% intervals. */
export const DECISION_ALPHA = 0.05;

/**
 * 0/1 per-task scores: Tango's score interval (its Z(0) is McNemar's z) with the exact McNemar
 * test governing whether the difference excludes 0, so a bootstrap seed can never flip it. Per-task
 * means (K > 1 samples): the paired t interval and the t test (the interval excludes 0 exactly
 * when the test rejects).
 */
export function decisionFor(p: PairedComparison): Decision {
  if (p.binary && p.discordant && p.mcnemarP !== null) {
    const t = tangoScoreInterval(p.discordant.b, p.discordant.c, p.n);
    return { method: "Tango score interval", test: "exact McNemar test", lower: t.lower, upper: t.upper, p: p.mcnemarP, rejects: p.mcnemarP < DECISION_ALPHA };
  }
  return { method: "paired t interval", test: "paired t test", lower: p.ciT.lower, upper: p.ciT.upper, p: p.tTestP, rejects: p.ciT.lower > 0 || p.ciT.upper < 0 };
}

/** Pair `candidate` with `base` by task id (candidate's order) and compute every statistic. */
export function compareScores(
  base: ReadonlyMap<string, number>,
  candidate: ReadonlyMap<string, number>,
  labels: { base: string; candidate: string } = { base: "base", candidate: ADAPTER_VARIANT },
  /** task id -> narrative template, for the template-clustered SE */
  templates?: ReadonlyMap<string, string>,
): Comparison {
  const a: number[] = [];
  const b: number[] = [];
  const taskIds: string[] = [];
  let unpaired = 0;
  for (const [id, y] of candidate) {
    const x = base.get(id);
    if (x === undefined || Number.isNaN(x) || Number.isNaN(y)) {
      unpaired++;
      continue;
    }
    a.push(x);
    b.push(y);
    taskIds.push(id);
  }
  const n = a.length;
  const out: Comparison = {
    baseLabel: labels.base,
    candidateLabel: labels.candidate,
    n,
    unpaired,
    taskIds,
    paired: null,
    bootstrap: null,
    requiredN: null,
    requiredNNote: "",
    mde: null,
    decision: null,
    clustered: null,
  };
  if (n < 2) {
    out.requiredNNote = `n=${n} pairs: too few for any interval`;
    return out;
  }
  out.paired = pairedComparison(a, b);
  out.bootstrap = pairedBootstrapCI(a, b, { resamples: BOOTSTRAP_RESAMPLES, seed: BOOTSTRAP_SEED });
  out.decision = decisionFor(out.paired);
  if (templates) {
    const clusters = taskIds.map((id) => templates.get(id) ?? `(no template) ${id}`);
    if (new Set(clusters).size >= 2) {
      const d = a.map((x, i) => b[i] - x);
      out.clustered = { ...clusteredMeanSE(d, clusters), clusteredBy: "narrative template" };
    }
  }
  out.mde = out.paired.sdDiff > 0 ? minimumDetectableEffect(n, out.paired.sdDiff) : null; // no spread: no MDE to speak of
  if (out.paired.meanDiff === 0) {
    out.requiredNNote = "observed difference is 0: no finite n detects it";
  } else if (out.paired.sdDiff === 0) {
    out.requiredNNote = "every pair differs by the same amount (sd of differences 0)";
    out.requiredN = requiredNForDelta(out.paired.meanDiff, 0);
  } else {
    out.requiredN = requiredNForDelta(out.paired.meanDiff, out.paired.sdDiff);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Agreement

/** Cohen's kappa (plain) between two raters over `n` items; null kappa = undefined (one category). */
export interface Agreement {
  what: string;
  n: number;
  /** raw share of items where both agree */
  observedAgreement: number;
  kappa: number | null;
  se: number | null;
  /** why kappa is undefined, when it is */
  note: string;
}

function kappaOf(what: string, r1: Array<string | number>, r2: Array<string | number>): Agreement | null {
  if (r1.length === 0) return null;
  const plain = cohenKappa(r1, r2);
  let same = 0;
  for (let i = 0; i < r1.length; i++) if (r1[i] === r2[i]) same++;
  return {
    what,
    n: r1.length,
    observedAgreement: same / r1.length,
    kappa: plain.kappa,
    se: plain.se,
    note: plain.kappa === null ? "undefined: both raters put every item in one category" : "",
  };
}

/**
 * Strict vs lenient grader on a variant, with the TASK as the unit: with one sample per task,
 * plain kappa over the tasks; with K > 1 samples, linearly weighted kappa over the per-task means
 * (ordinal categories 0, 1/K, ..., 1; only samples both graders scored), so the SE does not
 * count a task's K samples as independent items.
 */
export function graderAgreement(variant: VariantScores, strict = PRIMARY_GRADER, lenient = LENIENT_GRADER): Agreement | null {
  const k = Math.max(0, ...variant.tasks.map((t) => t.samples.length));
  const r1: number[] = [];
  const r2: number[] = [];
  for (const t of variant.tasks) {
    let s1 = 0;
    let s2 = 0;
    let n = 0;
    for (const s of t.samples) {
      const x = s.scores[strict];
      const y = s.scores[lenient];
      if (x === undefined || y === undefined || Number.isNaN(x) || Number.isNaN(y)) continue;
      s1 += x;
      s2 += y;
      n++;
    }
    if (n === 0) continue;
    if (k <= 1) {
      r1.push(s1);
      r2.push(s2);
    } else {
      // per-task means on the grid of K: a task with fewer scorable samples is rounded onto it
      r1.push(Math.round((s1 / n) * k) / k);
      r2.push(Math.round((s2 / n) * k) / k);
    }
  }
  const what = `${strict} vs ${lenient} (${variant.name})`;
  if (k <= 1) return kappaOf(what, r1, r2);
  if (r1.length === 0) return null;
  const categories = Array.from({ length: k + 1 }, (_, i) => i / k);
  const w = cohenKappa(r1, r2, { weights: "linear", categories });
  let same = 0;
  for (let i = 0; i < r1.length; i++) if (r1[i] === r2[i]) same++;
  return {
    what: `${what}, per-task means of ${k} samples, linear weights`,
    n: r1.length,
    observedAgreement: same / r1.length,
    kappa: w.kappa,
    se: w.se,
    note: w.kappa === null ? "undefined: both raters put every task in one category" : "",
  };
}

/**
 * Agreement with human labels (see the module docs): gold typology vs human label per task, and
 * the strict grader against gold vs the same grader against the human label per completion.
 * Empty when no evaluated task has a human label.
 */
export function humanAgreement(
  variants: ReadonlyArray<VariantScores>,
  rows: ReadonlyArray<TaskRow>,
  humanLabels: ReadonlyMap<string, string>,
  strict: RewardSpec = { name: PRIMARY_GRADER },
): Agreement[] {
  const labelled = rows.filter((r) => humanLabels.has(r.id));
  if (labelled.length === 0) return [];
  const out: Agreement[] = [];
  const gold = kappaOf(
    "gold typology vs human label (tasks)",
    labelled.map((r) => r.typology),
    labelled.map((r) => humanLabels.get(r.id)!),
  );
  if (gold) out.push(gold);
  const grader = buildReward(strict);
  const byId = new Map(labelled.map((r) => [r.id, r]));
  for (const v of variants) {
    const r1: number[] = [];
    const r2: number[] = [];
    for (const t of v.tasks) {
      const row = byId.get(t.taskId);
      if (!row) continue;
      for (const s of t.samples) {
        const vsGold = grader.score(s.completion, row.answers);
        const vsHuman = grader.score(s.completion, [humanLabels.get(row.id)!]);
        if (vsGold === null || vsHuman === null) continue;
        r1.push(vsGold);
        r2.push(vsHuman);
      }
    }
    const k = kappaOf(`${strict.name} vs gold vs ${strict.name} vs human label (${v.name})`, r1, r2);
    if (k) out.push(k);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The eval record (agent-evals/runs/<run_id>/eval.json)

/** The model as requested and as the sidecar resolved it. */
export interface ModelRef {
  /** "" = the embedded default */
  requested: string;
  /** the sidecar's EvaluateResult.base_model (a local folder or a hub id) */
  resolved: string;
}

/** Identity of a resolved model for comparability: a local folder's name (the embedded model's
 *  name carries a content hash), or the hub id itself. */
export function modelIdentity(resolved: string): string {
  return resolved.startsWith("/") ? resolved.replace(/\/+$/, "").split("/").pop()! : resolved;
}

export interface TaskSetRef {
  path: string;
  sha256: string;
  split: Split;
  /** tasks evaluated */
  n: number;
}

export function taskSetRef(ts: TaskSet): TaskSetRef {
  return { path: ts.path, sha256: ts.sha256, split: ts.split, n: ts.rows.length };
}

/** One variant's summary in eval.json. Scores are fractions; null = unscorable. */
export interface VariantSummary {
  name: string;
  /** per-task primary-grader score */
  perTask: Record<string, number | null>;
  accuracy: Accuracy | null;
  /** mean over tasks of the per-task mean, per grader (fraction; null if none scorable) */
  meanScores: Record<string, number | null>;
  graderAgreement: Agreement | null;
  /** with K > 1 samples per task: mean over tasks of the unbiased pass@k (Chen et al. 2021) of the
   *  primary grader, for k = 1 (= mean accuracy) and k = K; absent with one sample */
  passAtK?: Array<{ k: number; estimate: number; tasks: number }>;
}

/** The eval record's file name inside agent-evals/runs/<run_id>/. */
export const EVAL_FILE = "eval.json";

export interface EvalRecord {
  schema: "agent-eval/v1";
  runId: string;
  /** ISO 8601 */
  date: string;
  model: ModelRef;
  taskSet: TaskSetRef;
  settings: EvalSettings;
  /** scores compared in TS re-grading (all equal, or this file would not exist) */
  regradedScores: number;
  seconds: number;
  variants: VariantSummary[];
  /** the eval's own base vs the adapter (the report prefers baseline.json's base when it matches) */
  comparison: Comparison | null;
  humanAgreement: Agreement[];
  /** adapter vs base per typology on this split, Holm-adjusted across typologies */
  byTypology?: TypologyComparison[];
  /** the held-out-template split, evaluated in the same request (absent for older records) */
  heldOutTemplate?: SplitResult | null;
  /** the sidecar's EvaluateResult, proto JSON (NaN as "NaN") */
  result: JsonValue;
}

/** One more split of the same eval: its own base vs adapter (no baseline.json for it). */
export interface SplitResult {
  taskSet: TaskSetRef;
  regradedScores: number;
  variants: VariantSummary[];
  comparison: Comparison | null;
  byTypology: TypologyComparison[];
}

/** Adapter - base on one typology's tasks. */
export interface TypologyComparison {
  typology: string;
  n: number;
  /** null without a paired task (JSON has no NaN) */
  baseAccuracy: number | null;
  adapterAccuracy: number | null;
  delta: number | null;
  /** the decision interval (Tango for 0/1, paired t otherwise); null when n < 2 */
  lower: number | null;
  upper: number | null;
  test: string;
  /** the governing test's p (exact McNemar for 0/1; paired t otherwise); null when n < 2 */
  p: number | null;
  /** Holm-adjusted across the typologies with a p */
  pHolm: number | null;
}

/** Per-typology adapter - base with the governing test's p, Holm-adjusted across typologies. */
export function typologyBreakdown(
  base: ReadonlyMap<string, number>,
  candidate: ReadonlyMap<string, number>,
  rows: ReadonlyArray<Pick<TaskRow, "id" | "typology">>,
): TypologyComparison[] {
  const byTypology = new Map<string, string[]>();
  for (const r of rows) byTypology.set(r.typology, [...(byTypology.get(r.typology) ?? []), r.id]);
  const out: TypologyComparison[] = [];
  for (const [typology, ids] of [...byTypology].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) {
    const pick = (m: ReadonlyMap<string, number>) => new Map(ids.filter((id) => m.has(id)).map((id) => [id, m.get(id)!]));
    const c = compareScores(pick(base), pick(candidate));
    const p = c.paired;
    // means over the paired tasks (also for a single pair, where there is no comparison object)
    let sa = 0;
    let sb = 0;
    for (const id of c.taskIds) {
      sa += base.get(id)!;
      sb += candidate.get(id)!;
    }
    const mean = (x: number) => (c.n > 0 ? x / c.n : null);
    out.push({
      typology,
      n: c.n,
      baseAccuracy: mean(sa),
      adapterAccuracy: mean(sb),
      delta: c.n > 0 ? (p ? p.meanDiff : sb / c.n - sa / c.n) : null,
      lower: c.decision ? c.decision.lower : null,
      upper: c.decision ? c.decision.upper : null,
      test: c.decision ? c.decision.test : "-",
      p: c.decision ? (c.decision.p ?? (p ? p.tTestP : null)) : null,
      pHolm: null,
    });
  }
  const withP = out.filter((t) => t.p !== null);
  if (withP.length > 0) {
    const adj = holmAdjust(withP.map((t) => t.p!));
    withP.forEach((t, i) => (t.pHolm = adj[i]));
  }
  return out;
}

/** Re-grade and summarise one more split of an Evaluate result (pure). */
export function splitResult(settings: EvalSettings, taskSet: TaskSet, result: EvaluateResult): SplitResult {
  const regradedScores = regrade(result.variants, taskSet.rows, settings.graders);
  const variants = result.variants.map((v) => summarizeVariant(v, settings.graders));
  const base = variants.find((v) => v.name === "base");
  const cand = variants.find((v) => v.name === ADAPTER_VARIANT);
  const templates = new Map(taskSet.rows.map((r) => [r.id, r.template]));
  return {
    taskSet: taskSetRef(taskSet),
    regradedScores,
    variants,
    comparison: base && cand ? compareScores(scoresOf(base.perTask), scoresOf(cand.perTask), undefined, templates) : null,
    byTypology: base && cand ? typologyBreakdown(scoresOf(base.perTask), scoresOf(cand.perTask), taskSet.rows) : [],
  };
}

function nullIfNaN(x: number): number | null {
  return Number.isNaN(x) ? null : x;
}

export function summarizeVariant(v: VariantScores, graders: ReadonlyArray<RewardSpec>): VariantSummary {
  const perTask = perTaskScores(v);
  const meanScores: Record<string, number | null> = {};
  for (const g of graders) {
    const xs = [...perTaskScores(v, g.name).values()].filter((x) => !Number.isNaN(x));
    meanScores[g.name] = xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
  }
  const summary: VariantSummary = {
    name: v.name,
    perTask: Object.fromEntries([...perTask].map(([id, x]) => [id, nullIfNaN(x)])),
    accuracy: accuracy(perTask.values()),
    meanScores,
    graderAgreement: graderAgreement(v),
  };
  const pk = meanPassAtK(v);
  if (pk.length > 0) summary.passAtK = pk;
  return summary;
}

/**
 * Mean over tasks of the unbiased pass@k of the primary grader (a sample counts as correct when it
 * scores 1); each task uses its own scorable samples n >= k. Empty when every task has 1 sample.
 */
export function meanPassAtK(variant: VariantScores, grader = PRIMARY_GRADER): Array<{ k: number; estimate: number; tasks: number }> {
  const counts = variant.tasks.map((t) => {
    const xs = t.samples.map((s) => s.scores[grader]).filter((x) => x !== undefined && !Number.isNaN(x));
    return { n: xs.length, c: xs.filter((x) => x === 1).length };
  });
  const maxK = Math.max(0, ...counts.map((c) => c.n));
  if (maxK < 2) return [];
  const out: Array<{ k: number; estimate: number; tasks: number }> = [];
  for (const k of [1, maxK]) {
    const usable = counts.filter((c) => c.n >= k);
    if (usable.length === 0) continue;
    let sum = 0;
    for (const c of usable) sum += passAtK(c.n, c.c, k);
    out.push({ k, estimate: sum / usable.length, tasks: usable.length });
  }
  return out;
}

/** Per-task scores back from a summary (null -> NaN). */
export function scoresOf(perTask: Record<string, number | null>): Map<string, number> {
  return new Map(Object.entries(perTask).map(([id, x]) => [id, x === null ? NaN : x]));
}

/** Checks that the graders the harness relies on are present. */
export function checkSettings(settings: EvalSettings): void {
  for (const name of [PRIMARY_GRADER, LENIENT_GRADER]) {
    if (!settings.graders.some((g) => g.name === name)) throw new Error(`eval settings: graders must include ${name}`);
  }
  for (const g of settings.graders) buildReward(g); // fail here, not after minutes of generation
}

/** Re-grade a finished Evaluate result and build the eval record (pure; no I/O). */
export function buildEvalRecord(
  runId: string,
  settings: EvalSettings,
  taskSet: TaskSet,
  result: EvaluateResult,
  date = new Date(),
): EvalRecord {
  const regradedScores = regrade(result.variants, taskSet.rows, settings.graders);
  const variants = result.variants.map((v) => summarizeVariant(v, settings.graders));
  const base = variants.find((v) => v.name === "base");
  const cand = variants.find((v) => v.name === ADAPTER_VARIANT);
  return {
    schema: "agent-eval/v1",
    runId,
    date: date.toISOString(),
    model: { requested: settings.baseModel, resolved: result.baseModel },
    taskSet: taskSetRef(taskSet),
    settings,
    regradedScores,
    seconds: result.seconds,
    variants,
    comparison: base && cand ? compareScores(scoresOf(base.perTask), scoresOf(cand.perTask), undefined, new Map(taskSet.rows.map((r) => [r.id, r.template]))) : null,
    humanAgreement: humanAgreement(result.variants, taskSet.rows, taskSet.humanLabels),
    byTypology: base && cand ? typologyBreakdown(scoresOf(base.perTask), scoresOf(cand.perTask), taskSet.rows) : [],
    heldOutTemplate: null,
    result: toJson(EvaluateResultSchema, result),
  };
}

/** Write runs/<run_id>/eval.json atomically; returns its path. */
export function writeEvalRecord(evalsDir: string, record: EvalRecord): string {
  const dir = runDir(evalsDir, record.runId);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, EVAL_FILE);
  writeFileAtomic(path, JSON.stringify(record, null, 2) + "\n");
  return path;
}

/**
 * The held-out-template companion of an in-distribution test set: the same file's
 * "test_heldout_template" rows (same limit), or null when the evaluated split is not "test" or the
 * file has none.
 */
export function heldOutTemplateSetFor(taskSet: TaskSet): TaskSet | null {
  if (taskSet.split !== "test") return null;
  const path = resolve(REPO_ROOT, taskSet.path);
  const rows = splitTasks(loadTasks(path), "test_heldout_template");
  if (rows.length === 0) return null;
  return { ...taskSet, split: "test_heldout_template", rows: taskSet.limit > 0 ? rows.slice(0, taskSet.limit) : rows };
}

/** An Evaluate result restricted to some task ids (the variants keep their order). */
export function restrictResult(result: EvaluateResult, ids: ReadonlySet<string>): EvaluateResult {
  return { ...result, variants: result.variants.map((v) => ({ ...v, tasks: v.tasks.filter((t) => ids.has(t.taskId)) })) };
}

/**
 * Evaluate base and the run's adapter on the task set, re-grade, and build the record. When the
 * set is the in-distribution "test" split, its held-out-template companion goes in the SAME
 * Evaluate request (one model load) and comes back as the record's `heldOutTemplate`.
 */
export async function evaluateRun(
  client: SidecarClient,
  runId: string,
  settings: EvalSettings,
  taskSet: TaskSet,
  onProgress?: (p: EvaluateProgress) => void,
  heldOut: TaskSet | null = heldOutTemplateSetFor(taskSet),
): Promise<EvalRecord> {
  checkSettings(settings);
  const combined = heldOut ? { ...taskSet, rows: [...taskSet.rows, ...heldOut.rows] } : taskSet;
  const req = evaluateRequest(settings, combined, [{ name: ADAPTER_VARIANT, runId }]);
  const result = await runEvaluate(client, req, onProgress);
  const main = restrictResult(result, new Set(taskSet.rows.map((r) => r.id)));
  const record = buildEvalRecord(runId, settings, taskSet, main);
  if (heldOut) {
    const held = restrictResult(result, new Set(heldOut.rows.map((r) => r.id)));
    record.heldOutTemplate = splitResult(settings, heldOut, held);
    record.regradedScores += record.heldOutTemplate.regradedScores;
  }
  return record;
}

/** A progress printer shared by the eval, baseline and demo commands. */
export function progressPrinter(prefix: string): (p: EvaluateProgress) => void {
  const tty = process.stdout.isTTY;
  return (p) => {
    const line = `${prefix}: ${p.variant} ${p.tasksDone}/${p.tasksTotal} tasks`;
    if (tty) process.stdout.write(`\r${line.padEnd(60)}${p.tasksDone === p.tasksTotal ? "\n" : ""}`);
    else if (p.tasksDone === p.tasksTotal) console.log(line);
  };
}
