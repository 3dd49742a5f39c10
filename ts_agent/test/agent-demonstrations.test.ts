/** Demonstration episodes of an agent task (agent/agent-task/demonstrations.ts): the shares of
 * right calls, guesses and other tasks' calls, the real tools run for every call, deterministic. */
import { strict as assert } from "node:assert";
import { test } from "node:test";

import { defineAgentTask } from "../src/agent/agent-task/define.js";
import { demonstrations } from "../src/agent/agent-task/demonstrations.js";

const task = defineAgentTask({
  name: "echo",
  tasks: Array.from({ length: 200 }, (_, i) => ({ id: `t${i}`, prompt: `echo ${i}` })),
  systemPrompt: "Use the tool.",
  tools: { echo: { description: "Echo n.", parameters: { type: "object" }, run: ({ n }) => `got ${String(n)}` } },
  scorers: { s: { score: () => 1 } },
  reference: (t) => [{ name: "echo", arguments: { n: Number(t.id.slice(1)) } }],
});

test("right calls, guesses and another task's calls in their shares; the tools really ran", async () => {
  const text = await demonstrations(task, task.tasks, { total: 2000, correctShare: 0.3, guessShare: 0.6, seed: 0 });
  const rows = text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.equal(rows.length, 2000); // 10 per task
  let right = 0;
  let guess = 0;
  for (const r of rows) {
    const own = Number(r.messages[1].content.split(" ")[1]);
    const call = r.messages.find((m: { tool_calls?: unknown }) => m.tool_calls);
    if (!call) {
      guess += 1;
      assert.match(r.messages.at(-1).content, /^got \d+$/, "a guess answers with another task's answer");
      assert.notEqual(r.messages.at(-1).content, `got ${own}`);
      continue;
    }
    const n = call.tool_calls[0].function.arguments.n;
    assert.equal(r.messages.at(-2).content, `got ${n}`, "the tool's real output");
    assert.equal(r.messages.at(-1).content, `got ${n}`, "the answer is the last tool output");
    if (n === own) right += 1;
  }
  assert.ok(Math.abs(right / 2000 - 0.3) < 0.04, `right ${right}`);
  assert.ok(Math.abs(guess / 2000 - 0.6) < 0.04, `guess ${guess}`);
  assert.equal(await demonstrations(task, task.tasks, { total: 2000, correctShare: 0.3, guessShare: 0.6, seed: 0 }), text);
});

test("a task without reference calls is refused naming it", async () => {
  await assert.rejects(demonstrations({ ...task, reference: undefined }, task.tasks), /echo: reference: an agent demo needs/);
});
