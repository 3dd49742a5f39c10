/**
 * `agent train --config FILE [--run-id ID]`: start a GRPO run on the sidecar, show live progress,
 * then download and verify every artifact into agent-evals/runs/<run_id>/ (agent/train/run.ts).
 *
 * FILE is a TrainRequest in proto JSON (field names as in the .proto or their camelCase JSON
 * names). Exit 0 when the run SUCCEEDED.
 */
import { parseArgs } from "node:util";

import { loadTrainRequest, outcomeLine, relativeChangeText, trainProgressPrinter, trainViaSidecar } from "../agent/train/run.js";
import { RunState } from "../sidecar/client.js";
import { GLOBAL_FLAGS, TRAIN_FLAGS, type CommandHandler } from "./flags.js";

export const command: CommandHandler = async (argv, client) => {
  const { values } = parseArgs({ args: argv, options: { ...TRAIN_FLAGS, ...GLOBAL_FLAGS }, strict: true });
  if (!values.config) {
    console.error("usage: agent train --config FILE [--run-id ID]");
    return 2;
  }
  const request = await loadTrainRequest(values.config);
  if (values["run-id"]) request.runId = values["run-id"];
  const progress = trainProgressPrinter({ stepsOffTty: true });
  const out = await trainViaSidecar(client, request, { log: progress.log });
  progress.end();
  const r = out.result;
  if (r?.startReward && r.endReward) {
    console.log(
      `held-out reward: step 0 ${r.startReward.mean.toFixed(3)} -> step ${r.endReward.step} ${r.endReward.mean.toFixed(3)} (${relativeChangeText(r)})`,
    );
  }
  console.log(outcomeLine(out));
  if (r) console.log(`artifacts (sha256 verified): ${out.localDir}`);
  return out.state === RunState.SUCCEEDED ? 0 : 1;
};
