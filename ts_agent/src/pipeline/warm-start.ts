/**
 * A warm start before RL (issue 53, docs/agents.md "Warm start"): LoRA SFT with TRL's SFTTrainer
 * on demonstration episodes the agent task itself provides, then GRPO from that adapter.
 *
 * The demonstrations, in OpenAI's tool-calling SFT format (agent-task/demonstrations.ts), come from
 * - the task's `reference(task)` (the calls that solve it, run through its real tools; the final
 *   answer is the last tool's output), when it has one; or
 * - rejection sampling: the base's own episodes on the train tasks (K per task at temperature 1,
 *   through the one Evaluate), kept when the task's primary scorer passes them (>= 0.5).
 * They are written under the sidecar's data root; the SFT run (TrainRequest mode SFT, the task's
 * AgentSpec for the template and the held-out episodes) is a run like any other, followed while
 * this process serves the tools. `agent train --agent-task FILE --init-from RUN` then starts GRPO
 * from its adapter (TrainRequest.init_adapter), and `agent eval` of that run scores base, warm
 * start and warm start + GRPO side by side (verdict/warm-start.ts).
 */
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

import { create } from "@bufbuild/protobuf";

import { agentSpec, agentTaskRef, rowsOf, taskRows } from "../agent/agent-task/agent-spec.js";
import { loadAgentTask, primaryScorer, type AgentTask, type AgentTaskRow } from "../agent/agent-task/define.js";
import { PROGRAM_NO_DEMONSTRATIONS, writeDemonstrations, type DemonstrationSettings } from "../agent/agent-task/demonstrations.js";
import { loadAgentTaskSet } from "../agent/eval/agent-task-set.js";
import { DEFAULT_EVAL_SETTINGS, settingsForTaskSet } from "../agent/eval/evaluate.js";
import { trainViaSidecar, type TrainOutcome } from "../agent/train/run.js";
import { UserError, writeFileAtomic } from "../agent/workspace.js";
import { TrainMode, TrainRequestSchema, type TrainRequest } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../sidecar/client.js";
import { followServing } from "./agent-run.js";
import { sampleEpisodes } from "./agent-preflight.js";

/** Reference demonstrations: every one right (the warm start teaches the skill; RL sharpens it). */
export const WARM_START_DEMONSTRATIONS: DemonstrationSettings = { total: 256, correctShare: 1, guessShare: 0, seed: 0 };
/** held_out.num_prompts when the config does not set it (the sidecar's default). */
export const DEFAULT_HELD_OUT_PROMPTS = 32;
/** Rejection sampling: episodes sampled per train task, and how many train tasks. */
export const SAMPLING = { perTask: 8, tasks: 64 };

type Flags = { address?: string; token?: string; "evals-dir"?: string };

export interface WarmStartOptions {
  /** where the demonstrations go: the sidecar's data root */
  dataRoot: string;
  /** "reference" (default when the task has one) or "sampling" */
  from?: "reference" | "sampling";
  /** reference demonstrations in all */
  total?: number;
  /** the last this many train rows are the held-out tasks (GRPO's own held-out rows from the same
   *  dataset, so a GRPO run from the warm start measures its step 0 on the same tasks): never
   *  demonstrated */
  heldOut?: number;
  runId?: string;
  baseModel?: string;
}

/** The train rows demonstrations are made from: all but the last `heldOut` (the held-out tasks). */
function demonstrated(task: AgentTask, heldOut: number): AgentTaskRow[] {
  const rows = rowsOf(task, "train");
  return rows.slice(0, Math.max(0, rows.length - heldOut));
}

/** Write the warm start's demonstrations; returns their path relative to the data root and how they were made. */
export async function warmStartDemonstrations(
  client: SidecarClient,
  task: AgentTask,
  file: string,
  baseModel: string,
  opts: WarmStartOptions,
): Promise<{ path: string; count: number; how: string }> {
  const from = opts.from ?? (task.reference ? "reference" : "sampling");
  const rel = join("sidecar-data", "warm-start", `${task.name}.${from}.jsonl`);
  const abs = resolve(opts.dataRoot, rel);
  mkdirSync(dirname(abs), { recursive: true });
  if (from === "reference") {
    if (!task.reference) throw new UserError(`${file}: reference: --from reference needs the task's reference(task) tool calls (or use --from sampling)`);
    const count = await writeDemonstrations(task, demonstrated(task, opts.heldOut ?? 0), abs, {
      ...WARM_START_DEMONSTRATIONS,
      total: opts.total ?? WARM_START_DEMONSTRATIONS.total,
    });
    return { path: rel, count, how: `${count} demonstrations from reference(task), run through the task's tools` };
  }
  // rejection sampling: the base's own episodes that the task's primary scorer passes
  const taskSet = await loadAgentTaskSet(file, "train");
  taskSet.rows = taskSet.rows.slice(0, Math.max(0, taskSet.rows.length - (opts.heldOut ?? 0))).slice(0, SAMPLING.tasks);
  const settings = settingsForTaskSet(
    { ...DEFAULT_EVAL_SETTINGS, baseModel, split: "train", samplesPerTask: SAMPLING.perTask, temperature: 1, seed: 0 },
    taskSet,
  );
  const sampledEpisodes = await sampleEpisodes(client, taskSet, settings, "warm start: sampling");
  const primary = primaryScorer(task);
  const tools = Object.entries(task.tools ?? {}).map(([name, t]) => ({ name, description: t.description, parameters: t.parameters }));
  const kept: string[] = [];
  let sampled = 0;
  for (const episodes of sampledEpisodes.values()) {
    for (const e of episodes) {
      sampled++;
      if ((e.scores[primary] ?? 0) >= 0.5) kept.push(JSON.stringify({ tools, messages: e.messages }));
    }
  }
  if (kept.length === 0) {
    throw new UserError(
      `${file}: rejection sampling kept none of the base's ${sampled} episodes (${taskSet.rows.length} train tasks x ${SAMPLING.perTask}): ` +
        `${primary} passed none; give the task reference(task) calls, or sample a stronger model (--base-model)`,
    );
  }
  writeFileAtomic(abs, kept.join("\n") + "\n");
  return { path: rel, count: kept.length, how: `${kept.length} of the base's ${sampled} sampled episodes that ${primary} passed (rejection sampling)` };
}

/** The warm start's run: SFT on the demonstrations, followed while this process serves the tools. */
export async function warmStartRun(
  client: SidecarClient,
  values: Flags,
  file: string,
  config: TrainRequest,
  opts: WarmStartOptions,
): Promise<{ code: number; outcome: TrainOutcome | null }> {
  const task = await loadAgentTask(file);
  if (task.run) throw new UserError(`${file}: run: ${PROGRAM_NO_DEMONSTRATIONS}`);
  const baseModel = opts.baseModel ?? config.baseModel;
  const heldOut = config.heldOut?.numPrompts || DEFAULT_HELD_OUT_PROMPTS;
  const train = rowsOf(task, "train");
  if (train.length <= heldOut)
    throw new UserError(`${file}: tasks: ${train.length} train rows, not more than held_out.num_prompts (${heldOut}): nothing left to demonstrate`);
  const demos = await warmStartDemonstrations(client, task, file, baseModel, { ...opts, heldOut });
  console.log(
    `warm start of ${task.name} on ${baseModel || "the embedded default model"}: ${demos.how} -> ${demos.path} (under the data root ${opts.dataRoot}); ` +
      `the last ${heldOut} train tasks are its held-out tasks, never demonstrated`,
  );
  const ref = agentTaskRef(task, file);
  return followServing(
    client,
    values,
    task,
    0,
    (toolHost, follow) => {
      const request = create(TrainRequestSchema, {
        baseModel,
        mode: TrainMode.SFT,
        sft: config.sft,
        lora: config.lora,
        runtime: config.runtime,
        // the held-out episodes sample as the GRPO run from this warm start will (its sampling knobs)
        grpo: { temperature: config.grpo?.temperature, topP: config.grpo?.topP, maxCompletionLength: config.grpo?.maxCompletionLength },
        heldOut: {
          samplesPerPrompt: config.heldOut?.samplesPerPrompt,
          numPrompts: heldOut,
          dataset: { source: { case: "inline", value: { rows: taskRows(train.slice(-heldOut)) } } },
        },
        runId: opts.runId ?? config.runId,
        dataset: { source: { case: "jsonlPath", value: demos.path } },
        agent: agentSpec(task, toolHost, ref),
      });
      return trainViaSidecar(client, request, follow);
    },
    opts.runId ?? config.runId,
  );
}
