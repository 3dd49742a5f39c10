/**
 * Issue 32, item 2: open answers get an answer table. On an open-answer task set (no closed label
 * set) base and adapter answered `<answer>Saturday</answer>` on 100/100 test tasks and the report
 * said only "no constant-answer row: no closed label set". Now each variant's most frequent answers
 * and their shares are analysed for any task set, and one answer on >= 90% of tasks is a constant
 * answer (the attribution table's row); closed sets keep their confusion matrix.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { DEFAULT_EVAL_SETTINGS } from "../src/agent/eval/evaluate.js";
import { buildEvalLog } from "../src/agent/eval/build-eval-log.js";
import type { TaskSet } from "../src/agent/eval/task-set.js";
import type { TaskRow } from "../src/agent/core/task-format.js";
import { answerAnalysis, answerSignal } from "../src/agent/report/answer-analysis.js";
import { gradedResult } from "./helpers/eval-fixtures.js";

const DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

function openLog(answer: (i: number) => string) {
  const rows: TaskRow[] = Array.from({ length: 100 }, (_, i) => ({ id: `w${i}`, split: "test", prompt: `day ${i}?`, answers: [DAYS[i % 7]] }));
  const completions = (f: (i: number) => string) => Object.fromEntries(rows.map((r, i) => [r.id, [`<answer>${f(i)}</answer>`]]));
  const taskSet: TaskSet = {
    path: "mytasks/weekday.jsonl",
    sha256: "ab".repeat(32),
    split: "test",
    limit: 0,
    rows,
    humanLabels: new Map(),
    format: { labelField: "label", labels: null, sliceField: "slice", hasSlices: false, hasTemplates: false, splits: ["train", "test"] },
  };
  return buildEvalLog("r1", { ...DEFAULT_EVAL_SETTINGS }, taskSet, gradedResult(rows, { base: completions(() => "Saturday"), adapter: completions(answer) }));
}

test("an open-answer set whose variants say one string: the answers are analysed and the constant answer flagged", () => {
  const a = answerAnalysis(openLog(() => "Saturday"));
  assert.ok(a, "no answer analysis for an open-answer task set");
  const s = answerSignal(a);
  assert.equal(s.base?.constant, true);
  assert.equal(s.base?.top.label, "saturday");
  assert.equal(s.base?.top.count, 100);
  assert.equal(s.adapter?.constant, true);
  assert.equal(a.splits[0].confusion, null, "no confusion matrix without a closed label set");
});

test("an open-answer set with varied answers: no constant answer, the shares add up", () => {
  const a = answerAnalysis(openLog((i) => DAYS[i % 7]))!;
  const adapter = answerSignal(a).adapter!;
  assert.equal(adapter.constant, false);
  assert.equal(adapter.distinct, 7);
  assert.equal(
    adapter.shares.reduce((t, x) => t + x.count, 0),
    100,
  );
});
