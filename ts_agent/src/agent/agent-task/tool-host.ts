/**
 * The TS side of an agent task's episodes: an AgentToolHostService (gRPC over HTTP/2, Connect-ES's
 * node adapter) that the sidecar's episode runner calls for every tool call and every finished
 * episode's scores, so the user's tools and scorers run unchanged in this process (docs/agents.md).
 *
 * A tool that throws or runs past its timeout answers `isError` with what happened: the model sees
 * it as the tool's output and the episode counts a tool error (an output over the limit is cut by
 * the sidecar, which writes the note and counts the error: the rule has one owner). A
 * scorer that throws or gives a number outside [0, 1] fails the call with INVALID_ARGUMENT naming
 * the scorer (the sidecar fails the run with that message: a scorer bug is not a model's error).
 *
 * An agent program (define.ts defineAgentProgram) is served by RunRollout instead of CallTool: the
 * sidecar asks for one rollout of the user's `run` against its OpenAI-compatible endpoint, and this
 * host keeps what `run` returned until ScoreEpisode of that episode gives it to the scorers
 * (`episode.final`). A program that throws or runs past its timeout answers `error` (a failed
 * rollout: the sidecar counts it and never scores it), never a failed call.
 */
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";

import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { AgentToolHostService } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { PROGRAM_MODEL, type AgentTask, type AgentTaskRow, type Episode, type EpisodeMessage } from "./define.js";

/** The contract's AgentSpec defaults (test/agent-limits-defaults.test.ts holds them equal). */
export const DEFAULT_LIMITS = { maxTurns: 4, maxToolCalls: 4, toolTimeoutMs: 5000, maxToolOutputChars: 2000 };
/** The contract's AgentProgram.timeout_ms default (test/agent-limits-defaults.test.ts holds it equal). */
export const DEFAULT_ROLLOUT_TIMEOUT_MS = 120_000;

/** Counts of what the host served (for the progress line and tests). */
export interface HostCounters {
  toolCalls: number;
  toolErrors: number;
  episodesScored: number;
  /** an agent program's rollouts run, and of them those that threw or timed out */
  rolloutsRun: number;
  rolloutsFailed: number;
}

export interface ToolHost {
  /** "127.0.0.1:PORT", for AgentSpec.tool_host */
  address: string;
  counters: HostCounters;
  close: () => Promise<void>;
}

function asText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === undefined) return "";
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

/** The first `n` characters of `text`, counted in code points as the sidecar counts them (Python's
 * `len`), so a surrogate pair is never split. */
function firstChars(text: string, n: number): string {
  if (text.length <= n) return text;
  let units = 0;
  let count = 0;
  for (const ch of text) {
    if (count === n) break;
    units += ch.length;
    count += 1;
  }
  return text.slice(0, units);
}

/** Run one tool call under the task's limits: (output, isError). The output is bounded on the wire
 * at one character past `maxToolOutputChars`: the sidecar's episode runner makes the one cut the
 * model sees, with its note, and counts it a tool error (agents/episodes.py). */
export async function runTool(task: AgentTask, row: AgentTaskRow, episodeId: string, name: string, args: Record<string, unknown>): Promise<[string, boolean]> {
  const limits = { ...DEFAULT_LIMITS, ...task.limits };
  const tool = task.tools?.[name];
  if (!tool) return [`error: unknown tool ${JSON.stringify(name)}`, true];
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new Error(`timed out after ${limits.toolTimeoutMs} ms`));
    }, limits.toolTimeoutMs);
  });
  try {
    const out = asText(await Promise.race([Promise.resolve().then(() => tool.run(args, { task: row, episodeId, signal: controller.signal })), timeout]));
    return [firstChars(out, limits.maxToolOutputChars + 1), false];
  } catch (err) {
    return [`error: ${String((err as Error)?.message ?? err).split("\n")[0]}`, true];
  } finally {
    clearTimeout(timer);
  }
}

/** One rollout's outcome: the JSON text of what `run` returned ("" for undefined) and the value
 *  itself, or the one-line reason it failed. */
export type RolloutOutcome = { ok: true; value: unknown; finalJson: string } | { ok: false; error: string };

/** Run one rollout of an agent program: `run(row, ctx)` under `timeoutMs` (the signal is aborted
 *  when it passes; a program that ignores it is left behind, its result unused). */
export async function runRollout(
  run: NonNullable<AgentTask["run"]>,
  row: AgentTaskRow,
  ctx: { baseURL: string; apiKey: string; timeoutMs: number },
): Promise<RolloutOutcome> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = Symbol("timed out");
  const timeout = new Promise<typeof timedOut>((done) => {
    timer = setTimeout(() => {
      done(timedOut); // settled before the abort, so a program that rejects on abort still reads as a timeout
      controller.abort(new Error(`the rollout ran past ${ctx.timeoutMs} ms`));
    }, ctx.timeoutMs);
  });
  let value: unknown;
  try {
    const out = await Promise.race([
      Promise.resolve().then(() => run(row, { baseURL: ctx.baseURL, apiKey: ctx.apiKey, signal: controller.signal, model: PROGRAM_MODEL })),
      timeout,
    ]);
    if (out === timedOut) return { ok: false, error: `the agent program ran past its timeout of ${ctx.timeoutMs} ms` };
    value = out;
  } catch (err) {
    if (controller.signal.aborted) return { ok: false, error: `the agent program ran past its timeout of ${ctx.timeoutMs} ms` };
    return { ok: false, error: `the agent program threw: ${firstLine(err)}` };
  } finally {
    clearTimeout(timer);
  }
  let finalJson: string | undefined;
  try {
    finalJson = JSON.stringify(value);
  } catch (err) {
    return { ok: false, error: `the agent program returned a value that is not JSON: ${firstLine(err)}` };
  }
  return { ok: true, value, finalJson: finalJson ?? "" };
}

function firstLine(err: unknown): string {
  return String((err as Error)?.message ?? err).split("\n")[0];
}

/** A tool call's arguments as a scorer sees them: an object (OpenAI's wire format sends a JSON string). */
function argumentsObject(args: unknown): Record<string, unknown> {
  if (typeof args !== "string") return (args ?? {}) as Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(args || "{}");
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** The episode a scorer sees, from the sidecar's transcript and the final answer its episode runner
 * computed (ScoreEpisodeRequest.final_answer: the one rule, never parsed again here). */
export function episodeFrom(row: AgentTaskRow, messages: EpisodeMessage[], stats: Episode["stats"], finalAnswer: string, final?: unknown): Episode {
  const toolCalls = messages.flatMap((m) => (m.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: argumentsObject(c.function.arguments) })));
  return { task: row, messages, finalAnswer, toolCalls, stats, ...(final === undefined ? {} : { final }) };
}

/** Every scorer on one episode; a throw or a score outside [0, 1] is a ConnectError naming the scorer.
 * The one range check of a score (the sidecar trusts this host's scores: agents/tool_host.py). */
export async function scoreEpisode(task: AgentTask, episode: Episode): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [name, scorer] of Object.entries(task.scorers)) {
    let v: number;
    try {
      v = await scorer.score(episode);
    } catch (err) {
      throw new ConnectError(
        `scorers.${name}: threw on task ${episode.task.id}: ${String((err as Error)?.message ?? err).split("\n")[0]}`,
        Code.InvalidArgument,
      );
    }
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || v > 1) {
      throw new ConnectError(`scorers.${name}: gave ${describeValue(v)} on task ${episode.task.id}; a score must be a number in [0, 1]`, Code.InvalidArgument);
    }
    out[name] = v;
  }
  return out;
}

/** A scorer's value as a refusal shows it: the value and its type (`"1" (a string)`, `1.5`). */
function describeValue(v: unknown): string {
  if (typeof v === "number") return String(v);
  if (v === null || v === undefined) return String(v);
  const shown =
    typeof v === "string"
      ? JSON.stringify(v)
      : (() => {
          try {
            return JSON.stringify(v) ?? String(v);
          } catch {
            return String(v);
          }
        })();
  const kind = typeof v === "object" ? (Array.isArray(v) ? "an array" : "an object") : `a ${typeof v}`;
  return `${shown.length > 80 ? `${shown.slice(0, 80)}...` : shown} (${kind})`;
}

/** Serve the task's tools and scorers on 127.0.0.1 (an ephemeral port unless `port` is given). */
export async function startToolHost(task: AgentTask, port = 0): Promise<ToolHost> {
  const rows = new Map(task.tasks.map((r) => [r.id, r]));
  const counters: HostCounters = { toolCalls: 0, toolErrors: 0, episodesScored: 0, rolloutsRun: 0, rolloutsFailed: 0 };
  // what each agent program's rollout returned, by episode id, until its ScoreEpisode
  const finals = new Map<string, unknown>();
  const rowOf = (id: string): AgentTaskRow => {
    const row = rows.get(id);
    if (!row) throw new ConnectError(`task_id: no task ${JSON.stringify(id)} in ${task.name}`, Code.NotFound);
    return row;
  };
  const routes = (router: ConnectRouter) =>
    router.service(AgentToolHostService, {
      async callTool(req) {
        const row = rowOf(req.taskId);
        let args: Record<string, unknown>;
        try {
          args = JSON.parse(req.argumentsJson || "{}");
        } catch {
          return { output: "error: the arguments are not JSON", isError: true };
        }
        // the arguments were checked against the tool's schema by the sidecar's episode runner, the one
        // place: it parses and counts the model's calls, so a mismatch is a malformed call there, never a tool error here
        counters.toolCalls += 1;
        const [output, isError] = await runTool(task, row, req.episodeId, req.name, args);
        if (isError) counters.toolErrors += 1;
        return { output, isError };
      },
      async runRollout(req) {
        const row = rowOf(req.taskId);
        if (!task.run) throw new ConnectError(`${task.name} is an agent task with tools, not an agent program (it has no run)`, Code.FailedPrecondition);
        const timeoutMs = req.timeoutMs || task.limits?.rolloutTimeoutMs || DEFAULT_ROLLOUT_TIMEOUT_MS;
        counters.rolloutsRun += 1;
        const out = await runRollout(task.run, row, { baseURL: req.baseUrl, apiKey: req.apiKey, timeoutMs });
        if (!out.ok) {
          counters.rolloutsFailed += 1;
          return { finalJson: "", error: out.error };
        }
        finals.set(req.episodeId, out.value);
        return { finalJson: out.finalJson, error: "" };
      },
      async scoreEpisode(req) {
        const row = rowOf(req.taskId);
        const final = finals.get(req.episodeId);
        finals.delete(req.episodeId);
        const s = req.stats;
        const episode = episodeFrom(
          row,
          JSON.parse(req.messagesJson) as EpisodeMessage[],
          {
            turns: s?.turns ?? 0,
            toolCalls: s?.toolCalls ?? 0,
            toolErrors: s?.toolErrors ?? 0,
            unknownToolCalls: s?.unknownToolCalls ?? 0,
            malformedCalls: s?.malformedCalls ?? 0,
            endedBy: s?.endedBy ?? "",
          },
          req.finalAnswer,
          final,
        );
        const scores = await scoreEpisode(task, episode);
        counters.episodesScored += 1;
        return { scores };
      },
    });
  const server = http2.createServer(connectNodeAdapter({ routes }));
  const sessions = new Set<http2.ServerHttp2Session>(); // the sidecar keeps its channel open: closed with the server
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  await new Promise<void>((resolveListen, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolveListen());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${bound}`,
    counters,
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        for (const s of sessions) s.destroy();
      }),
  };
}
