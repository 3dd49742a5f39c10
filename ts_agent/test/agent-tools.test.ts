/** The TS tool host's pieces without a process: a tool that throws, hangs past its timeout or floods
 * becomes an error observation; a scorer outside [0, 1] or throwing is refused naming it; the
 * agent task checks name the field. */
import { strict as assert } from "node:assert";
import { test } from "node:test";

import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { checkAgentTask, defineAgentTask } from "../src/agent/agent-task/define.js";
import { episodeFrom, runTool, scoreEpisode, startToolHost } from "../src/agent/agent-task/tool-host.js";
import { AgentToolHostService } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";

const task = defineAgentTask({
  name: "t",
  tasks: [{ id: "a", prompt: "p", answer: "6" }],
  tools: {
    ok: { description: "", parameters: {}, run: ({ x }) => ({ doubled: (x as number) * 2 }) },
    boom: {
      description: "",
      parameters: {},
      run: () => {
        throw new Error("kaput\nstack");
      },
    },
    hang: { description: "", parameters: {}, run: () => new Promise(() => {}) },
    flood: { description: "", parameters: {}, run: () => "y".repeat(50) },
    emoji: { description: "", parameters: {}, run: () => "\u{1F600}".repeat(50) },
  },
  scorers: { right: { score: (ep) => (ep.finalAnswer === ep.task.answer ? 1 : 0) }, bad: { score: () => 2 } },
  limits: { toolTimeoutMs: 50, maxToolOutputChars: 20 },
});
const row = task.tasks[0];

test("a tool's result, throw, timeout and flood", async () => {
  assert.deepEqual(await runTool(task, row, "e", "ok", { x: 3 }), ['{"doubled":6}', false]);
  assert.deepEqual(await runTool(task, row, "e", "boom", {}), ["error: kaput", true]);
  assert.deepEqual(await runTool(task, row, "e", "hang", {}), ["error: timed out after 50 ms", true]);
  // the cut the model sees is the sidecar's (agents/episodes.py); the host only bounds the wire at
  // one character past the limit, with no note of its own (two notes, one lost, before)
  assert.deepEqual(await runTool(task, row, "e", "flood", {}), ["y".repeat(21), false]);
  const [emoji] = await runTool(task, row, "e", "emoji", {});
  assert.equal([...emoji].length, 21, "the bound counts characters (code points), as the sidecar does");
  assert.deepEqual(await runTool(task, row, "e", "nope", {}), ['error: unknown tool "nope"', true]);
});

test("a scorer outside [0, 1] is refused naming it", async () => {
  const stats = { turns: 2, toolCalls: 1, toolErrors: 0, unknownToolCalls: 0, malformedCalls: 0, endedBy: "answer" };
  const ep = episodeFrom(
    row,
    [
      { role: "user", content: "p" },
      { role: "assistant", content: '<tool_call>{"name":"ok"}</tool_call>' },
      { role: "tool", content: "6" },
      { role: "assistant", content: "6" },
    ],
    stats,
    "6",
  );
  await assert.rejects(scoreEpisode(task, ep), /scorers\.bad: gave 2 on task a; a score must be a number in \[0, 1\]/);
});

test("the scorers get the final answer the sidecar computed, not one of their own", async () => {
  // the sidecar's episode runner computes it once (ScoreEpisodeRequest.final_answer, docs/agents.md):
  // a turn cut by the token budget that reads "6" gives the scorers "", as Evaluate's completion
  const seen: string[] = [];
  const host = await startToolHost(defineAgentTask({ ...task, scorers: { right: { score: (ep) => (seen.push(ep.finalAnswer), 1) } } }));
  try {
    const client = createClient(AgentToolHostService, createGrpcTransport({ baseUrl: `http://${host.address}` }));
    const stats = { turns: 1, toolCalls: 0, toolErrors: 0, unknownToolCalls: 0, malformedCalls: 0 };
    const messagesJson = JSON.stringify([
      { role: "user", content: "p" },
      { role: "assistant", content: "6" },
    ]);
    await client.scoreEpisode({ taskId: "a", episodeId: "e1", messagesJson, stats: { ...stats, endedBy: "max_tokens" }, finalAnswer: "" });
    // a value the host could not have derived from the transcript: it reads the field, never the turns
    await client.scoreEpisode({ taskId: "a", episodeId: "e2", messagesJson, stats: { ...stats, endedBy: "answer" }, finalAnswer: "six" });
  } finally {
    await host.close();
  }
  assert.deepEqual(seen, ["", "six"]);
});

test("a malformed agent task names the field", () => {
  assert.throws(() => checkAgentTask({ ...task, tasks: [] }, "f.ts"), /^UserError: f\.ts: tasks: must be a non-empty array$/);
  assert.throws(() => checkAgentTask({ ...task, tools: { "bad name": task.tools!.ok } }, "f.ts"), /f\.ts: tools\.bad name: a tool name must match/);
  assert.throws(() => checkAgentTask({ ...task, limits: { maxTurns: 0 } }, "f.ts"), /f\.ts: limits\.maxTurns: must be an integer in \[1, 32\], got 0/);
  assert.throws(() => checkAgentTask({ ...task, tasks: [{ id: "a", prompt: "p", split: "dev" }] }, "f.ts"), /tasks\[0\]\.split: must be "train" or "test"/);
});
