/**
 * An agent program (issue 54, docs/agent-programs.md) through a real sidecar by bin/agent, as a
 * user runs it: a program written with the real `openai` npm package, in a project of its own (a
 * temp folder whose node_modules is this package's), calls the sidecar's OpenAI-compatible
 * endpoint at the base URL each rollout is given. `agent plan --agent-program` samples it (the
 * preflight), `agent eval --agent-program` judges it through the one eval pipeline (eval.json,
 * junit.xml, report.md): the value each rollout returned reaches the scorers as `episode.final`, the
 * transcript is what the endpoint recorded, and a rollout that throws is a failed episode (ended by
 * "error", scored 0) while the eval goes on. `agent train --agent-program` trains a step on the
 * rollouts and `agent eval RUN` finds the program file the run recorded. A file without `run`
 * given to --agent-program is one line, exit 2.
 */
import { strict as assert } from "node:assert";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import OpenAI from "openai";

import { loggedEpisode, readEvalLog, type LoggedEpisode } from "../src/agent/core/eval-log.js";
import { AGENT } from "./helpers/agent-process.js";
import { REPO, sidecarForFile } from "./helpers/sidecar.js";

const sidecar = sidecarForFile();

const PROGRAM = `import OpenAI from "openai";
import { defineAgentProgram } from ${JSON.stringify(join(REPO, "ts_agent", "src", "agent", "agent-task", "index.js"))};

const tools: OpenAI.Chat.ChatCompletionTool[] = [
  { type: "function", function: { name: "cancel_order", description: "Cancel the order in question.", parameters: { type: "object", properties: {} } } },
];

async function agent(client: OpenAI, model: string, question: string, signal: AbortSignal) {
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
    { role: "system", content: "You handle order requests. Use the tools to act; then confirm in one sentence." },
    { role: "user", content: question },
  ];
  let calls = 0;
  for (let turn = 0; turn < 2; turn++) {
    const completion = await client.chat.completions.create({ model, messages, tools, max_tokens: 16 }, { signal });
    calls++;
    const reply = completion.choices[0].message;
    if (!reply.tool_calls?.length) return { calls, answer: reply.content ?? "" };
    messages.push(reply);
    for (const call of reply.tool_calls) messages.push({ role: "tool", tool_call_id: call.id, content: "Done: the order is cancelled." });
  }
  return { calls, answer: "" };
}

export default defineAgentProgram({
  name: "orders-e2e",
  tasks: [
    { id: "train-0", prompt: "Please cancel my order AX-1001." },
    { id: "train-1", prompt: "Please cancel my order BK-2002." },
    { id: "test-0", prompt: "Please cancel my order CV-3003.", split: "test" },
    { id: "test-1", prompt: "Please cancel my order DR-4004.", split: "test" },
    { id: "test-throws", prompt: "Please cancel my order EM-5005.", split: "test" },
  ],
  run: async (task, { baseURL, apiKey, model, signal }) => {
    if (task.id === "test-throws") throw new Error("the agent's own bug");
    const out = await agent(new OpenAI({ baseURL, apiKey, maxRetries: 0 }), model, task.prompt, signal);
    return { task: task.id, ...out };
  },
  scorers: {
    // 1 only when the value this task's rollout returned came back with its episode
    final_seen: { score: (ep) => ((ep.final as { task?: string; calls?: number } | undefined)?.task === ep.task.id && (ep.final as { calls: number }).calls >= 1 ? 1 : 0) },
    cancelled: { weight: 0, score: (ep) => (ep.toolCalls.some((c) => c.name === "cancel_order") ? 1 : 0) },
  },
  limits: { maxTurns: 2, rolloutTimeoutMs: 60000 },
});
`;

/** A project of the user's own: the program, ESM, with `openai` resolvable from its node_modules. */
function project(): { dir: string; program: string; evals: string } {
  const dir = mkdtempSync(join(tmpdir(), "agent-program-"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "my-agent", private: true, type: "module" }));
  symlinkSync(join(REPO, "ts_agent", "node_modules"), join(dir, "node_modules"));
  writeFileSync(join(dir, "program.ts"), PROGRAM);
  return { dir, program: join(dir, "program.ts"), evals: join(dir, "evals") };
}

function agent(args: string[]) {
  const r = spawnSync(AGENT, [...args, "--address", sidecar().address], { encoding: "utf8", timeout: 600_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The episodes of one variant of an eval log, by task id. */
function episodes(path: string, variant = "base"): Map<string, LoggedEpisode[]> {
  const log = readEvalLog(path);
  const result = log.result as { variants: Array<{ name: string; tasks: Array<{ taskId: string; samples: never[] }> }> };
  const v = result.variants.find((x) => x.name === variant);
  assert.ok(v, `no variant ${variant} in ${path}`);
  return new Map(v.tasks.map((t) => [t.taskId, t.samples.map((s) => loggedEpisode(s)!)]));
}

test(
  "agent plan and agent eval --agent-program: an openai-package agent's rollouts through the endpoint, scored with what it returned",
  { timeout: 900_000 },
  () => {
    const { dir, program, evals } = project();
    const config = join(dir, "run.json");
    writeFileSync(config, JSON.stringify({ grpo: { num_generations: 2, max_completion_length: 32, seed: 1 } }));

    // the preflight samples the program's rollouts (G per train task) as training would
    const plan = agent(["plan", "--agent-program", program, "--config", config]);
    assert.equal(plan.code, 0, plan.stdout + plan.stderr);
    assert.match(
      plan.stdout,
      /preflight: the base \(the embedded default model\) on 2 train tasks x G=2 episodes at temperature 1: .*scorers final_seen 1\.00/,
    );

    const ev = agent(["eval", "--agent-program", program, "--evals-dir", evals]);
    assert.equal(ev.code, 0, ev.stdout + ev.stderr);
    const path = join(evals, "runs", "base-program", "eval.json");
    const log = readEvalLog(path);
    assert.equal(log.agentTask?.name, "orders-e2e");
    assert.deepEqual(log.agentTask?.tools, []);
    assert.equal(log.agentTask?.limits.rolloutTimeoutMs, 60000);
    assert.ok(log.agentTask?.parts?.program, "the program's run is a part of the recorded file");
    const byTask = episodes(path);
    assert.deepEqual([...byTask.keys()].sort(), ["test-0", "test-1", "test-throws"]);
    for (const id of ["test-0", "test-1"]) {
      const [ep] = byTask.get(id)!;
      // the value run returned crossed from RunRollout to ScoreEpisode: final_seen 1
      assert.equal(ep.scores.final_seen, 1, `${id}: ${JSON.stringify(ep)}`);
      // the transcript is the endpoint's: the program's messages and the model's last reply
      assert.equal(ep.messages[0].role, "system");
      assert.ok(
        ep.messages.some((m) => m.role === "user" && m.content.includes(id === "test-0" ? "CV-3003" : "DR-4004")),
        JSON.stringify(ep.messages),
      );
      assert.equal(ep.messages.at(-1)?.role, "assistant", JSON.stringify(ep.messages));
      assert.notEqual(ep.endedBy, "error");
    }
    // a rollout whose program threw: failed, scored 0 without the scorers, the eval went on
    const [thrown] = byTask.get("test-throws")!;
    assert.equal(thrown.endedBy, "error", JSON.stringify(thrown));
    assert.equal(thrown.scores.final_seen, 0);
    const junit = readFileSync(join(evals, "runs", "base-program", "junit.xml"), "utf8");
    assert.match(junit, /<testsuite name="agent eval: orders-e2e" tests="3" failures="1"/);
    assert.match(
      readFileSync(join(evals, "runs", "base-program", "report.md"), "utf8"),
      /Agent program `orders-e2e`.*its own loop and tools; limits: 2 model calls/,
    );
  },
);

test(
  "agent train --agent-program trains on the rollouts; agent eval RUN evaluates the program file the run recorded; agent serve-policy RUN serves it",
  { timeout: 900_000 },
  async () => {
    const { dir, program, evals } = project();
    const config = join(dir, "run.json");
    writeFileSync(
      config,
      JSON.stringify({
        grpo: { max_steps: 1, num_generations: 2, per_device_train_batch_size: 2, max_completion_length: 32, seed: 1 },
        held_out: { num_prompts: 1, samples_per_prompt: 2 },
      }),
    );
    // every group has the same reward (final_seen 1): --force trains anyway
    const train = agent(["train", "--agent-program", program, "--config", config, "--run-id", "prog-1", "--evals-dir", evals, "--force"]);
    assert.equal(train.code, 0, train.stdout + train.stderr);
    assert.match(train.stdout, /agent task orders-e2e: 2 train tasks, an agent program \(its own loop and tools\)/);
    assert.match(train.stdout, /SUCCEEDED/);
    const run = JSON.parse(readFileSync(join(evals, "runs", "prog-1", "run.json"), "utf8"));
    assert.equal(run.request.agent.source.path, program);
    assert.deepEqual(run.request.agent.tools ?? [], []);
    assert.equal(run.request.agent.program.timeoutMs ?? run.request.agent.program.timeout_ms, 60000);

    const ev = agent(["eval", "prog-1", "--evals-dir", evals]);
    assert.equal(ev.code, 0, ev.stdout + ev.stderr);
    const byTask = episodes(join(evals, "runs", "prog-1", "eval.json"), "adapter");
    assert.equal(byTask.get("test-0")![0].scores.final_seen, 1);

    // the trained adapter by hand: agent serve-policy RUN, any OpenAI client
    const served = spawn(AGENT, ["serve-policy", "prog-1", "--evals-dir", evals, "--port", "0"], { stdio: ["ignore", "pipe", "pipe"] });
    try {
      let out = "";
      const url = await new Promise<string>((res, rej) => {
        const timer = setTimeout(() => rej(new Error(`serve-policy did not start: ${out}`)), 300_000);
        served.stdout!.on("data", (d) => {
          out += d;
          const m = /on (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(out);
          if (m) {
            clearTimeout(timer);
            res(m[1]);
          }
        });
        served.stderr!.on("data", (d) => (out += d));
        served.on("exit", () => rej(new Error(`serve-policy exited: ${out}`)));
      });
      const client = new OpenAI({ baseURL: url, apiKey: "unused", maxRetries: 0 });
      assert.deepEqual(
        (await client.models.list()).data.map((m) => m.id),
        ["prog-1"],
      );
      const reply = await client.chat.completions.create({
        model: "prog-1",
        messages: [{ role: "user", content: "Please cancel my order AX-1001." }],
        max_tokens: 8,
      });
      assert.equal(reply.choices[0].message.role, "assistant");
    } finally {
      served.kill("SIGINT");
    }
  },
);

test("--agent-program refuses a file whose default export has no run, in one line, exit 2", () => {
  const r = agent(["eval", "--agent-program", join(REPO, "agent-evals", "agent-tasks", "calculator.agent.ts")]);
  assert.equal(r.code, 2, r.stdout + r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.match(r.stderr, /calculator\.agent\.ts: run: --agent-program needs an agent program .*use --agent-task/);
});

test(
  "the shipped agent programs (openai package, Vercel AI SDK) load from the checkout and run their rollouts through the endpoint",
  { timeout: 900_000 },
  () => {
    for (const file of ["orders-openai.ts", "orders-ai-sdk.ts"]) {
      const evals = mkdtempSync(join(tmpdir(), "shipped-program-"));
      const program = join(REPO, "agent-evals", "agent-programs", file);
      const ev = agent(["eval", "--agent-program", program, "--evals-dir", evals, "--limit", "2", "--name", "shipped"]);
      assert.equal(ev.code, 0, `${file}: ${ev.stdout}${ev.stderr}`);
      const byTask = episodes(join(evals, "runs", "shipped", "eval.json"));
      assert.equal(byTask.size, 2, file);
      for (const [id, [ep]] of byTask) {
        // the program returned (no rollout failed) and the endpoint recorded its calls
        assert.notEqual(ep.endedBy, "error", `${file} ${id}: ${JSON.stringify(ep)}`);
        assert.ok(ep.turns >= 1, `${file} ${id}: ${JSON.stringify(ep)}`);
        assert.equal(ep.messages[0].role, "system", file);
      }
    }
  },
);
