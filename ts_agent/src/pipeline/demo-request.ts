/**
 * The training request of `agent demo` and `agent sweep`: the checked-in
 * agent-evals/demo-request.json, or a given one, on a task file's train rows and embedded model.
 */
import { join } from "node:path";

import { create } from "@bufbuild/protobuf";

import { loadTasks, splitTasks } from "../agent/eval/tasks.js";
import { loadTrainRequest } from "../agent/train/run.js";
import { REPO_ROOT, UserError } from "../agent/workspace.js";
import { DatasetSchema, type TrainRequest } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { embeddedBaseFor } from "./run-task-file.js";

/** The demo's request, checked in so that a user can copy it: `agent train --config agent-evals/demo-request.json`. */
export const DEMO_REQUEST_FILE = join(REPO_ROOT, "agent-evals", "demo-request.json");

/**
 * A request for a task file: its train rows inline when `replaceDataset` or the request has no
 * dataset, and its embedded model when the request names no base model.
 */
export function requestForTasks(request: TrainRequest, tasksPath: string, replaceDataset: boolean): TrainRequest {
  if (replaceDataset || !request.dataset?.source.case) {
    const rows = splitTasks(loadTasks(tasksPath), "train");
    if (rows.length === 0) throw new UserError(`${tasksPath}: no tasks in split "train" to train on`);
    request.dataset = create(DatasetSchema, {
      source: { case: "inline", value: { rows: rows.map((r) => ({ id: r.id, prompt: r.prompt, answers: r.answers })) } },
    });
  }
  if (request.baseModel === "") request.baseModel = embeddedBaseFor(tasksPath);
  return request;
}

/**
 * The default demo request: agent-evals/demo-request.json (embedded model, the AML train split,
 * exact_match as the only reward: the default model already answers in format, so a format
 * reward would only add a constant to both ends of the milestone's ratio). With `tasksPath`, the
 * file's dataset is replaced by that task file's train rows, sent inline, on its embedded model.
 */
export async function defaultDemoRequest(tasksPath?: string): Promise<TrainRequest> {
  const request = await loadTrainRequest(DEMO_REQUEST_FILE);
  return tasksPath ? requestForTasks(request, tasksPath, true) : request;
}
