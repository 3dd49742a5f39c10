/**
 * agent-evals/runs/<run_id>/eval.json: the eval log, in the manner of inspect_ai's EvalLog. One
 * file holds
 *   - the spec: run id, date, model (requested and resolved), task set (path, sha256, split, n),
 *     the settings (graders, samples per task, decoding, seed);
 *   - the samples: `tasks` (each evaluated task's split, label, slice, template and accepted
 *     answers) and
 *     `result`, the sidecar's EvaluateResult as proto JSON: every variant's completion and
 *     per-grader score per task and sample, for both splits, with the sidecar's metadata (the
 *     resolved base model, seconds);
 *   - what is derived from those samples once, when the log is built, and never recomputed:
 *     the per-variant summaries (grading.ts: per-task scores, accuracy, grader agreement, pass@k),
 *     human agreement, and the same summaries for the held-out-template split.
 * No comparison is stored: the eval's base vs adapter, per split and per slice, is computed from
 * the per-task scores by verdict.ts (compareSplits), the one computation `agent eval`, report.md
 * and the milestone show. A log an older agent wrote carries its eval-time copy (`comparison`,
 * `bySlice`, and the same under `heldOutTemplate`); readEvalLog drops it.
 * This file is the schema, the reader and the writer; eval/build-eval-log.ts builds a log from an
 * Evaluate result.
 * The milestone (verdict.ts) re-judges a log against the current baseline.json from its per-task
 * scores and templates, so a log can be judged again later without re-running the eval.
 *
 * It also records its `fingerprint` (eval/fingerprint.ts: everything that can change a score,
 * compared with baseline.json's) and the `adapter` it evaluated (run id, the sha256 of its
 * adapter_model.safetensors as the sidecar loaded it, the run's step), so the report can refuse
 * to pair it with a run whose adapter has changed since. Logs written before either existed
 * still read; the report says which check could not be made.
 *
 * Schema "agent-eval/v2". An "agent-eval/v1" file (older agents) still reads: it has no `tasks`
 * (so no template-clustered row against baseline.json) and its `result` holds the test split
 * only; the report says so.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import type { JsonValue } from "@bufbuild/protobuf";

import type { CodeRevision } from "../code-revision.js";
import { runDir, writeFileAtomic } from "../workspace.js";
import type { RewardSpec } from "./task-rewards.js";
import type { Split } from "./task-format.js";

/** The eval log's file name inside agent-evals/runs/<run_id>/. */
export const EVAL_FILE = "eval.json";
/** The schema this agent writes. */
export const EVAL_LOG_SCHEMA = "agent-eval/v2";

/** What the log keeps of each evaluated task besides its scores (the prompt is in the task file,
 *  named by its sha256). */
export interface LoggedTask {
  split: Split;
  /** the gold class of a closed-label task */
  label?: string;
  /** the task's value of the task set's slice field (taskSet.sliceField) */
  slice?: string;
  /** absent when the task set has no templates */
  template?: string;
  /** the answers the grader accepts (absent in logs written before it was kept) */
  answers?: string[];
}

/** The adapter an eval scored, as the sidecar loaded it (EvaluateResult.adapters). */
export interface EvaluatedAdapter {
  /** "" for an adapter given by path */
  runId: string;
  /** sha256 of adapter_model.safetensors as loaded ("" when unknown) */
  sha256: string;
  /** the run's steps_completed when its adapter was saved; null when unknown */
  step: number | null;
}

export interface EvalLog {
  /** "agent-eval/v1" for a file an older agent wrote (see the module docs) */
  schema: typeof EVAL_LOG_SCHEMA | "agent-eval/v1";
  // -- spec
  runId: string;
  /** ISO 8601 */
  date: string;
  model: ModelRef;
  taskSet: TaskSetRef;
  settings: EvalSettings;
  /** everything that can change a score (absent in logs written before it was kept) */
  fingerprint?: Fingerprint;
  /** the adapter evaluated (absent in logs written before it was kept, or without an adapter) */
  adapter?: EvaluatedAdapter;
  // -- samples
  /** task id -> split, label, slice, template, for every task of both splits (absent in v1) */
  tasks?: Record<string, LoggedTask>;
  /** the sidecar's EvaluateResult, proto JSON (NaN as "NaN"): every sample's completion and scores */
  result: JsonValue;
  /** scores compared in TS re-grading (all equal, or this file would not exist) */
  regradedScores: number;
  // -- results
  variants: VariantSummary[];
  humanAgreement: Agreement[];
  /** the held-out-template split, evaluated in the same request (absent for older logs) */
  heldOutTemplate?: SplitResult | null;
  /** an agent task's eval (docs/agents.md): the file its tools and scorers came from; each
   *  sample's episode is in `result` (loggedEpisode reads it typed). Absent for a task file. */
  agentTask?: AgentTaskRef;
}

/** The agent task an eval or a run used: name, file and sha256 (the identity the fingerprint's
 *  taskSet.sha256 also carries), scorers (the primary, which the verdict judges, first), tools,
 *  limits. */
export interface AgentTaskRef {
  name: string;
  /** absolute path on the agent's machine */
  path: string;
  sha256: string;
  scorers: Array<{ name: string; weight: number }>;
  tools: string[];
  /** `rolloutTimeoutMs`: an agent program's (docs/agent-programs.md), absent for an agent task with tools */
  limits: { maxTurns: number; maxToolCalls: number; toolTimeoutMs: number; maxToolOutputChars: number; rolloutTimeoutMs?: number };
  /** sha256 of each part ("tools.<name>", "scorers.<name>", "limits", "system_prompt", "tasks", and an
   *  agent program's "program"):
   *  what a changed file is compared by (absent in logs written before it was kept) */
  parts?: Record<string, string>;
}

/** A message of an episode, typed (OpenAI chat format, as the sidecar's episode runner wrote it). */
export interface LoggedMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  name?: string;
  tool_call_id?: string;
  tool_calls?: Array<{ id: string; type: "function"; function: { name: string; arguments: Record<string, unknown> } }>;
}

/** One sample's episode as the eval log holds it: its messages, the tool calls made, its counts,
 *  why it ended, and the final answer the scorers were given. */
export interface LoggedEpisode {
  messages: LoggedMessage[];
  toolCalls: Array<{ name: string; arguments: Record<string, unknown> }>;
  turns: number;
  toolCallCount: number;
  toolErrors: number;
  unknownToolCalls: number;
  malformedCalls: number;
  /** "answer", "max_turns", "max_tool_calls" or "max_tokens" */
  endedBy: string;
  finalAnswer: string;
  scores: Record<string, number>;
}

/** A sample of `result` (proto JSON GradedSample) read as an episode; null for a single-turn sample. */
export function loggedEpisode(sample: {
  completion?: string;
  scores?: Record<string, number | string>;
  messagesJson?: string;
  episode?: Record<string, unknown>;
}): LoggedEpisode | null {
  if (!sample.episode && !sample.messagesJson) return null;
  const messages = JSON.parse(sample.messagesJson || "[]") as LoggedMessage[];
  const e = (sample.episode ?? {}) as Record<string, number | string | undefined>;
  const num = (k: string) => Number(e[k] ?? 0);
  return {
    messages,
    toolCalls: messages.flatMap((m) => (m.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments }))),
    turns: num("turns"),
    toolCallCount: num("toolCalls"),
    toolErrors: num("toolErrors"),
    unknownToolCalls: num("unknownToolCalls"),
    malformedCalls: num("malformedCalls"),
    endedBy: String(e.endedBy ?? ""),
    finalAnswer: sample.completion ?? "",
    scores: Object.fromEntries(Object.entries(sample.scores ?? {}).map(([k, v]) => [k, Number(v)])),
  };
}

/** One more split of the same eval: its variants' summaries (no baseline.json for it). */
export interface SplitResult {
  taskSet: TaskSetRef;
  regradedScores: number;
  variants: VariantSummary[];
}

/** The eval-time comparisons an older agent stored; read, they are dropped (see the module docs). */
const STALE_FIELDS = ["comparison", "bySlice"] as const;

/** The file a partial eval (`--limit N`) goes to when the run's eval.json covers more tasks. */
export function partialEvalFile(n: number): string {
  return `eval-limit-${n}.json`;
}

/**
 * Where a log goes: the run's eval.json, unless that file already holds an eval of more tasks of
 * the same split (a full one, then `--limit 5`): a subset never replaces a fuller record, it is
 * kept apart in eval-limit-<n>.json, and `keptApartFrom` names the record it left alone.
 */
export function evalLogDestination(evalsDir: string, log: EvalLog): { path: string; keptApartFrom: { path: string; n: number } | null } {
  const dir = runDir(evalsDir, log.runId);
  const main = join(dir, EVAL_FILE);
  if (existsSync(main)) {
    let existing: EvalLog | null = null;
    try {
      existing = readEvalLog(main);
    } catch {
      existing = null; // an unreadable eval.json is replaced
    }
    if (existing && existing.taskSet.split === log.taskSet.split && existing.taskSet.n > log.taskSet.n) {
      return { path: join(dir, partialEvalFile(log.taskSet.n)), keptApartFrom: { path: main, n: existing.taskSet.n } };
    }
  }
  return { path: main, keptApartFrom: null };
}

/** Write the log atomically where evalLogDestination says (runs/<run_id>/eval.json, or
 *  eval-limit-<n>.json beside a fuller one); returns its path. */
export function writeEvalLog(evalsDir: string, log: EvalLog): string {
  mkdirSync(runDir(evalsDir, log.runId), { recursive: true });
  const { path } = evalLogDestination(evalsDir, log);
  writeFileAtomic(path, JSON.stringify(log, null, 2) + "\n");
  return path;
}

/** Read an eval log (v2, or v1 from an older agent); throws on a file that is neither. */
export function readEvalLog(path: string): EvalLog {
  const log = JSON.parse(readFileSync(path, "utf8")) as EvalLog;
  if (log.schema !== EVAL_LOG_SCHEMA && log.schema !== "agent-eval/v1") {
    throw new Error(`${path}: not an eval log (schema ${JSON.stringify(log.schema)}; this agent reads ${EVAL_LOG_SCHEMA} and agent-eval/v1)`);
  }
  for (const part of [log, log.heldOutTemplate] as Array<Record<string, unknown> | null | undefined>) for (const f of STALE_FIELDS) if (part) delete part[f];
  return log;
}

/** The sentence a reader needs about a log an older agent wrote; "" for a current one. */
export function olderLogNote(log: EvalLog): string {
  if (log.schema === EVAL_LOG_SCHEMA) return "";
  return (
    `eval.json is from an older version of the agent (schema ${log.schema}, this agent writes ${EVAL_LOG_SCHEMA}): it has no per-task templates, ` +
    "so the comparison with baseline.json has no template-clustered row, and its samples cover the test split only; rerun `agent eval` to refresh it"
  );
}

// ---------------------------------------------------------------------------------------------
// The types inside the log (eval/ computes them: evaluate.ts, fingerprint.ts, grading.ts,
// task-set.ts, grader-agreement.ts)

/** How an evaluation is run. Baseline and eval must agree on all of it to be comparable. */
export interface EvalSettings {
  /** "" = the sidecar's embedded default model; else a path under its data root or a hub id */
  baseModel: string;
  split: Split;
  /** use the first `limit` tasks of the split, in file order (0 = all) */
  limit: number;
  /** every completion gets every grader's score; the first is the primary grader (PRIMARY_GRADER
   *  unless the task file's metadata names its graders); must include LENIENT_GRADER */
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

/** The model as requested and as the sidecar resolved it. */
export interface ModelRef {
  /** "" = the embedded default */
  requested: string;
  /** the sidecar's EvaluateResult.base_model (a local folder or a hub id) */
  resolved: string;
}

/** Everything that can change a score. null = not recorded (a file older than the fingerprint). */
export interface Fingerprint {
  taskSet: {
    sha256: string;
    split: string;
    n: number;
    /** sha256 of the sorted task ids joined by "\n" */
    idsSha256: string;
  };
  /** the primary grader, "name {params}" with params in key order */
  grader: string;
  model: {
    /** "" = the embedded default */
    requested: string;
    /** a local folder or a hub id, as the sidecar resolved it (null: not known without an Evaluate) */
    resolved: string | null;
    /** the sidecar's EvaluateResult.fingerprint.weights_sha256 ("" = no weight file at hand) */
    weightsSha256: string | null;
    /** a hub snapshot's commit hash ("" = a local folder) */
    revision: string | null;
  };
  prompt: {
    /** "raw" or "chat", as resolved */
    format: string | null;
    /** "" when the format is raw */
    chatTemplateSha256: string | null;
  };
  decoding: {
    /** 0 = greedy */
    temperature: number;
    topP: number | null;
    maxNewTokens: number;
    samplesPerTask: number;
    /** null when greedy (the seed cannot matter) */
    seed: number | null;
  };
  runtime: {
    /** torch device type: "cpu", "cuda", "mps" */
    device: string | null;
    /** "fp32", "bf16", "fp16" */
    dtype: string | null;
    batchSize: number;
    /** torch, transformers, peft, trl */
    libraries: Record<string, string> | null;
  };
  /** the code that produced the scores (absent in files written before it was kept; null = not reported) */
  code?: {
    /** the sidecar's, from EvaluateResult.fingerprint.code_revision */
    sidecar: CodeRevision | null;
    /** the agent's own (it re-grades every score) */
    agent: CodeRevision | null;
  };
}

/** A task set as a log or baseline names it (no rows). */
export interface TaskSetRef {
  path: string;
  sha256: string;
  split: Split;
  /** tasks evaluated */
  n: number;
  /** the field the per-slice tables group by (absent in older logs) */
  sliceField?: string;
  /** the row field holding the gold class (absent in older logs) */
  labelField?: string;
  /** the closed label set, or null for open answers (absent in older logs) */
  labels?: string[] | null;
  /** whether the tasks carry templates (absent in older logs) */
  hasTemplates?: boolean;
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
