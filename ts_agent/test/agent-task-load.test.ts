/**
 * Issue 55 item 8: an agent task file that does not compile names its file, line, column and the
 * compiler's message in one line (tsx prints `syntax.agent.ts:2:11: ERROR: Expected "}" but found
 * ";"`; the loader said only `Transform failed with 1 error:`). Issue 55 item 11: a scorer that
 * returns a string is refused with the value and its type.
 */
import { strict as assert } from "node:assert";
import { join } from "node:path";
import { test } from "node:test";

import { defineAgentTask, loadAgentTask } from "../src/agent/agent-task/define.js";
import { episodeFrom, scoreEpisode } from "../src/agent/agent-task/tool-host.js";

const FIXTURES = join(import.meta.dirname, "fixtures", "agent-tasks");

test("a syntax error in an agent task file is one line with its file, line, column and message", async () => {
  const file = join(FIXTURES, "syntax.agent.ts");
  await assert.rejects(loadAgentTask(file), (err: Error) => {
    assert.equal(err.name, "UserError");
    assert.equal(err.message.split("\n").length, 1, err.message);
    assert.match(err.message, /syntax\.agent\.ts:2:11: Expected "\}" but found ";"/);
    return true;
  });
});

test('a scorer returning the string "1" is refused with the value and its type', async () => {
  const task = defineAgentTask({
    name: "t",
    tasks: [{ id: "a", prompt: "p" }],
    tools: {},
    scorers: { s: { score: () => "1" as unknown as number } },
  });
  const ep = episodeFrom(task.tasks[0], [], { turns: 1, toolCalls: 0, toolErrors: 0, unknownToolCalls: 0, malformedCalls: 0, endedBy: "answer" }, "x");
  await assert.rejects(scoreEpisode(task, ep), /scorers\.s: gave "1" \(a string\) on task a; a score must be a number in \[0, 1\]/);
});

test("a changed agent task is compared part by part: a scorer's weight names that scorer, a comment names nothing", async () => {
  const { agentTaskParts, changedParts } = await import("../src/agent/agent-task/agent-spec.js");
  const base = () =>
    defineAgentTask({
      name: "t",
      tasks: [{ id: "a", prompt: "p" }],
      tools: { look: { description: "d", parameters: { type: "object", properties: {} }, run: () => "x" } },
      scorers: { s: { score: () => 1 }, u: { weight: 0.2, score: () => 0 } },
    });
  const a = agentTaskParts(base());
  assert.deepEqual(changedParts(a, agentTaskParts(base())), []);
  const weighted = base();
  weighted.scorers.u.weight = 0.3;
  assert.deepEqual(changedParts(a, agentTaskParts(weighted)), ["scorers.u"]);
  const more = base();
  more.tools!.other = { description: "o", parameters: { type: "object" }, run: () => "y" };
  more.limits = { maxTurns: 2 };
  assert.deepEqual(changedParts(a, agentTaskParts(more)), ["limits", "tools.other (added)"]);
});
