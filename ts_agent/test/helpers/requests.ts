/**
 * TrainRequests for the e2e tests, built in one place: the rows inline, exact_match as the reward,
 * and the test's own GRPO and held-out budgets. The proto JSON form is what a --config file holds;
 * trainRequest() is the same request as a message.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";

import { fromJson, type JsonObject } from "@bufbuild/protobuf";

import { TrainRequestSchema, type TrainRequest } from "../../src/gen/grpo/trainer/v1/trainer_service_pb.js";

export interface TinyRequest {
  runId?: string;
  /** inline rows; none: `agent demo --tasks` fills the dataset from its task file */
  rows?: Array<{ id: string; prompt: string; answers: string[] }>;
  grpo: JsonObject;
  heldOut: JsonObject;
}

/** The request in proto JSON (camelCase field names, int64 as numbers or strings). */
export function trainRequestJson(r: TinyRequest): JsonObject {
  return {
    ...(r.runId ? { runId: r.runId } : {}),
    ...(r.rows ? { dataset: { inline: { rows: r.rows } } } : {}),
    rewards: [{ name: "exact_match", weight: 1 }],
    grpo: r.grpo,
    heldOut: r.heldOut,
  };
}

/** The request as a TrainRequest message (for trainViaSidecar). */
export function trainRequest(r: TinyRequest): TrainRequest {
  return fromJson(TrainRequestSchema, trainRequestJson(r));
}

/** The request written as `<dir>/<name>.json`, a --config file; its path. */
export function writeTrainConfig(dir: string, name: string, r: TinyRequest): string {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(trainRequestJson(r)));
  return path;
}
