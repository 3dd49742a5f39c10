/**
 * Judging an agent task's eval (docs/agents.md): base vs adapter episodes on the test tasks, the
 * task as the unit (the primary scorer's mean over a task's K episodes), the paired statistics of
 * core/stats (exact McNemar and Tango's interval when every per-task score is 0/1, else the paired
 * t interval), the required n, and a verdict that says INCONCLUSIVE when the data cannot tell.
 * Also what CI users of evalite/promptfoo expect: JUnit XML and a JSON summary.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";

import type { AgentSpecSchema, EvaluateResult, TaskRowSchema } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { pairedComparison, requiredNForDelta, tangoScoreInterval, type Interval } from "../core/stats/index.js";
import { primaryScorer, type AgentTask, type AgentTaskRow } from "./define.js";
import { DEFAULT_LIMITS } from "./tool-host.js";

/** The milestone's downstream threshold: +5 pp (docs/verdict.md). */
export const THRESHOLD = 0.05;

export function rowsOf(task: AgentTask, split: "train" | "test"): AgentTaskRow[] {
  return task.tasks.filter((r) => (r.split ?? "train") === split);
}

export function taskRows(rows: AgentTaskRow[]): Array<MessageInitShape<typeof TaskRowSchema>> {
  return rows.map((r) => ({ id: r.id, prompt: r.prompt, answers: typeof r.answer === "string" ? [r.answer] : [] }));
}

/** The AgentSpec of a task, its tools served at `address`. */
export function agentSpec(task: AgentTask, address: string): MessageInitShape<typeof AgentSpecSchema> {
  const limits = { ...DEFAULT_LIMITS, ...task.limits };
  return {
    tools: Object.entries(task.tools).map(([name, t]) => ({ name, description: t.description, parametersJson: JSON.stringify(t.parameters) })),
    scorers: Object.entries(task.scorers).map(([name, s]) => ({ name, weight: s.weight ?? 1 })),
    maxTurns: limits.maxTurns, maxToolCalls: limits.maxToolCalls, toolTimeoutMs: limits.toolTimeoutMs,
    maxToolOutputChars: limits.maxToolOutputChars, toolHost: address, systemPrompt: task.systemPrompt ?? "",
  };
}

export interface VariantEpisodes {
  name: string;
  /** per task (test order): the primary scorer's mean over its episodes */
  perTask: number[];
  success: number;
  turns: number;
  toolCalls: number;
  toolErrors: number;
  unknownToolCalls: number;
  malformedCalls: number;
  /** share of episodes that ended at a limit, not with an answer */
  limitsHit: number;
}

export interface AgentJudgement {
  primary: string;
  n: number;
  base: VariantEpisodes;
  adapter: VariantEpisodes;
  delta: number;
  ci: Interval;
  /** which test governs: "exact McNemar / Tango score interval" or "paired t" */
  method: string;
  p: number;
  requiredN: number | null;
  verdict: "CONFIRMED" | "PASS" | "FAIL" | "INCONCLUSIVE";
  reason: string;
}

function variantEpisodes(result: EvaluateResult, name: string, primary: string): VariantEpisodes {
  const v = result.variants.find((x) => x.name === name);
  if (!v) throw new Error(`the Evaluate result has no variant ${name}`);
  const samples = v.tasks.flatMap((t) => t.samples);
  const share = (f: (s: (typeof samples)[number]) => number) => samples.reduce((acc, s) => acc + f(s), 0) / Math.max(samples.length, 1);
  const perTask = v.tasks.map((t) => t.samples.reduce((acc, s) => acc + (s.scores[primary] ?? 0), 0) / t.samples.length);
  return {
    name, perTask, success: perTask.reduce((a, b) => a + b, 0) / Math.max(perTask.length, 1),
    turns: share((s) => s.episode?.turns ?? 0), toolCalls: share((s) => s.episode?.toolCalls ?? 0),
    toolErrors: share((s) => s.episode?.toolErrors ?? 0), unknownToolCalls: share((s) => s.episode?.unknownToolCalls ?? 0),
    malformedCalls: share((s) => s.episode?.malformedCalls ?? 0), limitsHit: share((s) => (s.episode?.endedBy === "answer" ? 0 : 1)),
  };
}

/** Base vs adapter, task by task. */
export function judgeAgentEval(task: AgentTask, result: EvaluateResult, adapterName = "adapter"): AgentJudgement {
  const primary = primaryScorer(task);
  const base = variantEpisodes(result, "base", primary);
  const adapter = variantEpisodes(result, adapterName, primary);
  const n = base.perTask.length;
  if (n < 2) {
    return { primary, n, base, adapter, delta: adapter.success - base.success, ci: { lower: NaN, upper: NaN }, method: "none", p: NaN, requiredN: null,
      verdict: "INCONCLUSIVE", reason: `${n} test task(s): too few to carry an interval; add test tasks` };
  }
  const cmp = pairedComparison(base.perTask, adapter.perTask);
  let ci: Interval;
  let method: string;
  let p: number;
  if (cmp.binary && cmp.discordant) {
    const t = tangoScoreInterval(cmp.discordant.b, cmp.discordant.c, n);
    ci = { lower: t.lower, upper: t.upper };
    method = "exact McNemar p, Tango score 95% CI";
    p = cmp.mcnemarP ?? 1;
  } else {
    ci = cmp.ciT;
    method = "paired t test and 95% t CI over per-task means";
    p = cmp.tTestP;
  }
  const delta = cmp.meanDiff;
  const requiredN = delta !== 0 && cmp.sdDiff > 0 ? Math.ceil(requiredNForDelta(Math.abs(delta), cmp.sdDiff)) : null;
  let verdict: AgentJudgement["verdict"];
  let reason: string;
  if (ci.lower >= THRESHOLD && p < 0.05) {
    verdict = "CONFIRMED";
    reason = `the CI's lower bound ${pp(ci.lower)} clears +5 pp`;
  } else if (delta >= THRESHOLD && ci.lower > 0 && p < 0.05) {
    verdict = "PASS";
    reason = `delta ${pp(delta)} >= +5 pp and the CI excludes 0`;
  } else if (ci.upper < 0 && p < 0.05) {
    verdict = "FAIL";
    reason = `a significant regression: ${pp(delta)}, CI ${pp(ci.lower)} to ${pp(ci.upper)}`;
  } else if (ci.upper < THRESHOLD) {
    verdict = "FAIL";
    reason = `the CI's upper bound ${pp(ci.upper)} is below +5 pp: no improvement of the size sought`;
  } else {
    verdict = "INCONCLUSIVE";
    reason = requiredN !== null && requiredN > n
      ? `the CI includes 0 at n=${n}; about ${requiredN} test tasks would detect ${pp(delta)} (alpha .05, power .8)`
      : `the CI includes 0 at n=${n}`;
  }
  return { primary, n, base, adapter, delta, ci, method, p, requiredN, verdict, reason };
}

/** Percentage points, one decimal (the method's precision at these n). */
export function pp(x: number): string {
  return Number.isFinite(x) ? `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)} pp` : "n/a";
}

function xml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** JUnit XML: one testcase per test task (the adapter's episodes), failed when its primary score < 0.5. */
export function junitXml(task: AgentTask, result: EvaluateResult, j: AgentJudgement, adapterName = "adapter"): string {
  const v = result.variants.find((x) => x.name === adapterName)!;
  const cases = v.tasks.map((t, i) => {
    const score = j.adapter.perTask[i];
    const last = t.samples[0];
    const body = score >= 0.5 ? "" : `<failure message="${xml(`${j.primary} = ${score.toFixed(2)}`)}">${xml(`final answer: ${last?.completion ?? ""}`)}</failure>`;
    return `    <testcase classname="${xml(task.name)}" name="${xml(t.taskId)}">${body}</testcase>`;
  });
  const failures = j.adapter.perTask.filter((s) => s < 0.5).length;
  return `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n  <testsuite name="${xml(`agent eval: ${task.name}`)}" tests="${cases.length}" failures="${failures}">\n` +
    `    <properties><property name="verdict" value="${j.verdict}"/><property name="delta" value="${j.delta}"/>` +
    `<property name="base_success" value="${j.base.success}"/><property name="adapter_success" value="${j.adapter.success}"/></properties>\n` +
    `${cases.join("\n")}\n  </testsuite>\n</testsuites>\n`;
}
