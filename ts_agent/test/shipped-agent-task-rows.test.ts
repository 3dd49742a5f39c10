/**
 * The shipped agent tasks' rows are as varied as their generators say. The shop and calculator
 * files drew their rows from an LCG written in floating point (`seed * 1103515245` is past 2^53, so
 * the low bits the modulo keeps were rounding noise): 621 of the shop's 640 tasks were "How much do
 * 2 notebooks cost in total?", so a warm start memorised one answer and every measurement on it said
 * nothing about copying arguments.
 */
import { strict as assert } from "node:assert";
import { join } from "node:path";
import { test } from "node:test";

import { loadAgentTask } from "../src/agent/agent-task/define.js";

const TASKS = join(import.meta.dirname, "..", "..", "agent-evals", "agent-tasks");

function counts<T>(xs: T[]): Map<T, number> {
  const m = new Map<T, number>();
  for (const x of xs) m.set(x, (m.get(x) ?? 0) + 1);
  return m;
}

test("shop: every product and every quantity 2-9 in both splits; no prompt over 3% of the tasks", async () => {
  const task = await loadAgentTask(join(TASKS, "shop.agent.ts"));
  for (const split of ["train", "test"]) {
    const rows = task.tasks.filter((r) => r.split === split);
    assert.equal(counts(rows.map((r) => r.product)).size, 16, `${split}: products`);
    assert.deepEqual([...counts(rows.map((r) => r.quantity)).keys()].sort(), [2, 3, 4, 5, 6, 7, 8, 9], `${split}: quantities`);
  }
  const top = Math.max(...counts(task.tasks.map((r) => r.prompt)).values());
  assert.ok(top <= 0.03 * task.tasks.length, `the commonest prompt is ${top} of ${task.tasks.length} tasks`);
  assert.ok(counts(task.tasks.map((r) => r.answer)).size >= 80, "distinct totals");
});

test("calculator: at least 90% of the prompts are distinct, both factors spread over 10-99", async () => {
  const task = await loadAgentTask(join(TASKS, "calculator.agent.ts"));
  const prompts = counts(task.tasks.map((r) => r.prompt));
  assert.ok(prompts.size >= 0.9 * task.tasks.length, `${prompts.size} distinct prompts of ${task.tasks.length}`);
  const factors = task.tasks.flatMap((r) => r.prompt.match(/\d+/g)!.map(Number));
  assert.ok(counts(factors).size >= 80, `${counts(factors).size} distinct factors`);
});

test("orders: no prompt over 3% of the tasks", async () => {
  const task = await loadAgentTask(join(TASKS, "orders.agent.ts"));
  const top = Math.max(...counts(task.tasks.map((r) => r.prompt)).values());
  assert.ok(top <= 0.03 * task.tasks.length, `the commonest prompt is ${top} of ${task.tasks.length} tasks`);
});

test("every shipped task's reference calls succeed on every row (a warm start's demonstrations are all right)", async () => {
  const { demonstrations } = await import("../src/agent/agent-task/demonstrations.js");
  for (const file of ["shop.agent.ts", "calculator.agent.ts", "orders.agent.ts"]) {
    const task = await loadAgentTask(join(TASKS, file));
    const text = await demonstrations(task, task.tasks, { total: task.tasks.length, correctShare: 1, guessShare: 0, seed: 0 });
    assert.equal(text.trim().split("\n").length, task.tasks.length, file);
  }
});

test("a reference call its tool refuses is refused naming the task, the call and the tool's error", async () => {
  const { defineAgentTask } = await import("../src/agent/agent-task/define.js");
  const { demonstrations } = await import("../src/agent/agent-task/demonstrations.js");
  const task = defineAgentTask({
    name: "t",
    tasks: [{ id: "a", prompt: "p", product: "scissors" }],
    tools: {
      lookup: {
        description: "d",
        parameters: { type: "object", properties: { product: { type: "string" } } },
        run: ({ product }) => {
          if (product === "scissors") throw new Error("no product scissors");
          return "$1.00";
        },
      },
    },
    scorers: { s: { score: () => 1 } },
    reference: (t) => [{ name: "lookup", arguments: { product: t.product } }],
  });
  await assert.rejects(demonstrations(task, task.tasks, { total: 1, correctShare: 1, guessShare: 0, seed: 0 }), (err: Error) => {
    assert.equal(err.name, "UserError");
    assert.match(err.message, /^t: reference: task a's call lookup\(\{"product":"scissors"\}\) gave "error: no product scissors"/);
    return true;
  });
});
