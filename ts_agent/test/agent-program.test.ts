/** Agent programs (issue 54, docs/agent-programs.md) on the TS side, in-process: defineAgentProgram's
 * checks (one line naming the field), --agent-program's refusal of a file without `run`, the
 * AgentSpec of a program (program set, no tools, a "program" part that a changed `run` names), and
 * the tool host's RunRollout over a real Connect channel: the value returned, a throw, a hang cut at
 * the timeout, and ScoreEpisode giving the scorers that value as `episode.final`, once. */
import { strict as assert } from "node:assert";
import { join } from "node:path";
import { test } from "node:test";

import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { agentSpec, agentTaskParts, agentTaskRef, changedParts } from "../src/agent/agent-task/agent-spec.js";
import {
  LIMIT_RANGES,
  PROGRAM_MODEL,
  checkAgentTask,
  defineAgentProgram,
  defineAgentTask,
  loadAgentTask,
  type ProgramContext,
} from "../src/agent/agent-task/define.js";
import { DEFAULT_ROLLOUT_TIMEOUT_MS, episodeFrom, startToolHost } from "../src/agent/agent-task/tool-host.js";
import { agentProgramArgv } from "../src/commands/agent-task.js";
import { AgentToolHostService } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { REPO } from "./helpers/sidecar.js";

const ECHO = join(import.meta.dirname, "fixtures", "agent-programs", "echo.program.ts");
const CALCULATOR = join(REPO, "agent-evals", "agent-tasks", "calculator.agent.ts");
const STATS = { turns: 1, toolCalls: 0, toolErrors: 0, unknownToolCalls: 0, malformedCalls: 0, endedBy: "answer" };

function program(run: (task: { id: string; prompt: string }, ctx: ProgramContext) => unknown, limits = {}) {
  return defineAgentProgram({
    name: "p",
    tasks: [
      { id: "a", prompt: "first" },
      { id: "b", prompt: "second", split: "test" },
    ],
    run,
    scorers: { s: { score: () => 1 } },
    limits,
  });
}

/** `fn` refused with a UserError whose message is one line matching `re`. */
function refused(fn: () => unknown, re: RegExp) {
  assert.throws(fn, (err: Error) => {
    assert.equal(err.name, "UserError");
    assert.equal(err.message.split("\n").length, 1, err.message);
    assert.match(err.message, re);
    return true;
  });
}

test("checkAgentTask takes an agent program, and refuses run beside tools, reference or a system prompt, naming the field", () => {
  const p = program(() => "x", { maxTurns: 2, rolloutTimeoutMs: 500 });
  assert.equal(checkAgentTask(p, "f.ts"), p);
  assert.equal(checkAgentTask({ ...p, tools: {} }, "f.ts").name, "p", "an empty tools object is no tool");
  const tool = { description: "", parameters: { type: "object" }, run: () => "ok" };
  refused(() => checkAgentTask({ ...p, tools: { t: tool } }, "f.ts"), /^f\.ts: tools: an agent program runs its own tools; remove tools or run$/);
  refused(() => checkAgentTask({ ...p, run: "go" }, "f.ts"), /^f\.ts: run: must be a function/);
  refused(() => checkAgentTask({ ...p, reference: () => [] }, "f.ts"), /^f\.ts: reference: .*remove reference or run$/);
  refused(() => checkAgentTask({ ...p, systemPrompt: "s" }, "f.ts"), /^f\.ts: systemPrompt: an agent program sends its own system prompt/);
  // without run, tools are required as before
  const { run: _run, ...noRun } = p;
  refused(() => checkAgentTask(noRun, "f.ts"), /^f\.ts: tools: must be an object of name/);
});

test("a rollout timeout outside [1, 3600000] is refused, and each kind's limits stay its own", () => {
  assert.deepEqual(LIMIT_RANGES.rolloutTimeoutMs, [1, 3_600_000]);
  for (const bad of [0, 3_600_001, 1.5, "100"]) {
    refused(
      () =>
        checkAgentTask(
          program(() => "x", { rolloutTimeoutMs: bad }),
          "f.ts",
        ),
      /^f\.ts: limits\.rolloutTimeoutMs: must be an integer in \[1, 3600000\], got /,
    );
  }
  checkAgentTask(
    program(() => "x", { rolloutTimeoutMs: 3_600_000 }),
    "f.ts",
  );
  refused(
    () =>
      checkAgentTask(
        program(() => "x", { toolTimeoutMs: 10 }),
        "f.ts",
      ),
    /^f\.ts: limits\.toolTimeoutMs: bounds an agent task's own tools/,
  );
  refused(
    () =>
      checkAgentTask(
        program(() => "x", { maxToolCalls: 2 } as never),
        "f.ts",
      ),
    /^f\.ts: limits\.maxToolCalls: bounds an agent task's own tools/,
  );
  const task = defineAgentTask({
    name: "t",
    tasks: [{ id: "a", prompt: "p" }],
    tools: {},
    scorers: { s: { score: () => 1 } },
    limits: { rolloutTimeoutMs: 10 },
  });
  refused(() => checkAgentTask(task, "f.ts"), /^f\.ts: limits\.rolloutTimeoutMs: bounds an agent program's rollout; this agent task has no run/);
});

test("--agent-program loads a program as --agent-task, and refuses an agent task file in one line", async () => {
  assert.equal((await loadAgentTask(ECHO, { program: true })).name, "echo");
  await assert.rejects(loadAgentTask(CALCULATOR, { program: true }), (err: Error) => {
    assert.equal(err.name, "UserError");
    assert.equal(err.message.split("\n").length, 1, err.message);
    assert.match(
      err.message,
      /calculator\.agent\.ts: run: --agent-program needs an agent program \(defineAgentProgram\(\{ run, \.\.\. \}\)\); this file is an agent task: use --agent-task/,
    );
    return true;
  });
  assert.deepEqual(await agentProgramArgv(["eval", "--agent-program", ECHO, "--limit", "1"]), ["eval", "--agent-task", ECHO, "--limit", "1"]);
  assert.deepEqual(await agentProgramArgv([`--agent-program=${ECHO}`]), ["--agent-task", ECHO]);
  await assert.rejects(agentProgramArgv(["--agent-program", CALCULATOR]), /run: --agent-program needs an agent program/);
  await assert.rejects(agentProgramArgv(["--agent-program", ECHO, "--agent-task", ECHO]), /--agent-program and --agent-task both name the agent: give one/);
  await assert.rejects(agentProgramArgv(["--agent-program", "nope.ts"]), /^UserError: --agent-program: no such file: nope\.ts$/);
  // --agent-task takes a program too: one loader, the program is an agent task with run
  assert.equal(typeof (await loadAgentTask(ECHO)).run, "function");
});

test("a program's AgentSpec has program and no tools; its run's source is the part 'program'", () => {
  const p = program((task) => task.prompt);
  const spec = agentSpec(p, "127.0.0.1:1", agentTaskRef(p, ECHO));
  assert.deepEqual(spec.program, { timeoutMs: DEFAULT_ROLLOUT_TIMEOUT_MS });
  assert.deepEqual(spec.tools, []);
  assert.equal(spec.toolTimeoutMs, undefined, "a program runs its own tools: no tool limits in its spec");
  assert.equal(spec.maxToolCalls, undefined, "nor a tool-call limit: the sidecar does not count a program's calls against one");
  assert.equal(spec.maxTurns, 4);
  assert.deepEqual(
    agentSpec(
      program(() => 1, { rolloutTimeoutMs: 900 }),
      "h:1",
      agentTaskRef(
        program(() => 1, { rolloutTimeoutMs: 900 }),
        ECHO,
      ),
    ).program,
    {
      timeoutMs: 900,
    },
  );
  const parts = agentTaskParts(p);
  assert.ok(parts.program, JSON.stringify(parts));
  assert.deepEqual(changedParts(parts, agentTaskParts(program((task) => task.prompt))), []);
  assert.deepEqual(changedParts(parts, agentTaskParts(program((task) => task.id))), ["program"]);
  assert.deepEqual(changedParts(parts, agentTaskParts(program((task) => task.prompt, { rolloutTimeoutMs: 5 }))), ["limits"]);
  // an agent task with tools has no program part, and its AgentSpec no program
  const calc = defineAgentTask({ name: "t", tasks: [{ id: "a", prompt: "p" }], tools: {}, scorers: { s: { score: () => 1 } } });
  assert.equal(agentTaskParts(calc).program, undefined);
  assert.equal(agentSpec(calc, "h:1", agentTaskRef(calc, ECHO)).program, undefined);
});

test("RunRollout: the value returned, a throw and a hang are answered; ScoreEpisode gives the value as episode.final, once", async () => {
  const seen: Array<{ task: string; ctx: Omit<ProgramContext, "signal">; signal: boolean }> = [];
  const finals: unknown[] = [];
  let hungSignal: AbortSignal | undefined;
  const p = defineAgentProgram({
    name: "p",
    tasks: [
      { id: "ok", prompt: "p" },
      { id: "none", prompt: "p" },
      { id: "boom", prompt: "p" },
      { id: "hang", prompt: "p" },
    ],
    run: async (task, { baseURL, apiKey, model, signal }) => {
      seen.push({ task: task.id, ctx: { baseURL, apiKey, model }, signal: signal instanceof AbortSignal });
      if (task.id === "none") return undefined;
      if (task.id === "boom") throw new Error("no route to the model\n    at stack");
      if (task.id === "hang") {
        hungSignal = signal;
        return new Promise(() => {});
      }
      return { answer: "done", calls: 2 };
    },
    scorers: { s: { score: (ep) => (finals.push(ep.final), 1) } },
  });
  const host = await startToolHost(p);
  try {
    const client = createClient(AgentToolHostService, createGrpcTransport({ baseUrl: `http://${host.address}` }));
    const rollout = (taskId: string, episodeId: string, timeoutMs = 5000) =>
      client.runRollout({ taskId, episodeId, baseUrl: `http://127.0.0.1:9/rollouts/${episodeId}/v1`, apiKey: "k", timeoutMs });

    const ok = await rollout("ok", "e1");
    assert.deepEqual(ok, { ...ok, finalJson: '{"answer":"done","calls":2}', error: "" });
    assert.deepEqual(seen[0], { task: "ok", ctx: { baseURL: "http://127.0.0.1:9/rollouts/e1/v1", apiKey: "k", model: PROGRAM_MODEL }, signal: true });
    assert.equal((await rollout("none", "e2")).finalJson, "", "undefined is no JSON at all");
    const boom = await rollout("boom", "e3");
    assert.equal(boom.error, "the agent program threw: no route to the model");
    const t0 = Date.now();
    const hang = await rollout("hang", "e4", 100);
    assert.equal(hang.error, "the agent program ran past its timeout of 100 ms");
    assert.ok(Date.now() - t0 < 2000, `answered ${Date.now() - t0} ms after the call`);
    assert.equal(hungSignal?.aborted, true, "the program's signal is aborted at the timeout");
    assert.deepEqual({ run: host.counters.rolloutsRun, failed: host.counters.rolloutsFailed }, { run: 4, failed: 2 });

    const messagesJson = JSON.stringify([
      { role: "user", content: "p" },
      { role: "assistant", content: "done" },
    ]);
    const score = (episodeId: string) => client.scoreEpisode({ taskId: "ok", episodeId, messagesJson, stats: STATS, finalAnswer: "x" });
    assert.deepEqual((await score("e1")).scores, { s: 1 });
    await score("e1"); // the value was handed over once, then dropped
    await score("e2");
    assert.deepEqual(finals, [{ answer: "done", calls: 2 }, undefined, undefined]);
  } finally {
    await host.close();
  }
});

test("an agent task's host refuses RunRollout; a program's tool calls reach the scorers with their arguments as objects", async () => {
  const task = defineAgentTask({ name: "t", tasks: [{ id: "a", prompt: "p" }], tools: {}, scorers: { s: { score: () => 1 } } });
  const host = await startToolHost(task);
  try {
    const client = createClient(AgentToolHostService, createGrpcTransport({ baseUrl: `http://${host.address}` }));
    await assert.rejects(client.runRollout({ taskId: "a", episodeId: "e", baseUrl: "http://x/v1", apiKey: "", timeoutMs: 10 }), /has no run/);
  } finally {
    await host.close();
  }
  // OpenAI's wire format carries a call's arguments as JSON text
  const call = { id: "c", type: "function" as const, function: { name: "cancel_order", arguments: '{"order":"AX-1"}' as unknown as Record<string, unknown> } };
  const ep = episodeFrom({ id: "a", prompt: "p" }, [{ role: "assistant", content: "", tool_calls: [call] }], STATS, "", { ok: true });
  assert.deepEqual(ep.toolCalls, [{ name: "cancel_order", arguments: { order: "AX-1" } }]);
  assert.deepEqual(ep.final, { ok: true });
});
