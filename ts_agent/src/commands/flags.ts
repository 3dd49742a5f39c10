/**
 * What every `agent` command shares: the handler signature, the global flags (declared here once;
 * cli.ts reads them before the command name, and every command accepts them after it too), the
 * client they build, and the flag groups more than one command takes.
 */
import { resolve } from "node:path";

import { DEFAULT_EVAL_SETTINGS, type EvalSettings } from "../agent/eval/harness.js";
import { defaultTasksPath } from "../agent/eval/tasks.js";
import { evalsDirOrDefault } from "../agent/workspace.js";
import { SidecarClient } from "../sidecar/client.js";

/** One `agent` command: its arguments after the command name -> exit code. */
export type CommandHandler = (argv: string[], client: SidecarClient) => Promise<number>;

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
    timeoutMs: values.timeout ? Number(values.timeout) : undefined,
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

/** `agent eval` and `agent baseline set`: what to evaluate on. */
export const EVAL_FLAGS = {
  tasks: { type: "string" },
  limit: { type: "string" },
  "base-model": { type: "string" },
  ...EVALS_DIR_FLAG,
} as const;

export const EVAL_FLAGS_USAGE = `  --tasks PATH        task file (default agent-evals/tasks/aml_typology.jsonl)
  --limit N           only the first N test tasks (the milestone needs >= 200; default all)
  --base-model M      base model as the sidecar knows it (default: the embedded default model)
  --evals-dir DIR     where baseline.json and runs/ live (default agent-evals/)`;

export interface EvalTarget {
  settings: EvalSettings;
  tasksPath: string;
  evalsDir: string;
}

/** Settings, task file and evals dir from the eval flags. */
export function evalTargetFromFlags(values: { tasks?: string; limit?: string; "base-model"?: string; "evals-dir"?: string }): EvalTarget {
  const limit = values.limit === undefined ? 0 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 0) throw new Error(`--limit must be a non-negative integer, got ${values.limit}`);
  return {
    settings: { ...DEFAULT_EVAL_SETTINGS, graders: [...DEFAULT_EVAL_SETTINGS.graders], baseModel: values["base-model"] ?? "", limit },
    tasksPath: values.tasks ? resolve(values.tasks) : defaultTasksPath(),
    evalsDir: evalsDirOrDefault(values["evals-dir"]),
  };
}
