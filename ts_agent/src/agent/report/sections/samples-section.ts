/**
 * Sample completions, base -> adapter: what each variant wrote on a few test tasks (TRL's
 * completions table, lm-eval's --log_samples), chosen deterministically by the primary grader's
 * per-task score: up to SHOWN.won tasks the adapter won and SHOWN.lost it lost (largest change first,
 * then file order), and SHOWN.same whose grade stayed (one whose text training changed first).
 * For each: the prompt (from the task file eval.json names, when it is still the one evaluated),
 * the expected answer, each variant's first sample verbatim in a fence that nothing inside can
 * close, cut at MAX_CHARS (prompts MAX_PROMPT_CHARS) with the cut said, and every grader's grade. The same for open-answer and
 * closed-label task sets: completions are shown as written, never read through a tag.
 */
import { fromJson } from "@bufbuild/protobuf";

import { EvaluateResultSchema, type GradedSample, type VariantResult } from "../../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { ADAPTER_VARIANT } from "../../core/base-vs-adapter.js";
import type { EvalLog, LoggedTask } from "../../core/eval-log.js";
import type { ReportSection } from "../analysis.js";
import { fenced } from "../markdown.js";

/** How many tasks of each kind are shown. */
export const SHOWN = { won: 2, lost: 2, same: 1 } as const;
/** A completion longer than this (characters) is cut, the cut said. */
export const MAX_CHARS = 800;
/** The same for a prompt (a case narrative is longer than an answer; the AML file's run to 818). */
export const MAX_PROMPT_CHARS = 2000;

interface Pick {
  taskId: string;
  base: number;
  adapter: number;
  /** the first samples' texts differ */
  textChanged: boolean;
}

const firstSample = (v: VariantResult, taskId: string): GradedSample | undefined => v.tasks.find((t) => t.taskId === taskId)?.samples[0];

/** Tasks with a score on both sides, in the eval's (file) order, split by how the grade moved. */
function partition(log: EvalLog, base: VariantResult, adapter: VariantResult): { won: Pick[]; lost: Pick[]; same: Pick[] } {
  const b = log.variants.find((v) => v.name === "base")?.perTask ?? {};
  const a = log.variants.find((v) => v.name === ADAPTER_VARIANT)?.perTask ?? {};
  const won: Pick[] = [];
  const lost: Pick[] = [];
  const same: Pick[] = [];
  for (const t of adapter.tasks) {
    const sb = b[t.taskId];
    const sa = a[t.taskId];
    if (sb === null || sb === undefined || sa === null || sa === undefined) continue;
    const pick = { taskId: t.taskId, base: sb, adapter: sa, textChanged: firstSample(base, t.taskId)?.completion !== t.samples[0]?.completion };
    (sa > sb ? won : sa < sb ? lost : same).push(pick);
  }
  // Array.prototype.sort is stable: equal changes keep file order
  won.sort((x, y) => y.adapter - y.base - (x.adapter - x.base));
  lost.sort((x, y) => y.base - y.adapter - (x.base - x.adapter));
  same.sort((x, y) => Number(y.textChanged) - Number(x.textChanged));
  return { won, lost, same };
}

const score = (x: number) => (Number.isNaN(x) ? "unscorable" : Number.isInteger(x) ? String(x) : x.toFixed(2));

/** "exact_match 1, format 0" in the log's grader order (the primary first). */
function grades(sample: GradedSample, graders: string[]): string {
  const names = [...graders, ...Object.keys(sample.scores).filter((k) => !graders.includes(k))];
  return names
    .filter((n) => n in sample.scores)
    .map((n) => `${n} ${score(sample.scores[n])}`)
    .join(", ");
}

function expected(task: LoggedTask | undefined): string {
  if (!task?.answers?.length) return task?.label !== undefined ? `Expected: \`${task.label}\` (label)` : "Expected: (not in this eval.json)";
  const quoted = (xs: string[]) => xs.map((x) => `\`${x}\``).join(", ");
  if (task.label !== undefined) return `Expected: \`${task.label}\` (label; the grader accepts ${quoted(task.answers)})`;
  const [first, ...rest] = task.answers;
  return `Expected: \`${first}\`${rest.length ? ` (also accepted: ${quoted(rest)})` : ""}`;
}

function completion(title: string, v: VariantResult, taskId: string, graders: string[], k: number, mean: number): string[] {
  const s = firstSample(v, taskId);
  if (!s) return [`${title}: (no sample)`, ""];
  const of = k > 1 ? ` (sample 1 of ${k}; task mean ${graders[0]} ${score(mean)})` : "";
  return [`${title}${of} — ${grades(s, graders)}:`, "", ...(s.completion === "" ? ["(an empty completion)"] : fenced(s.completion, MAX_CHARS)), ""];
}

export const sampleCompletions: ReportSection = (input) => {
  const log = input.evalLog;
  if (!log?.tasks || log.agentTask) return []; // an agent task's episodes: episodes-section.ts
  const result = fromJson(EvaluateResultSchema, log.result);
  const base = result.variants.find((v) => v.name === "base");
  const adapter = result.variants.find((v) => v.name === ADAPTER_VARIANT);
  if (!base || !adapter) return [];
  const graders = log.settings.graders.map((g) => g.name);
  const k = log.settings.samplesPerTask;
  const { won, lost, same } = partition(log, base, adapter);
  const prompts = input.prompts ?? { byId: {}, note: "" };
  const out: string[] = [
    "## Sample completions: base -> adapter",
    "",
    `What each variant wrote on a few ${log.taskSet.split} tasks (TRL's completions table, lm-eval's --log_samples). ` +
      `Of the ${won.length + lost.length + same.length} tasks scored on both sides, by the primary grader \`${graders[0]}\`'s per-task score` +
      `${k > 1 ? ` (mean over ${k} samples)` : ""}: ${won.length} won, ${lost.length} lost, ${same.length} with the same grade. ` +
      `Shown: up to ${SHOWN.won} won and ${SHOWN.lost} lost (the largest change first, then file order) and ${SHOWN.same} with the same grade ` +
      `(one whose text training changed first); each variant's first sample verbatim; a completion longer than ${MAX_CHARS} characters or a prompt longer than ${MAX_PROMPT_CHARS} is cut, the cut said. ` +
      "Every sample is in eval.json (`result`).",
    "",
  ];
  if (prompts.note) out.push(`_${prompts.note}._`, "");
  const show = (title: string, none: string, picks: Pick[], n: number) => {
    if (picks.length === 0) out.push(`### ${title}`, "", `(none: ${none})`, "");
    for (const p of picks.slice(0, n)) {
      const heading = title === "Same grade" ? `Same grade, ${p.textChanged ? "different" : "same"} text` : title;
      out.push(`### ${heading}: ${p.taskId}`, "", expected(log.tasks![p.taskId]), "");
      const prompt = prompts.byId[p.taskId];
      if (prompt !== undefined) out.push("Prompt (the task file's, before any chat template):", "", ...fenced(prompt, MAX_PROMPT_CHARS), "");
      out.push(...completion("Base", base, p.taskId, graders, k, p.base), ...completion("Adapter", adapter, p.taskId, graders, k, p.adapter));
    }
  };
  show("Won by the adapter", "the adapter won no task", won, SHOWN.won);
  show("Lost by the adapter", "the adapter lost no task", lost, SHOWN.lost);
  show("Same grade", "every task's grade changed", same, SHOWN.same);
  return out;
};
