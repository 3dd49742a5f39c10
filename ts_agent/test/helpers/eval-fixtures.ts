/** Synthetic task rows and Evaluate results for the harness, baseline and report tests. */
import { create } from "@bufbuild/protobuf";

import { EvalFingerprintSchema, EvaluateResultSchema, type EvaluateResult } from "../../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { DEFAULT_EVAL_SETTINGS } from "../../src/agent/eval/evaluate.js";
import { formatPrompt, type TaskRow } from "../../src/task-sets/typologies.js";
import { buildReward, type RewardSpec } from "../../src/agent/core/task-rewards.js";

export const RESOLVED_MODEL = "/cache/models/tiny-aml-qwen2-s0-8ae0970906";

/** An Evaluate fingerprint of the CPU/fp32 sidecar the fixtures pretend to be; `over` changes fields. */
export function runtimeFingerprint(over: Record<string, unknown> = {}) {
  return create(EvalFingerprintSchema, {
    model: RESOLVED_MODEL,
    weightsSha256: "11".repeat(32),
    promptFormat: "raw",
    device: "cpu",
    dtype: "fp32",
    batchSize: 64,
    topP: 1,
    libraryVersions: { torch: "2.5.1", transformers: "4.57.0", peft: "0.17.0", trl: "0.24.0" },
    codeRevision: { packageVersion: "0.1.0", gitCommit: "c0".repeat(20), gitDirty: false, graderSha256: "33".repeat(32) },
    ...over,
  });
}

/** A labelled test task whose slice is its label (as in the AML file). */
export function row(id: string, label: string, answers = [label]): TaskRow {
  return { id, split: "test", label, slice: label, prompt: formatPrompt(`case ${id}`), answers, template: `${label}/1` };
}

/** A proto EvaluateResult whose scores are what the TS graders give (i.e. a correct sidecar). */
export function gradedResult(
  rows: TaskRow[],
  completions: Record<string, Record<string, string[]>>,
  graders: readonly RewardSpec[] = DEFAULT_EVAL_SETTINGS.graders,
): EvaluateResult {
  const built = graders.map((g) => buildReward(g));
  return create(EvaluateResultSchema, {
    baseModel: RESOLVED_MODEL,
    seconds: 1.5,
    variants: Object.entries(completions).map(([name, byTask]) => ({
      name,
      tasks: rows.map((r) => ({
        taskId: r.id,
        samples: byTask[r.id].map((c) => ({
          completion: c,
          scores: Object.fromEntries(built.map((g) => [g.name, g.score(c, r.answers) ?? NaN])),
        })),
      })),
    })),
  });
}
