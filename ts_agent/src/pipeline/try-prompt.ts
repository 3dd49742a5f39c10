/**
 * `agent try`: one prompt through a run's base and its adapter, greedy, printed one after the
 * other. It is an Evaluate of one inline task (one model load, the prompt formatted as `agent eval`
 * formats it: the tokenizer's chat template when it has one), so what it prints is what an eval of
 * that prompt would score. Without an expected answer the request skips grading (a prompt of the
 * user's has none); with --answer every completion is graded by the graders of the run's task file.
 */
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";

import type { EvaluateRequestSchema, EvaluateResult, GradedSample } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { ADAPTER_VARIANT } from "../agent/core/base-vs-adapter.js";
import type { RewardSpec } from "../agent/core/task-rewards.js";
import { DEFAULT_EVAL_SETTINGS, runEvaluate, settingsForTaskSet } from "../agent/eval/evaluate.js";
import { loadTaskFile } from "../agent/eval/tasks.js";
import type { SidecarClient } from "../sidecar/client.js";
import type { EvalTarget } from "./eval-target.js";
import { targetForRun } from "./run-task-file.js";

/** The task id of the one prompt in the request. */
const PROMPT_ID = "prompt";

export interface TryOptions {
  prompt: string;
  /** an expected answer: the completions are graded against it */
  answer?: string;
  maxNewTokens: number;
  /** the base model only (no adapter) */
  baseOnly: boolean;
}

/** The graders of the run's task file (its .meta.json), else the eval's defaults. */
function gradersOf(tasksPath: string): RewardSpec[] {
  try {
    return settingsForTaskSet({ ...DEFAULT_EVAL_SETTINGS }, { path: tasksPath, format: loadTaskFile(tasksPath).format }).graders;
  } catch {
    return [...DEFAULT_EVAL_SETTINGS.graders]; // the run's file is not here: the eval's defaults
  }
}

/** The Evaluate request: one inline task, greedy, one sample, the run's adapter unless baseOnly. */
export function tryRequest(runId: string, baseModel: string, graders: RewardSpec[], o: TryOptions): MessageInitShape<typeof EvaluateRequestSchema> {
  return {
    baseModel,
    adapters: o.baseOnly ? [] : [{ name: ADAPTER_VARIANT, source: { case: "runId", value: runId } }],
    tasks: { source: { case: "inline", value: { rows: [{ id: PROMPT_ID, prompt: o.prompt, answers: o.answer === undefined ? [] : [o.answer] }] } } },
    graders: o.answer === undefined ? [] : graders.map((g) => ({ name: g.name, params: g.params as JsonObject | undefined })),
    skipGrading: o.answer === undefined,
    samplesPerTask: 1,
    temperature: 0,
    maxNewTokens: o.maxNewTokens,
  };
}

const score = (x: number) => (Number.isNaN(x) ? "unscorable" : Number.isInteger(x) ? String(x) : x.toFixed(2));

/** The completion, each line indented two spaces (verbatim otherwise), or a word for an empty one. */
function indented(text: string): string[] {
  return text === "" ? ["  (an empty completion)"] : text.split("\n").map((l) => `  ${l}`);
}

/** What `agent try` prints for a result: each variant's completion under a line naming it and its
 *  grades (in `graders`' order, the primary first). */
export function tryLines(result: EvaluateResult, runId: string, o: TryOptions, graders: string[] = []): string[] {
  const out: string[] = [];
  for (const v of result.variants) {
    const s: GradedSample | undefined = v.tasks[0]?.samples[0];
    const adapter = result.adapters.find((a) => a.name === v.name);
    const name = v.name === "base" ? "base" : `adapter (${runId}${adapter && adapter.step > 0n ? `, step ${adapter.step}` : ""})`;
    const names = s
      ? [
          ...graders.filter((g) => g in s.scores),
          ...Object.keys(s.scores)
            .filter((k) => !graders.includes(k))
            .sort(),
        ]
      : [];
    const grades = names.length ? ` — ${names.map((k) => `${k} ${score(s!.scores[k])}`).join(", ")}` : "";
    out.push(`${name}${grades}:`, ...indented(s?.completion ?? ""));
  }
  const format = result.fingerprint?.promptFormat === "chat" ? "through the tokenizer's chat template" : "as given (no chat template)";
  out.push(`greedy, at most ${o.maxNewTokens} new tokens, the prompt ${format}; ${result.seconds.toFixed(1)} s on one model load`);
  return out;
}

/** Run the prompt through the run's base (and adapter) and print the completions. */
export async function tryPrompt(client: SidecarClient, runId: string, given: EvalTarget, o: TryOptions): Promise<void> {
  const target = await targetForRun(client, "try", runId, given);
  const base = target.settings.baseModel;
  console.log(`${o.baseOnly ? "the base" : `${runId}'s adapter and its base`} (${base || "the embedded default model"}) on one prompt`);
  const graders = o.answer === undefined ? [] : gradersOf(target.tasksPath);
  const result = await runEvaluate(client, tryRequest(runId, base, graders, o));
  for (const line of tryLines(
    result,
    runId,
    o,
    graders.map((g) => g.name),
  ))
    console.log(line);
}
