/**
 * The sidecar's OpenAI-compatible endpoint (docs/agent-programs.md) driven by the real `openai` npm
 * client, its own request shapes: `py-trainer serve-policy` (the embedded default model, a token
 * required) answers models.list, a completion with tools, n > 1, a stream with usage, a tool
 * result sent back; a malformed body is a 400 the client raises as BadRequestError naming the
 * field; a wrong key is a 401.
 */
import { strict as assert } from "node:assert";
import { spawn, type ChildProcess } from "node:child_process";
import { after, before, test } from "node:test";

import OpenAI from "openai";

import { PYTHON, REPO } from "./helpers/sidecar.js";

const TOKEN = "e2e-token";
let proc: ChildProcess | undefined;
let baseURL = "";

before(async () => {
  proc = spawn(PYTHON, ["-m", "py_trainer.server.cli", "serve-policy", "--port", "0", "--token", TOKEN, "--max-new-tokens", "16"], {
    cwd: REPO,
    env: { ...process.env, HF_HUB_OFFLINE: "1", TRANSFORMERS_OFFLINE: "1", PYTHONUNBUFFERED: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  proc.stderr!.on("data", (d) => (out += d));
  baseURL = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve-policy did not start:\n${out}`)), 300_000);
    proc!.stdout!.on("data", (d) => {
      out += d;
      const m = /on (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc!.on("exit", () => reject(new Error(`serve-policy exited:\n${out}`)));
  });
});

after(() => {
  proc?.kill("SIGINT");
});

const tools: OpenAI.Chat.ChatCompletionTool[] = [
  { type: "function", function: { name: "lookup", description: "Look a case up.", parameters: { type: "object", properties: { id: { type: "string" } } } } },
];

test("the openai npm client's own shapes: models, tools, n > 1, a tool result, a stream with usage", { timeout: 600_000 }, async () => {
  const client = new OpenAI({ baseURL, apiKey: TOKEN, maxRetries: 0 });
  const models = await client.models.list();
  assert.deepEqual(
    models.data.map((m) => m.id),
    ["base"],
  );
  const two = await client.chat.completions.create({ model: "base", messages: [{ role: "user", content: "Case: wire transfers" }], tools, n: 2 });
  assert.deepEqual(
    two.choices.map((c) => c.index),
    [0, 1],
  );
  for (const c of two.choices) assert.ok(["stop", "length", "tool_calls"].includes(c.finish_reason), c.finish_reason);
  assert.ok(two.usage!.completion_tokens > 0);
  // a conversation with a tool call and its result, as an agent sends it back
  const back = await client.chat.completions.create({
    model: "base",
    messages: [
      { role: "user", content: "Case: wire transfers" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"id": "c1"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "structuring" },
    ],
    tools,
    max_tokens: 8,
  });
  assert.equal(back.choices.length, 1);
  assert.ok(back.choices[0].message.role === "assistant");
  const stream = await client.chat.completions.create({
    model: "base",
    messages: [{ role: "user", content: "Case: cash deposits" }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let finish = "";
  let usage = 0;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta.content) text += chunk.choices[0].delta.content;
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
    if (chunk.usage) usage = chunk.usage.completion_tokens;
  }
  assert.ok(text.length > 0 && usage > 0 && ["stop", "length"].includes(finish), `${text} ${finish} ${usage}`);
});

test("a malformed body is a BadRequestError naming the field; a wrong key is a 401", { timeout: 120_000 }, async () => {
  const client = new OpenAI({ baseURL, apiKey: TOKEN, maxRetries: 0 });
  await assert.rejects(
    client.chat.completions.create({ model: "base", messages: [{ role: "user", content: "x" }], temperature: 5 }),
    (err: unknown) => err instanceof OpenAI.BadRequestError && err.status === 400 && err.param === "temperature",
  );
  await assert.rejects(
    client.chat.completions.create({ model: "base", messages: [{ role: "robot", content: "x" } as never] }),
    (err: unknown) => err instanceof OpenAI.BadRequestError && err.param === "messages[0].role",
  );
  const wrong = new OpenAI({ baseURL, apiKey: "nope", maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (err: unknown) => err instanceof OpenAI.AuthenticationError && err.status === 401);
});
