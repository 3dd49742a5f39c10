/**
 * `agent warmstart --agent-task FILE [--config FILE] [--base-model M] [--from reference|sampling]
 * [--demonstrations N] [--run-id ID] [--data-root DIR]`: the warm start before RL (docs/agents.md
 * "Warm start", pipeline/warm-start.ts): demonstrations from the task's reference(task) or from
 * the base's own episodes its scorers pass, then LoRA SFT on them as a run (run.json and the
 * adapter downloaded as for any run). Continue with
 * `agent train --agent-task FILE --init-from RUN`. Exit 0 when the run SUCCEEDED.
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";

import { create } from "@bufbuild/protobuf";

import { loadTrainRequest } from "../agent/train/run.js";
import { dataRoot } from "../agent/workspace.js";
import { TrainRequestSchema } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { warmStartRun } from "../pipeline/warm-start.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, numberFlag, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "A warm start before RL: LoRA SFT on an agent task's demonstrations (reference(task) or the base's episodes its scorers pass).",
  usage:
    "agent warmstart --agent-task FILE [--config FILE] [--base-model M] [--from reference|sampling] [--demonstrations N] [--run-id ID] [--data-root DIR] [--evals-dir DIR]",
  flags: [
    ["--agent-task FILE", "the agent task (docs/agents.md): its train rows, tools and scorers; this process serves them during the run's held-out episodes"],
    ["--config FILE", "a TrainRequest in proto JSON for the knobs (sft, lora, base_model, held_out)"],
    ["--base-model M", "the model to warm-start, over the config's (default: the embedded default model)"],
    [
      "--from SOURCE",
      "reference: the task's reference(task) calls run through its tools (default when it has one); sampling: the base's own episodes that the primary scorer passes",
    ],
    ["--demonstrations N", "with --from reference: about this many demonstrations in all (default 256)"],
    ["--run-id ID", "the run id to ask for (default: the sidecar assigns one)"],
    ["--data-root DIR", "the sidecar's data root, where the demonstrations are written (default $PY_TRAINER_DATA_ROOT or the repository)"],
    ["--evals-dir DIR", "where runs/ live (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)"],
  ],
  notes:
    "Then: agent train --agent-task FILE --init-from RUN (GRPO from the warm start's adapter), and agent eval of that run scores base, warm start and warm start + GRPO.",
  examples: ["agent warmstart --agent-task agent-evals/agent-tasks/shop.agent.ts --base-model smollm2-135m-instruct --run-id shop-warm"],
};

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      "agent-task": { type: "string" },
      config: { type: "string" },
      "base-model": { type: "string" },
      from: { type: "string" },
      demonstrations: { type: "string" },
      "run-id": { type: "string" },
      "data-root": { type: "string" },
      ...EVALS_DIR_FLAG,
      ...GLOBAL_FLAGS,
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length) throw usageError("warmstart", help, `unexpected argument '${positionals[0]}'`);
  if (!values["agent-task"]) throw usageError("warmstart", help, "--agent-task FILE is required");
  if (values.from !== undefined && values.from !== "reference" && values.from !== "sampling")
    throw usageError("warmstart", help, `--from: reference or sampling, got '${values.from}'`);
  const total =
    values.demonstrations === undefined ? undefined : numberFlag("--demonstrations", values.demonstrations, { min: 1, max: 100_000, integer: true });
  const config = values.config ? await loadTrainRequest(resolve(values.config)) : create(TrainRequestSchema);
  const { code } = await warmStartRun(client, values, values["agent-task"], config, {
    dataRoot: resolve(values["data-root"] ?? dataRoot()),
    from: values.from as "reference" | "sampling" | undefined,
    total,
    runId: values["run-id"],
    baseModel: values["base-model"],
  });
  return code;
};
