/**
 * Issue 29, item 6: answers with several samples per task. A tie between a task's most frequent
 * labels is reported as a tie (TIE_ANSWER), never given to the label listed first: before, two
 * samples per task, one each of two labels, read as "answers money_mule on 264/264 tasks (100%)",
 * a constant predictor made of a mixed one. And a variant whose answers mostly lack the answer
 * format is a format failure with its own attribution row, not "the base learned the label prior".
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { FORMAT_FAILURE_SHARE, NO_ANSWER, TIE_ANSWER, answerDistribution, labelSetOf, taskAnswer, type LabelledTask } from "../src/agent/eval/answers.js";
import { TYPOLOGIES } from "../src/task-sets/typologies.js";
import { ATTRIBUTION_TABLE } from "../src/agent/report/attribution.js";

const set = labelSetOf(TYPOLOGIES.map((t) => ({ label: t.label, answers: t.answers })))!;
const ans = (label: string) => `<answer>${label}</answer>`;
const tasks = (completions: (i: number) => string[], n = 264): LabelledTask[] =>
  Array.from({ length: n }, (_, i) => ({ taskId: `t${i}`, gold: TYPOLOGIES[i % 8].label, completions: completions(i) }));

describe("answers with several samples per task (issue 29, item 6)", () => {
  test("a tie between the most frequent labels is a tie, not the label listed first", () => {
    assert.equal(taskAnswer([ans("layering"), ans("smurfing")], set), TIE_ANSWER);
    assert.equal(taskAnswer([ans("layering"), ans("smurfing"), ans("layering")], set), "layering");
    assert.equal(taskAnswer([ans("layering"), "no tag"], set), TIE_ANSWER);
  });

  test("two samples per task, one each of two labels: not a constant predictor", () => {
    const d = answerDistribution(
      "base",
      tasks(() => [ans("money_mule"), ans("shell_company")]),
      set,
    );
    assert.equal(d.constant, false);
    assert.deepEqual(d.top, { label: TIE_ANSWER, count: 264, share: 1 });
    // a mixed predictor stays mixed whatever the order of its samples
    const swapped = answerDistribution(
      "base",
      tasks(() => [ans("shell_company"), ans("money_mule")]),
      set,
    );
    assert.equal(swapped.constant, false);
  });

  test("a constant predictor with K samples is still constant", () => {
    const d = answerDistribution(
      "base",
      tasks(() => [ans("money_mule"), ans("money_mule")]),
      set,
    );
    assert.equal(d.constant, true);
  });

  test("answers that mostly lack the answer tag: a format failure, not a constant label", () => {
    const d = answerDistribution(
      "base",
      tasks((i) => (i % 4 === 0 ? [ans("money_mule")] : ["money_mule, because the funds ..."])),
      set,
    );
    assert.equal(d.top.label, NO_ANSWER);
    assert.ok(d.noAnswerShare > FORMAT_FAILURE_SHARE);
    assert.equal(d.formatFailure, true);
    assert.equal(d.constant, false);
    const all = answerDistribution(
      "base",
      tasks(() => ["no tag at all"]),
      set,
    );
    assert.equal(all.formatFailure, true);
    assert.equal(all.constant, false);
  });

  test("the attribution table has a format-failure row per variant, and it fires instead of the label-prior row", () => {
    const causes = ATTRIBUTION_TABLE.map((r) => r.likelyCause.split(":")[0]);
    assert.ok(causes.includes("format failure (base)") && causes.includes("format failure (adapter)"), causes.join(" | "));
    const base = answerDistribution(
      "base",
      tasks(() => ["no tag at all"]),
      set,
    );
    const adapter = answerDistribution(
      "adapter",
      tasks((i) => [ans(TYPOLOGIES[(i * 3) % 8].label)]),
      set,
    );
    const row = (cause: string) => ATTRIBUTION_TABLE.find((r) => r.likelyCause.startsWith(cause))!;
    const fired = (cause: string) => row(cause).check(null as never, null as never, { base, adapter }).fired;
    assert.equal(fired("format failure (base)"), true);
    assert.equal(fired("constant answer (base)"), false);
    assert.equal(fired("format failure (adapter)"), false);
  });
});
