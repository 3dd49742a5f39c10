/**
 * Issue 52, item 2: one verdict for every eval. K > 1 samples per task whose per-task gains are all
 * equal give a zero-width paired t interval; the agent eval's own copy of the decision called that
 * CONFIRMED (p = 0). The shared decision must not: an interval of width 0 bounds nothing.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { compareScores } from "../src/agent/core/base-vs-adapter.js";
import { downstreamCriterion } from "../src/agent/verdict/milestone.js";
import { downstreamEvidence } from "../src/agent/verdict/verdict.js";

test("K = 2 samples, every task 0/2 -> 1/2: a zero-width interval is never CONFIRMED", () => {
  const n = 240;
  const base = new Map(Array.from({ length: n }, (_, i) => [`t${i}`, 0] as [string, number]));
  const adapter = new Map(Array.from({ length: n }, (_, i) => [`t${i}`, 0.5] as [string, number]));
  const c = compareScores(base, adapter);
  assert.equal(c.decision?.lower, c.decision?.upper, "the paired t interval has no width here");
  const verdict = downstreamCriterion(downstreamEvidence(c, "the eval's own base variant"));
  assert.notEqual(verdict.verdict, "CONFIRMED", verdict.reason);
  assert.match(verdict.reason, /zero width|no spread/);
});

// ---------------------------------------------------------------------------------------------
// The same per-task scores through both entry points: a task file's eval log (graded completions)
// and an agent task's (its scorers' scores on episodes) give the same comparison and verdict.

import { create } from "@bufbuild/protobuf";

import { EvaluateResultSchema } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { agentEvalSettings } from "../src/agent/eval/agent-task-set.js";
import { buildEvalLog } from "../src/agent/eval/build-eval-log.js";
import { DEFAULT_EVAL_SETTINGS } from "../src/agent/eval/evaluate.js";
import type { TaskSet } from "../src/agent/eval/task-set.js";
import { judgeEval } from "../src/agent/verdict/verdict.js";
import { gradedResult, row } from "./helpers/eval-fixtures.js";

/** Per task, K sample outcomes (1 = right) of base and adapter. */
type Outcomes = Array<{ base: number[]; adapter: number[] }>;

function taskFileLog(outcomes: Outcomes) {
  const rows = outcomes.map((_, i) => row(`t${i}`, "structuring"));
  const text = (ok: number) => `<answer>${ok ? "structuring" : "smurfing"}</answer>`;
  const completions = (side: "base" | "adapter") => Object.fromEntries(rows.map((r, i) => [r.id, outcomes[i][side].map(text)]));
  const k = outcomes[0].base.length;
  const settings = { ...DEFAULT_EVAL_SETTINGS, samplesPerTask: k, temperature: k > 1 ? 1 : 0 };
  const taskSet: TaskSet = { path: "tasks/x.jsonl", sha256: "ab".repeat(32), split: "test", limit: 0, rows, humanLabels: new Map() };
  return buildEvalLog("r1", settings, taskSet, gradedResult(rows, { base: completions("base"), adapter: completions("adapter") }));
}

function agentLog(outcomes: Outcomes) {
  const rows = outcomes.map((_, i) => ({ id: `t${i}`, split: "test" as const, prompt: `case t${i}`, answers: [] }));
  const ref = {
    name: "shop",
    path: "/x/shop.agent.ts",
    sha256: "cd".repeat(32),
    scorers: [{ name: "solved", weight: 1 }],
    tools: ["price"],
    limits: { maxTurns: 4, maxToolCalls: 4, toolTimeoutMs: 5000, maxToolOutputChars: 2000 },
  };
  const taskSet: TaskSet = {
    path: "shop.agent.ts",
    sha256: ref.sha256,
    split: "test",
    limit: 0,
    rows,
    humanLabels: new Map(),
    agent: { task: {} as never, ref },
  };
  const k = outcomes[0].base.length;
  const settings = agentEvalSettings({ ...DEFAULT_EVAL_SETTINGS, samplesPerTask: k, temperature: k > 1 ? 1 : 0 }, taskSet);
  const variant = (side: "base" | "adapter") => ({
    name: side,
    tasks: rows.map((r, i) => ({
      taskId: r.id,
      samples: outcomes[i][side].map((ok) => ({
        completion: ok ? "the total is 12" : "",
        scores: { solved: ok },
        messagesJson: JSON.stringify([
          { role: "user", content: r.prompt },
          { role: "assistant", content: ok ? "the total is 12" : "" },
        ]),
        episode: { turns: 1, toolCalls: 0, endedBy: ok ? "answer" : "max_turns" },
      })),
    })),
  });
  return buildEvalLog("r1", settings, taskSet, create(EvaluateResultSchema, { baseModel: "m", variants: [variant("base"), variant("adapter")] }));
}

function bothWays(outcomes: Outcomes) {
  const a = judgeEval(taskFileLog(outcomes), null);
  const b = judgeEval(agentLog(outcomes), null);
  assert.deepEqual(b.judged.comparison?.decision, a.judged.comparison?.decision);
  assert.equal(b.downstream.verdict, a.downstream.verdict);
  assert.equal(b.downstream.reason, a.downstream.reason);
  return b;
}

test("the same per-task scores give the same verdict through a task file's eval and an agent task's", () => {
  // 0/1 scores (K = 1): 240 tasks, the adapter right on 200, the base on 60
  const one: Outcomes = Array.from({ length: 240 }, (_, i) => ({ base: [i < 60 ? 1 : 0], adapter: [i < 200 ? 1 : 0] }));
  const j1 = bothWays(one);
  assert.equal(j1.judged.comparison?.decision?.test, "exact McNemar test");
  assert.equal(j1.downstream.verdict, "CONFIRMED");
  // per-task means (K = 3) with spread
  const three: Outcomes = Array.from({ length: 220 }, (_, i) => ({
    base: [i % 3 === 0 ? 1 : 0, 0, i % 5 === 0 ? 1 : 0],
    adapter: [1, i % 2, i % 7 === 0 ? 0 : 1],
  }));
  assert.equal(bothWays(three).judged.comparison?.decision?.test, "paired t test");
  // K = 2, every task 0/2 -> 1/2: no spread, a zero-width interval: not CONFIRMED either way
  const flat: Outcomes = Array.from({ length: 240 }, () => ({ base: [0, 0], adapter: [1, 0] }));
  const j3 = bothWays(flat);
  assert.notEqual(j3.downstream.verdict, "CONFIRMED");
  // fewer test tasks than the milestone's minimum: INCONCLUSIVE, saying so, through both
  const few = one.slice(0, 40);
  assert.match(bothWays(few).downstream.reason, /n=40 < 200 test tasks the milestone needs/);
});

// ---------------------------------------------------------------------------------------------
// Warm start, then RL (issue 53 item 2): base -> warm start and warm start -> warm start + GRPO on
// the same tasks, each a paired comparison, the two governing p-values Holm-adjusted together.

import { warmStartStages } from "../src/agent/verdict/warm-start.js";

test("warm start stages: what SFT gave and what RL added, paired on the same tasks, Holm over the two", () => {
  const n = 240;
  const rows = Array.from({ length: n }, (_, i) => row(`t${i}`, "structuring"));
  const text = (ok: boolean) => [`<answer>${ok ? "structuring" : "smurfing"}</answer>`];
  const by = (k: number) => Object.fromEntries(rows.map((r, i) => [r.id, text(i < k)]));
  const taskSet: TaskSet = { path: "tasks/x.jsonl", sha256: "ab".repeat(32), split: "test", limit: 0, rows, humanLabels: new Map() };
  const log = buildEvalLog("r1", DEFAULT_EVAL_SETTINGS, taskSet, gradedResult(rows, { base: by(60), "warm-start": by(150), adapter: by(165) }));
  const stages = warmStartStages(log)!;
  assert.equal(stages.length, 2);
  assert.ok(Math.abs(stages[0].comparison.paired!.meanDiff - 90 / n) < 1e-12);
  assert.ok(Math.abs(stages[1].comparison.paired!.meanDiff - 15 / n) < 1e-12);
  // Holm's step-down over two: the smaller p doubled, the larger at least that (scipy/statsmodels' multipletests 'holm')
  const [p0, p1] = stages.map((s) => s.comparison.decision!.p!);
  const [lo, hi] = p0 <= p1 ? [0, 1] : [1, 0];
  const adjLo = Math.min(1, 2 * Math.min(p0, p1));
  assert.ok(Math.abs(stages[lo].pHolm! - adjLo) < 1e-12);
  assert.ok(Math.abs(stages[hi].pHolm! - Math.max(adjLo, Math.max(p0, p1))) < 1e-12);
  // each step's verdict is the downstream rule, its test judged at the Holm-adjusted p, its reason naming the contrast
  assert.equal(stages[0].verdict.verdict, "CONFIRMED");
  assert.match(stages[0].verdict.reason, /^warm-start - base \+37\.5 pp .*Holm-adjusted over the 2 steps/);
  assert.match(stages[1].verdict.reason, /^warm-start \+ GRPO - warm-start \+6\.3 pp/);
  assert.notEqual(stages[1].verdict.verdict, "CONFIRMED"); // +6.3 pp: the interval's lower bound is below +5 pp
  // RL's p below .05 alone but not after Holm (two p = 1/32: the smaller doubled, the larger at least that): not PASS
  const close = buildEvalLog("r2", DEFAULT_EVAL_SETTINGS, taskSet, gradedResult(rows, { base: by(60), "warm-start": by(66), adapter: by(72) }));
  const [, rl] = warmStartStages(close)!;
  const raw = rl.comparison.decision!.p!;
  assert.ok(raw < 0.05 && rl.pHolm! >= 0.05, `p=${raw}, Holm p=${rl.pHolm}`);
  assert.equal(rl.verdict.verdict, "INCONCLUSIVE");
  // no warm-start variant: nothing to say
  assert.equal(
    warmStartStages(
      taskFileLog([
        { base: [0], adapter: [1] },
        { base: [1], adapter: [1] },
      ]),
    ),
    null,
  );
});
