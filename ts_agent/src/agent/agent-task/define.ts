/**
 * An agent task, defined in TypeScript by its user (docs/agents.md): the tasks, the tools (TS
 * functions with JSON-schema parameters, OpenAI's function-tool format), the scorers (TS
 * functions of the whole episode returning a number in [0, 1]) and the limits. The same file
 * trains (`agent train --agent-task FILE`) and evaluates (`agent eval --agent-task FILE`).
 *
 * An agent program (defineAgentProgram, docs/agent-programs.md) is the same type with `run` and no
 * tools: the user's own agent, its own loop and tools, run by this process against the sidecar's
 * OpenAI-compatible endpoint for each rollout (tool-host.ts runRollout). Being one type, a program
 * goes through the whole agent-task pipeline (task set, eval log, verdict, report, runs, resume).
 *
 * `loadAgentTask` imports the user's module (a .ts file through tsx, or .js/.mjs) and checks it:
 * every mistake is one line naming the field (a UserError: exit 2).
 */
import { pathToFileURL } from "node:url";
import { existsSync } from "node:fs";
import { resolve } from "node:path";

import { Ajv } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";

import type { LoggedMessage } from "../core/eval-log.js";
import { UserError } from "../workspace.js";

/** One task: its id, the prompt the model sees, and anything the scorers need. */
export interface AgentTaskRow {
  id: string;
  prompt: string;
  /** "train" or "test" (default: "train"); `agent eval` uses the test rows. */
  split?: string;
  /** free for the scorers (the expected answer, a rubric, ...) */
  [key: string]: unknown;
}

/** What a tool's `run` gets beside its arguments. */
export interface ToolContext {
  task: AgentTaskRow;
  episodeId: string;
  /** aborted when the tool's timeout passes */
  signal: AbortSignal;
}

export interface AgentTool {
  description: string;
  /** JSON schema of the arguments object */
  parameters: Record<string, unknown>;
  /** The result goes to the model as text (a non-string is JSON-encoded); a throw becomes an error observation. */
  run: (args: Record<string, unknown>, ctx: ToolContext) => unknown | Promise<unknown>;
}

/** A message of a finished episode (OpenAI chat format): the eval log's message type, one definition. */
export type EpisodeMessage = LoggedMessage;

/** A finished episode as a scorer sees it. */
export interface Episode {
  task: AgentTaskRow;
  messages: EpisodeMessage[];
  /** the last assistant turn's text without tool-call blocks when the episode ended by an answer
   * (`stats.endedBy` "answer"); "" when a limit ended it ("max_turns", "max_tool_calls",
   * "max_tokens"): an episode cut off gave no answer, whatever its last turn said. Computed once by
   * the sidecar's episode runner (ScoreEpisodeRequest.final_answer); Evaluate's completion is the same. */
  finalAnswer: string;
  toolCalls: Array<{ name: string; arguments: Record<string, unknown> }>;
  /** an agent program's rollout: the value its `run` returned (undefined for an agent task's
   *  episode, or a program that returned nothing); `finalAnswer` is the same value as text */
  final?: unknown;
  stats: { turns: number; toolCalls: number; toolErrors: number; unknownToolCalls: number; malformedCalls: number; endedBy: string };
}

/** What an agent program's `run` gets beside its task: where its OpenAI client points for this one rollout. */
export interface ProgramContext {
  /** the OpenAI base URL of this rollout (the sidecar's endpoint; every call made there is recorded for it) */
  baseURL: string;
  /** the OpenAI client's apiKey (the sidecar's token) */
  apiKey: string;
  /** aborted when the rollout's timeout passes */
  signal: AbortSignal;
  /** the name to send as OpenAI's `model` (PROGRAM_MODEL: the endpoint serves the policy of the rollout's URL) */
  model: string;
}

export interface AgentScorer {
  /** weight in the episode's reward (default 1) */
  weight?: number;
  score: (episode: Episode) => number | Promise<number>;
}

export interface AgentLimits {
  /** model turns per episode (default 4) */
  maxTurns?: number;
  /** tool calls per episode (default 4) */
  maxToolCalls?: number;
  /** per tool call, ms (default 5000) */
  toolTimeoutMs?: number;
  /** a tool's output is cut to this many characters (default 2000) */
  maxToolOutputChars?: number;
  /** an agent program's rollout, ms (default 120000: tool-host.ts DEFAULT_ROLLOUT_TIMEOUT_MS) */
  rolloutTimeoutMs?: number;
}

/** The limits that mean something for an agent program: model calls and tool calls per rollout (the
 *  sidecar's endpoint counts them) and the rollout's wall-clock time. */
export type AgentProgramLimits = Pick<AgentLimits, "maxTurns" | "rolloutTimeoutMs">;

export interface AgentTask {
  name: string;
  tasks: AgentTaskRow[];
  /** required unless `run` is set (an agent program runs its own tools) */
  tools?: Record<string, AgentTool>;
  scorers: Record<string, AgentScorer>;
  /** the scorer whose per-task score `agent eval` judges (default: the first) */
  primaryScorer?: string;
  systemPrompt?: string;
  limits?: AgentLimits;
  /** The tool calls that solve a task. Optional: `agent demo --agent-task` uses it to write the
   *  demonstration episodes its embedded agent model is built from (docs/agents.md). */
  reference?: (task: AgentTaskRow) => Array<{ name: string; arguments: Record<string, unknown> }>;
  /** Set: an agent program (defineAgentProgram), with no tools, system prompt or reference. */
  run?: (task: AgentTaskRow, ctx: ProgramContext) => unknown | Promise<unknown>;
}

/** An agent program as its user writes it: the user's own agent in `run`, pointed at `ctx.baseURL`. */
export interface AgentProgram {
  name: string;
  tasks: AgentTaskRow[];
  /** one rollout of the user's agent on one task; its return value is the scorers' `episode.final` */
  run: (task: AgentTaskRow, ctx: ProgramContext) => unknown | Promise<unknown>;
  scorers: Record<string, AgentScorer>;
  /** the scorer `agent eval` judges per task (default: the first) */
  primaryScorer?: string;
  limits?: AgentProgramLimits;
}

/** Identity with types: `export default defineAgentTask({...})`. */
export function defineAgentTask(task: AgentTask): AgentTask {
  return task;
}

/** `export default defineAgentProgram({...})`: an agent task whose episodes are `run`'s rollouts. */
export function defineAgentProgram(program: AgentProgram): AgentTask {
  return program;
}

/** The `model` an agent program sends: the endpoint serves the policy of the rollout's URL under any name. */
export const PROGRAM_MODEL = "policy";

/** An agent program (it has `run`), not an agent task with tools. */
export function isAgentProgram(task: AgentTask): boolean {
  return typeof task.run === "function";
}

/** A tool's name: the sidecar's rule (py_trainer agents/spec.py TOOL_NAME, the proto's ToolSpec.name),
 * checked here too so a bad file fails before a run starts; test/agent-limits-defaults.test.ts pins it. */
export const TOOL_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
/** Each limit's [min, max]: the contract's AgentSpec ranges (config.py's AGENT table), pinned by
 * test/agent-limits-defaults.test.ts against the proto. */
export const LIMIT_RANGES: Record<keyof AgentLimits, [number, number]> = {
  maxTurns: [1, 32],
  maxToolCalls: [0, 64],
  toolTimeoutMs: [1, 600_000],
  maxToolOutputChars: [1, 100_000],
  rolloutTimeoutMs: [1, 3_600_000],
};
/** The limits of an agent task's own tools, meaningless for an agent program (and the reverse). */
const TOOL_LIMITS = new Set(["maxToolCalls", "toolTimeoutMs", "maxToolOutputChars"]);
const PROGRAM_LIMITS = new Set(["rolloutTimeoutMs"]);

/** A tool's parameters schema, bounded before it is checked: its JSON text in characters (the whole
 * schema goes into every prompt) and its levels of nesting (objects and arrays). The sidecar's rule
 * (agents/spec.py SCHEMA_MAX_CHARS, SCHEMA_MAX_DEPTH; the proto's ToolSpec.parameters_json), pinned by
 * test/agent-tool-schemas.test.ts. */
export const SCHEMA_MAX_CHARS = 10_000;
export const SCHEMA_MAX_DEPTH = 32;
/** The meta-schemas a tool's schema is checked against, by its `$schema` (none: 2020-12); the
 * sidecar's jsonschema checks the same two (agents/spec.py SCHEMA_DRAFTS). Arguments are checked
 * against the schema by the sidecar's episode runner alone, where calls are parsed and counted. */
const DRAFTS: Record<
  string,
  () => { validateSchema(s: object): boolean | Promise<unknown>; errors?: Array<{ instancePath: string; message?: string }> | null }
> = {
  "https://json-schema.org/draft/2020-12/schema": () => new Ajv2020({ strict: false }),
  "http://json-schema.org/draft-07/schema": () => new Ajv({ strict: false }),
};

/** The deepest nesting of objects and arrays under `value`, walked without recursion; stops past
 * `limit` (a cycle is nesting without end). */
function jsonDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    deepest = Math.max(deepest, depth);
    if (deepest > limit) return deepest;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/** Why `schema` is not a tool's parameters schema (bounded in depth and size, valid under its
 * draft's meta-schema), or null. */
export function schemaProblem(schema: Record<string, unknown>): string | null {
  if (jsonDepth(schema, SCHEMA_MAX_DEPTH) > SCHEMA_MAX_DEPTH) return `is nested over ${SCHEMA_MAX_DEPTH} levels deep`;
  let text: string;
  try {
    text = JSON.stringify(schema);
  } catch (err) {
    return `is not JSON (${(err as Error).message})`;
  }
  if (text.length > SCHEMA_MAX_CHARS) return `is ${text.length} characters of JSON, over ${SCHEMA_MAX_CHARS} (the schema goes into every prompt)`;
  const name = schema.$schema;
  const draft = name === undefined ? DRAFTS["https://json-schema.org/draft/2020-12/schema"] : DRAFTS[String(name).replace(/#$/, "")];
  if (!draft) return `$schema ${JSON.stringify(name)} is not one of ${Object.keys(DRAFTS).join(", ")}`;
  const ajv = draft();
  if (ajv.validateSchema(JSON.parse(text)) === true) return null;
  const e = ajv.errors?.[0];
  return `is not a JSON Schema (${e?.instancePath || "/"}: ${e?.message ?? "invalid"})`;
}

/** Throw a one-line UserError naming the field when `value` is not a well-formed agent task. */
export function checkAgentTask(value: unknown, file: string): AgentTask {
  const bad = (field: string, what: string): never => {
    throw new UserError(`${file}: ${field}: ${what}`);
  };
  if (typeof value !== "object" || value === null) bad("default export", "must be an agent task object (defineAgentTask({...}))");
  const t = value as Record<string, unknown>;
  if (typeof t.name !== "string" || !t.name) bad("name", "must be a non-empty string");
  if (!Array.isArray(t.tasks) || t.tasks.length === 0) bad("tasks", "must be a non-empty array");
  const ids = new Set<string>();
  (t.tasks as unknown[]).forEach((row, i) => {
    const r = row as Record<string, unknown>;
    if (typeof r !== "object" || r === null) bad(`tasks[${i}]`, "must be an object");
    if (typeof r.id !== "string" || !r.id) bad(`tasks[${i}].id`, "must be a non-empty string");
    if (ids.has(r.id as string)) bad(`tasks[${i}].id`, `${JSON.stringify(r.id)} is used twice`);
    ids.add(r.id as string);
    if (typeof r.prompt !== "string" || !r.prompt.trim()) bad(`tasks[${i}].prompt`, "must be a non-empty string");
    if (r.split !== undefined && r.split !== "train" && r.split !== "test")
      bad(`tasks[${i}].split`, `must be "train" or "test", got ${JSON.stringify(r.split)}`);
  });
  const program = t.run !== undefined;
  if (program) {
    if (typeof t.run !== "function") bad("run", "must be a function of (task, { baseURL, apiKey, signal, model }) (an agent program)");
    if (t.tools !== undefined && (typeof t.tools !== "object" || t.tools === null || Object.keys(t.tools).length > 0))
      bad("tools", "an agent program runs its own tools; remove tools or run");
    if (t.reference !== undefined) bad("reference", "an agent program has no tools to call in reference calls; remove reference or run");
    if (t.systemPrompt !== undefined) bad("systemPrompt", "an agent program sends its own system prompt; remove systemPrompt or run");
  } else if (typeof t.tools !== "object" || t.tools === null) {
    bad("tools", "must be an object of name -> { description, parameters, run } (or give run: an agent program, defineAgentProgram)");
  }
  for (const [name, tool] of Object.entries((t.tools ?? {}) as Record<string, unknown>)) {
    if (!TOOL_NAME.test(name)) bad(`tools.${name}`, `a tool name must match ${TOOL_NAME.source.slice(1, -1)}`);
    const x = tool as Record<string, unknown>;
    if (typeof x?.run !== "function") bad(`tools.${name}.run`, "must be a function");
    if (typeof x.description !== "string") bad(`tools.${name}.description`, "must be a string");
    if (typeof x.parameters !== "object" || x.parameters === null || Array.isArray(x.parameters))
      bad(`tools.${name}.parameters`, "must be a JSON-schema object");
    const problem = schemaProblem(x.parameters as Record<string, unknown>);
    if (problem) bad(`tools.${name}.parameters`, problem);
  }
  if (typeof t.scorers !== "object" || t.scorers === null || Object.keys(t.scorers).length === 0) bad("scorers", "must name at least one scorer");
  for (const [name, scorer] of Object.entries(t.scorers as Record<string, unknown>)) {
    const s = scorer as Record<string, unknown>;
    if (typeof s?.score !== "function") bad(`scorers.${name}.score`, "must be a function");
    if (s.weight !== undefined && (typeof s.weight !== "number" || !Number.isFinite(s.weight))) bad(`scorers.${name}.weight`, "must be a finite number");
  }
  if (t.primaryScorer !== undefined && !(typeof t.primaryScorer === "string" && t.primaryScorer in (t.scorers as object))) {
    bad("primaryScorer", `must name one of the scorers (${Object.keys(t.scorers as object).join(", ")})`);
  }
  if (t.systemPrompt !== undefined && typeof t.systemPrompt !== "string") bad("systemPrompt", "must be a string");
  if (t.reference !== undefined && typeof t.reference !== "function") bad("reference", "must be a function of a task returning its tool calls");
  const limits = (t.limits ?? {}) as Record<string, unknown>;
  for (const [key, value] of Object.entries(limits)) {
    const range = LIMIT_RANGES[key as keyof AgentLimits];
    if (!range) bad(`limits.${key}`, `unknown limit (one of ${Object.keys(LIMIT_RANGES).join(", ")})`);
    if (program && TOOL_LIMITS.has(key)) bad(`limits.${key}`, "bounds an agent task's own tools; an agent program runs its own (remove it)");
    if (!program && PROGRAM_LIMITS.has(key)) bad(`limits.${key}`, "bounds an agent program's rollout; this agent task has no run (remove it)");
    if (typeof value !== "number" || !Number.isInteger(value) || value < range[0] || value > range[1]) {
      bad(`limits.${key}`, `must be an integer in [${range[0]}, ${range[1]}], got ${JSON.stringify(value)}`);
    }
  }
  return value as AgentTask;
}

/** The one line that says why a module did not load: a compile error's "file:line:column: message"
 *  (esbuild, through tsx, puts it on the lines after "Transform failed with N error(s):"), else the
 *  error's first line. */
export function loadErrorLine(err: unknown): string {
  const lines = String((err as Error)?.message ?? err).split("\n");
  const located = lines.map((l) => /^(.*?:\d+:\d+): ERROR: (.*)$/.exec(l.trim())).find((m) => m !== null);
  if (located) return `${located[1]}: ${located[2]}`;
  return lines.find((l) => l.trim() !== "") ?? "";
}

/** Import the user's agent task module (its default export, else its `agentTask` export) and check it;
 *  `opts.program`: refuse one that is not an agent program (`--agent-program FILE`). */
export async function loadAgentTask(path: string, opts: { program?: boolean } = {}): Promise<AgentTask> {
  const flag = opts.program ? "--agent-program" : "--agent-task";
  const file = resolve(path);
  if (!existsSync(file)) throw new UserError(`${flag}: no such file: ${path}`);
  let mod: Record<string, unknown>;
  try {
    if (/\.(c|m)?ts$/.test(file)) {
      const { tsImport } = await import("tsx/esm/api");
      mod = (await tsImport(pathToFileURL(file).href, import.meta.url)) as Record<string, unknown>;
    } else {
      mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
    }
  } catch (err) {
    throw new UserError(`${path}: cannot be loaded: ${loadErrorLine(err)}`);
  }
  let exported = mod.default ?? mod.agentTask;
  // a file outside an ESM package is loaded as CommonJS: its default export arrives one level down
  const inner = exported as Record<string, unknown> | undefined;
  if (inner && typeof inner === "object" && !("name" in inner) && ("default" in inner || "agentTask" in inner)) exported = inner.default ?? inner.agentTask;
  const task = checkAgentTask(exported, path);
  if (opts.program && !isAgentProgram(task))
    throw new UserError(
      `${path}: run: --agent-program needs an agent program (defineAgentProgram({ run, ... })); this file is an agent task: use --agent-task`,
    );
  return task;
}

/** The scorer `agent eval` judges on. */
export function primaryScorer(task: AgentTask): string {
  return task.primaryScorer ?? Object.keys(task.scorers)[0];
}
