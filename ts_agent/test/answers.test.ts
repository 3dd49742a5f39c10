import assert from "node:assert/strict";
import { test } from "node:test";

import {
  CONSTANT_ANSWER_SHARE,
  NO_ANSWER,
  OTHER_ANSWER,
  TIE_ANSWER,
  answerDistribution,
  answerLabel,
  confusionMatrices,
  labelSetOf,
  taskAnswer,
  type LabelledTask,
} from "../src/agent/eval/answers.js";
import { TYPOLOGIES } from "../src/task-sets/typologies.js";

const rows = TYPOLOGIES.map((t) => ({ label: t.label, answers: t.answers }));
const set = labelSetOf(rows)!;
const ans = (label: string) => `<answer>${label}</answer>`;

test("a completion maps to its label through the accepted answers; no tag and unknown names are their own columns", () => {
  assert.equal(answerLabel(ans("money_mule"), set), "money_mule");
  assert.equal(answerLabel(ans("Money Mule"), set), "money_mule");
  assert.equal(answerLabel(ans("TBML"), set), "trade_based");
  assert.equal(answerLabel("<answer>ponzi</answer>", set), OTHER_ANSWER);
  assert.equal(answerLabel("money_mule", set), NO_ANSWER);
  assert.equal(answerLabel(`${ans("smurfing")} ${ans("layering")}`, set), "layering"); // the last tag, as the grader reads it
});

test("open-answer task sets have no label set", () => {
  assert.equal(labelSetOf([{ answers: ["42"] }, { answers: ["7"] }]), null);
  assert.equal(
    labelSetOf([
      { label: "a", answers: ["a"] },
      { label: "a", answers: ["a"] },
    ]),
    null,
  );
});

test("with K samples a task's answer is its most frequent label; a tie is a tie (issue 29: no longer the earlier label)", () => {
  assert.equal(taskAnswer([ans("layering"), ans("smurfing"), ans("layering")], set), "layering");
  assert.equal(taskAnswer([ans("layering"), ans("smurfing")], set), TIE_ANSWER);
  assert.equal(taskAnswer([], set), NO_ANSWER);
});

function tasks(answers: string[]): LabelledTask[] {
  return answers.map((a, i) => ({ taskId: `t${i}`, gold: TYPOLOGIES[i % 8].label, completions: [ans(a)] }));
}

test("a base that answers one label on every task is a constant predictor; a mixed one is not", () => {
  const constant = answerDistribution("base", tasks(Array(264).fill("money_mule")), set);
  assert.equal(constant.constant, true);
  assert.deepEqual(constant.top, { label: "money_mule", count: 264, share: 1 });
  assert.equal(constant.distinct, 1);

  const mixed = answerDistribution("adapter", tasks(Array.from({ length: 264 }, (_, i) => TYPOLOGIES[i % 8].label)), set);
  assert.equal(mixed.constant, false);
  assert.equal(mixed.distinct, 8);
  assert.ok(Math.abs(mixed.top.share - 33 / 264) < 1e-12);
});

test("the constant-answer share is a threshold at 90% of tasks", () => {
  const n = 100;
  const at = Math.round(CONSTANT_ANSWER_SHARE * n);
  const mk = (k: number) => tasks([...Array(k).fill("shell_company"), ...Array(n - k).fill("layering")]);
  assert.equal(answerDistribution("x", mk(at), set).constant, true);
  assert.equal(answerDistribution("x", mk(at - 1), set).constant, false);
});

test("confusion matrix: gold rows, answer columns (labels, other, none, tie), counts per variant", () => {
  const t: LabelledTask[] = [
    { taskId: "a", gold: "structuring", completions: [ans("structuring")] },
    { taskId: "b", gold: "structuring", completions: [ans("smurfing")] },
    { taskId: "c", gold: "smurfing", completions: ["no tag"] },
    { taskId: "d", gold: "smurfing", completions: ["<answer>ponzi</answer>"] },
  ];
  const cm = confusionMatrices([{ name: "base", tasks: t }], set);
  assert.deepEqual(
    cm.gold,
    TYPOLOGIES.map((x) => x.label),
  );
  assert.deepEqual(cm.answers, [...TYPOLOGIES.map((x) => x.label), OTHER_ANSWER, NO_ANSWER, TIE_ANSWER]);
  const m = cm.variants[0].matrix;
  assert.equal(m.length, 8);
  assert.deepEqual(m[0].slice(0, 2), [1, 1]);
  assert.equal(m[1][8], 1); // (other)
  assert.equal(m[1][9], 1); // (none)
  assert.equal(
    m.flat().reduce((a, b) => a + b, 0),
    4,
  );
});
