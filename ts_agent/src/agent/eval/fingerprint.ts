/**
 * An evaluation's fingerprint: everything that can change a score, recorded in baseline.json and
 * eval.json and compared field by field (docs/verdict.md, "The fingerprint").
 *
 * - The agent knows the task set, the grader and the decoding it asked for; the sidecar reports
 *   what it resolved at run time (EvaluateResult.fingerprint: weights sha256, hub revision, prompt
 *   format and chat template sha256, device, dtype, library versions).
 * - A difference in what changes the prompt, the model, the decoding, the grader or the task set
 *   gates the verdict, and so do device and dtype (bf16 vs fp32 changes greedy completions);
 *   batch size and library versions only warn. A greedy eval ignores the seed and top_p.
 * - A file written before the fingerprint existed still reads: what it did not record is "not
 *   recorded", named by the report as a check that could not be made, and never gates by itself.
 */
import { createHash } from "node:crypto";

import { codeRevision, type CodeRevision } from "../code-revision.js";
import type { Fingerprint } from "../core/eval-log.js";
import type { EvalFingerprint } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { buildReward, rewardNames, type ParamValue } from "../core/task-rewards.js";
import { modelIdentity, primaryGrader } from "./evaluate.js";
import { type EvalSettings, type ModelRef } from "../core/eval-log.js";
import type { TaskSetRef } from "../core/eval-log.js";

/** The primary grader with every param filled in (what "same grader" means). */
export interface GraderRef {
  name: string;
  params: Record<string, ParamValue>;
}

export function primaryGraderRef(settings: EvalSettings): GraderRef {
  const primary = primaryGrader(settings);
  // an agent task's scorer is TS code with no params: the task file's sha256 (taskSet.sha256) names it
  if (!rewardNames().includes(primary.name)) return { name: primary.name, params: {} };
  const built = buildReward(primary);
  return { name: built.name, params: built.params };
}

function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** "exact_match (case_sensitive=false, tag=answer)": params in key order. */
function graderText(g: GraderRef): string {
  const params = Object.keys(g.params)
    .sort()
    .map((k) => `${k}=${JSON.stringify(g.params[k])}`);
  return params.length ? `${g.name} (${params.join(", ")})` : g.name;
}

/** The fingerprint of an evaluation: what the agent asked for, and what the sidecar resolved
 *  (`runtime`, EvaluateResult.fingerprint; absent for a file written before it existed). */
export function buildFingerprint(a: {
  settings: EvalSettings;
  taskSet: TaskSetRef;
  taskIds: Iterable<string>;
  model: ModelRef | { requested: string; resolved: null };
  grader?: GraderRef;
  runtime?: EvalFingerprint | null;
}): Fingerprint {
  const s = a.settings;
  const r = a.runtime ?? null;
  const greedy = s.temperature === 0;
  return {
    taskSet: { sha256: a.taskSet.sha256, split: a.taskSet.split, n: a.taskSet.n, idsSha256: sha256Hex([...a.taskIds].sort().join("\n")) },
    grader: graderText(a.grader ?? primaryGraderRef(s)),
    model: { requested: a.model.requested, resolved: a.model.resolved, weightsSha256: r ? r.weightsSha256 : null, revision: r ? r.revision : null },
    prompt: { format: r ? r.promptFormat : null, chatTemplateSha256: r ? r.chatTemplateSha256 : null },
    decoding: {
      temperature: s.temperature,
      topP: r ? r.topP : null,
      maxNewTokens: s.maxNewTokens,
      samplesPerTask: s.samplesPerTask,
      seed: greedy ? null : s.seed,
    },
    runtime: {
      device: r ? r.device : null,
      dtype: r ? r.dtype : null,
      batchSize: r && r.batchSize ? r.batchSize : s.batchSize,
      libraries: r ? { ...r.libraryVersions } : null,
    },
    code: { sidecar: r ? sidecarRevision(r) : null, agent: codeRevision() },
  };
}

/** The sidecar's CodeRevision as the wire carries it; null when an older sidecar did not report one. */
function sidecarRevision(r: EvalFingerprint): CodeRevision | null {
  const c = r.codeRevision;
  if (!c || (!c.graderSha256 && !c.packageVersion)) return null;
  return { packageVersion: c.packageVersion, gitCommit: c.gitCommit, gitDirty: c.gitCommit ? c.gitDirty : null, graderSha256: c.graderSha256 };
}

/** "1a2b3c4d5e6f (dirty)": a commit as a fingerprint row shows it. */
function commitText(c: CodeRevision | null | undefined): string | null {
  if (!c) return null;
  if (!c.gitCommit) return "(not a git checkout)";
  return `${c.gitCommit.slice(0, 12)}${c.gitDirty ? " (dirty)" : ""}`;
}

// ---------------------------------------------------------------------------------------------
// Comparing two fingerprints

/** What a difference in a field does to the verdict. */
export type FieldEffect = "gates" | "warns";

/** One field of baseline.json's fingerprint against the eval's. */
export interface FingerprintRow {
  /** e.g. "decoding.max_new_tokens" */
  field: string;
  baseline: string;
  eval: string;
  effect: FieldEffect;
  /** "ignored": the field cannot matter here (the seed of a greedy eval); "subset": the eval
   *  scored some of the baseline's tasks (every one of them in it), which does not gate */
  status: "same" | "differs" | "not recorded" | "ignored" | "subset";
  /** why a row is ignored or how it was compared */
  note?: string;
}

const NOT_RECORDED = "not recorded";

function show(x: unknown): string {
  if (x === null || x === undefined) return NOT_RECORDED;
  if (typeof x === "string") return x === "" ? "(none)" : /^[0-9a-f]{64}$/.test(x) ? `${x.slice(0, 12)}…` : x;
  return String(x);
}

/**
 * Compare baseline.json's fingerprint with an eval's, field by field. `ids` are the task ids each
 * side holds: the baseline must hold every task the eval scored (it may hold more).
 */
export function compareFingerprints(b: Fingerprint, e: Fingerprint, ids?: { baseline: Iterable<string>; eval: Iterable<string> }): FingerprintRow[] {
  const rows: FingerprintRow[] = [];
  const add = (field: string, x: unknown, y: unknown, effect: FieldEffect, opts: { ignored?: string; note?: string } = {}) => {
    const status = opts.ignored ? "ignored" : x === null || x === undefined || y === null || y === undefined ? "not recorded" : x === y ? "same" : "differs";
    const shown = (v: unknown) => (opts.ignored && (v === null || v === undefined) ? "-" : show(v));
    rows.push({ field, baseline: shown(x), eval: shown(y), effect, status, note: opts.ignored ?? opts.note });
  };
  add("task_set.sha256", b.taskSet.sha256, e.taskSet.sha256, "gates");
  add("task_set.split", b.taskSet.split, e.taskSet.split, "gates");
  if (ids) {
    const have = new Set(ids.baseline);
    const evalIds = [...ids.eval];
    const missing = evalIds.filter((id) => !have.has(id));
    rows.push({
      field: "task_set.task_ids",
      baseline: `${have.size} tasks`,
      eval: `${evalIds.length} tasks`,
      effect: "gates",
      status: missing.length ? "differs" : evalIds.length < have.size ? "subset" : "same",
      note: missing.length
        ? `${missing.length} evaluated task(s) are not in the baseline, e.g. ${missing.slice(0, 3).join(", ")}`
        : evalIds.length < have.size
          ? `the eval scored ${evalIds.length} of the baseline's ${have.size} tasks (judged on those ${evalIds.length})`
          : "every evaluated task is in the baseline",
    });
  } else {
    add("task_set.task_ids", b.taskSet.idsSha256, e.taskSet.idsSha256, "gates", { note: "sha256 of the sorted ids" });
  }
  add("grader", b.grader, e.grader, "gates");
  add("model.requested", b.model.requested || "(embedded default)", e.model.requested || "(embedded default)", "gates");
  // With both weights hashes at hand, the folder's name only warns (the same weights can live
  // under another path); without them the name is all there is, and it gates.
  const byWeights = !!b.model.weightsSha256 && !!e.model.weightsSha256;
  const identity = (resolved: string | null) => (resolved === null ? null : modelIdentity(resolved));
  add("model.resolved", identity(b.model.resolved), identity(e.model.resolved), byWeights ? "warns" : "gates", {
    note: "a local folder by its name, a hub id as is",
  });
  add("model.weights_sha256", b.model.weightsSha256, e.model.weightsSha256, "gates");
  add("model.revision", b.model.revision, e.model.revision, "gates");
  add("prompt.format", b.prompt.format, e.prompt.format, "gates");
  add("prompt.chat_template_sha256", b.prompt.chatTemplateSha256, e.prompt.chatTemplateSha256, "gates");
  const greedy = b.decoding.temperature === 0 || e.decoding.temperature === 0;
  add("decoding.temperature", b.decoding.temperature, e.decoding.temperature, "gates");
  add("decoding.top_p", b.decoding.topP, e.decoding.topP, "gates", greedy ? { ignored: "greedy decoding: top_p cannot matter" } : {});
  add("decoding.max_new_tokens", b.decoding.maxNewTokens, e.decoding.maxNewTokens, "gates");
  add("decoding.samples_per_task", b.decoding.samplesPerTask, e.decoding.samplesPerTask, "gates");
  add("decoding.seed", b.decoding.seed, e.decoding.seed, "gates", greedy ? { ignored: "greedy decoding: the seed cannot matter" } : {});
  add("runtime.device", b.runtime.device, e.runtime.device, "gates");
  add("runtime.dtype", b.runtime.dtype, e.runtime.dtype, "gates");
  add("runtime.batch_size", b.runtime.batchSize, e.runtime.batchSize, "warns");
  // A grader-code change can change every score: it gates. The commits only say which code ran.
  add("code.sidecar.grader_sha256", b.code?.sidecar?.graderSha256, e.code?.sidecar?.graderSha256, "gates");
  add("code.agent.grader_sha256", b.code?.agent?.graderSha256, e.code?.agent?.graderSha256, "gates");
  add("code.sidecar.git_commit", commitText(b.code?.sidecar), commitText(e.code?.sidecar), "warns");
  add("code.agent.git_commit", commitText(b.code?.agent), commitText(e.code?.agent), "warns");
  if (b.runtime.libraries === null || e.runtime.libraries === null) {
    add("runtime.library_versions", b.runtime.libraries && "recorded", e.runtime.libraries && "recorded", "warns");
  } else {
    for (const lib of [...new Set([...Object.keys(b.runtime.libraries), ...Object.keys(e.runtime.libraries)])].sort()) {
      add(`runtime.library_versions.${lib}`, b.runtime.libraries[lib] ?? "(absent)", e.runtime.libraries[lib] ?? "(absent)", "warns");
    }
  }
  return rows;
}

/** "decoding.max_new_tokens: 16 vs 32" (baseline first): one line per differing field. */
export function rowText(r: FingerprintRow): string {
  return r.note && r.field === "task_set.task_ids" ? `${r.field}: ${r.note}` : `${r.field}: ${r.baseline} vs ${r.eval}`;
}

/** The differences that gate the verdict, one line each. */
export function fingerprintGates(rows: ReadonlyArray<FingerprintRow>): string[] {
  return rows.filter((r) => r.status === "differs" && r.effect === "gates").map(rowText);
}

/** The differences that only warn, one line each. */
export function fingerprintWarnings(rows: ReadonlyArray<FingerprintRow>): string[] {
  return rows.filter((r) => r.status === "differs" && r.effect === "warns").map(rowText);
}

/** The fields one side did not record: the checks that could not be made. */
export function fingerprintUnchecked(rows: ReadonlyArray<FingerprintRow>): string[] {
  return rows.filter((r) => r.status === "not recorded").map((r) => r.field);
}
