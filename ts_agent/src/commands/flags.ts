/**
 * What every `agent` command shares: the handler signature and its help, the global flags
 * (declared here once; cli.ts reads them before the command name, and every command accepts them
 * after it too), the client they build, number flags that refuse "abc", and the flag groups more
 * than one command takes.
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";

import { DEFAULT_EVAL_SETTINGS } from "../agent/eval/evaluate.js";
import { type EvalSettings } from "../agent/core/eval-log.js";
import { TASKS_RELATIVE_PATH, defaultTasksPath } from "../agent/eval/tasks.js";
import { UserError, evalsDirOrDefault } from "../agent/workspace.js";
import type { EvalTarget } from "../pipeline/eval-target.js";
import { followRun } from "../pipeline/follow.js";
import { SidecarClient } from "../sidecar/client.js";

/** One `agent` command: its arguments after the command name -> exit code. */
export type CommandHandler = (argv: string[], client: SidecarClient) => Promise<number>;

/** What `agent <command> --help` prints: usage, every flag, an example. */
export interface CommandHelp {
  /** one line, also shown by `agent --help` */
  summary: string;
  /** "agent train --config FILE [--run-id ID]" */
  usage: string;
  /** ["--config FILE", "a TrainRequest in proto JSON"], ... (global flags are added) */
  flags: Array<[string, string]>;
  examples: string[];
  /** a paragraph after the flags */
  notes?: string;
}

export const GLOBAL_FLAGS_HELP: Array<[string, string]> = [
  ["--address HOST:PORT", "the sidecar (default $AGENT_SIDECAR or 127.0.0.1:50151)"],
  ["--token T", "bearer token for a non-loopback sidecar (default $PY_TRAINER_TOKEN)"],
  ["--timeout MS", "deadline of each unary call in ms (default 30000)"],
  ["-h, --help", "this help"],
];

/** The full help text of one command. */
export function renderHelp(name: string, help: CommandHelp): string {
  const rows = (flags: Array<[string, string]>) => flags.map(([f, h]) => `  ${f.padEnd(22)} ${h}`).join("\n");
  return [
    `usage: ${help.usage}`,
    "",
    help.summary,
    ...(help.flags.length ? ["", "flags:", rows(help.flags)] : []),
    "",
    "global flags:",
    rows(GLOBAL_FLAGS_HELP),
    ...(help.notes ? ["", help.notes] : []),
    "",
    help.examples.length > 1 ? "examples:" : "example:",
    ...help.examples.map((e) => `  ${e}`),
  ].join("\n");
}

/** The --long names a help lists (for did-you-mean on an unknown flag). */
export function flagNames(help: CommandHelp | undefined): string[] {
  const all = [...(help?.flags ?? []), ...GLOBAL_FLAGS_HELP];
  return all.flatMap(([f]) => f.match(/--[\w-]+/g) ?? []);
}

/** A wrong number of positional arguments, or a missing required flag: one line, exit 2. */
export function usageError(name: string, help: CommandHelp, what: string): UserError {
  return new UserError(`agent ${name}: ${what} (usage: ${help.usage}; see agent ${name} --help)`);
}

// ---------------------------------------------------------------------------------------------
// Numbers

/** A flag's value as a number within [min, max] (integer when `integer`); "abc" is a UserError. */
export function numberFlag(flag: string, value: string, opts: { min?: number; max?: number; integer?: boolean } = {}): number {
  const x = value.trim() === "" ? Number.NaN : Number(value);
  const kind = opts.integer ? "an integer" : "a number";
  if (!Number.isFinite(x) || (opts.integer && !Number.isInteger(x))) throw new UserError(`${flag}: expected ${kind}, got '${value}'`);
  if (opts.min !== undefined && x < opts.min) throw new UserError(`${flag}: must be >= ${opts.min}, got ${value}`);
  if (opts.max !== undefined && x > opts.max) throw new UserError(`${flag}: must be <= ${opts.max}, got ${value}`);
  return x;
}

// ---------------------------------------------------------------------------------------------
// Global flags

/** --address HOST:PORT (default $AGENT_SIDECAR or 127.0.0.1:50151), --token T (default
 *  $PY_TRAINER_TOKEN), --timeout MS, --help. */
export const GLOBAL_FLAGS = {
  address: { type: "string" },
  token: { type: "string" },
  timeout: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

export const DEFAULT_SIDECAR_ADDRESS = "127.0.0.1:50151";

export function clientFromFlags(values: { address?: string; token?: string; timeout?: string }): SidecarClient {
  return new SidecarClient({
    address: values.address ?? process.env.AGENT_SIDECAR ?? DEFAULT_SIDECAR_ADDRESS,
    token: values.token ?? process.env.PY_TRAINER_TOKEN,
    timeoutMs: values.timeout !== undefined ? numberFlag("--timeout", values.timeout, { min: 1, integer: true }) : undefined,
  });
}

// ---------------------------------------------------------------------------------------------
// Shared flag groups

/** `agent train` and `agent demo`: which request, under which run id. */
export const TRAIN_FLAGS = {
  config: { type: "string" },
  "run-id": { type: "string" },
} as const;

/** Every command that reads or writes agent-evals/. */
export const EVALS_DIR_FLAG = {
  "evals-dir": { type: "string" },
} as const;

/** --evals-dir's help for a command that writes one run's folder (train, watch, resume, download). */
export const RUN_DIR_FLAG_HELP: [string, string] = [
  "--evals-dir DIR",
  "where runs/<run_id>/ is written (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)",
];

/** `agent <name> <run_id> [--evals-dir DIR]`: the flags and the one run id (watch, resume, download). */
export function oneRunId(
  name: string,
  help: CommandHelp,
  argv: string[],
): { values: { "evals-dir"?: string; address?: string; token?: string }; runId: string } {
  const { values, positionals } = parseArgs({ args: argv, options: { ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS }, allowPositionals: true, strict: true });
  if (positionals.length !== 1) throw usageError(name, help, positionals.length ? "one run id, please" : "which run? give its id");
  return { values, runId: positionals[0] };
}

/** A command that follows one run to its end and downloads it: `agent watch`, and `agent resume`,
 *  which asks the sidecar to queue the run again `first`. */
export function followOneRun(name: string, help: CommandHelp, first?: (client: SidecarClient, runId: string) => Promise<void>): CommandHandler {
  return async (argv, client) => {
    const { values, runId } = oneRunId(name, help, argv);
    await first?.(client, runId);
    return followRun(client, values, runId);
  };
}

/** Is `--agent-program FILE` among the flags? Then the command reads argv through agent-task.ts
 *  agentProgramArgv first (loaded only then), which makes it `--agent-task FILE`. */
export function hasAgentProgramFlag(argv: string[]): boolean {
  return argv.some((a) => a === "--agent-program" || a.startsWith("--agent-program="));
}

/** `agent eval` and `agent baseline set`: what to evaluate on. */
export const EVAL_FLAGS = {
  tasks: { type: "string" },
  "agent-task": { type: "string" },
  limit: { type: "string" },
  "base-model": { type: "string" },
  ...EVALS_DIR_FLAG,
} as const;

export const EVAL_FLAGS_USAGE = `  --tasks PATH        task file (docs/tasks.md; default ${TASKS_RELATIVE_PATH})
  --agent-task FILE   an agent task file (docs/agents.md) as the task set, instead of --tasks
  --limit N           only the first N test tasks (the milestone needs >= 200; default all)
  --base-model M      base model as the sidecar knows it (default: the embedded default model)
  --evals-dir DIR     where baseline.json and runs/ live (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)`;

/** Settings, task file and evals dir from the eval flags. */
export function evalTargetFromFlags(values: {
  tasks?: string;
  "agent-task"?: string;
  limit?: string;
  "base-model"?: string;
  "evals-dir"?: string;
}): EvalTarget {
  const limit = values.limit === undefined ? 0 : numberFlag("--limit", values.limit, { min: 0, integer: true });
  if (values.tasks !== undefined && values["agent-task"] !== undefined) throw new UserError("--tasks and --agent-task both name the task set: give one");
  const tasks = values.tasks ?? values["agent-task"];
  return {
    settings: { ...DEFAULT_EVAL_SETTINGS, graders: [...DEFAULT_EVAL_SETTINGS.graders], baseModel: values["base-model"] ?? "", limit },
    tasksPath: tasks ? resolve(tasks) : defaultTasksPath(),
    tasksGiven: tasks !== undefined,
    evalsDir: evalsDirOrDefault(values["evals-dir"]),
  };
}
