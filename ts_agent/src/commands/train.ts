/**
 * `agent train --config FILE [--run-id ID] [--evals-dir DIR]`: start a GRPO run on the sidecar,
 * show live progress, then download and verify every artifact into <evals dir>/runs/<run_id>/
 * (agent/train/run.ts).
 *
 * FILE is a TrainRequest in proto JSON (field names as in the .proto or their camelCase JSON
 * names). Exit 0 when the run SUCCEEDED. Ctrl-C detaches (the run goes on; `agent watch` and
 * `agent cancel` are printed); a second Ctrl-C within 2 s cancels the run.
 */
import { parseArgs } from "node:util";

import { Detached, loadTrainRequest, outcomeLine, relativeChangeText, trainProgressPrinter, trainViaSidecar, type TrainOutcome } from "../agent/train/run.js";
import { evalsDirOrDefault } from "../agent/workspace.js";
import { RunState, runStateName, type SidecarClient } from "../sidecar/client.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, TRAIN_FLAGS, repeatFlags, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Train through the sidecar: live progress, then every artifact downloaded and sha256-verified.",
  usage: "agent train --config FILE [--run-id ID] [--evals-dir DIR]",
  flags: [
    ["--config FILE", "a TrainRequest in proto JSON (.proto or camelCase field names)"],
    ["--run-id ID", "the run id to ask for (default: the sidecar assigns one)"],
    ["--evals-dir DIR", "where runs/<run_id>/ is written (default agent-evals/)"],
  ],
  notes:
    "Ctrl-C detaches: the run keeps going on the sidecar, and the `agent watch` / `agent cancel`\n" +
    "commands for it are printed; a second Ctrl-C within 2 s cancels the run.",
  examples: ["agent train --config run.json --run-id aml-1", "agent train --config run.json --evals-dir /tmp/evals --address 10.0.0.5:50151"],
};

/** The summary lines after a run ended (train and watch). */
export function printOutcome(out: TrainOutcome): void {
  const r = out.result;
  if (r?.startReward && r.endReward) {
    console.log(
      `held-out reward: step 0 ${r.startReward.mean.toFixed(3)} -> step ${r.endReward.step} ${r.endReward.mean.toFixed(3)} (${relativeChangeText(r)})`,
    );
  }
  console.log(outcomeLine(out));
  if (r) console.log(`artifacts (sha256 verified): ${out.localDir}`);
}

/**
 * Ctrl-C while following a run: the first aborts `controller` (detach); `afterDetach` then prints
 * how to re-attach or cancel and waits 2 s, and a second Ctrl-C in that time cancels the run.
 */
export function ctrlCDetaches(controller: AbortController): { afterDetach: (client: SidecarClient, runId: string, again: string) => Promise<number>; dispose: () => void } {
  let first = 0;
  let second: (() => void) | undefined;
  let secondSeen = false;
  const onSigint = () => {
    const now = Date.now();
    if (first && now - first < 2000) {
      secondSeen = true;
      second?.();
      return;
    }
    first = now;
    controller.abort();
  };
  process.on("SIGINT", onSigint);
  const dispose = () => process.off("SIGINT", onSigint);
  return {
    dispose,
    afterDetach: async (client, runId, again) => {
      if (!runId) {
        console.log("detached before the sidecar named the run; find it with: agent runs" + again);
        dispose();
        return 130;
      }
      console.log(`detached from run ${runId}: it keeps running on the sidecar.`);
      console.log(`  re-attach:  agent watch ${runId}${again}`);
      console.log(`  cancel:     agent cancel ${runId}${again}   (or press Ctrl-C again within 2 s)`);
      const left = Math.max(0, 2000 - (Date.now() - first));
      if (!secondSeen) await new Promise<void>((res) => ((second = res), setTimeout(res, left)));
      dispose();
      if (!secondSeen) return 130;
      const run = await client.cancelRun(runId);
      console.log(`cancel requested: run ${runId} is ${runStateName(run.state)}; follow it with: agent watch ${runId}${again}`);
      return 130;
    },
  };
}

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({ args: argv, options: { ...TRAIN_FLAGS, ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS }, allowPositionals: true, strict: true });
  if (positionals.length) throw usageError("train", help, `unexpected argument '${positionals[0]}'`);
  if (!values.config) throw usageError("train", help, "--config FILE is required");
  const request = await loadTrainRequest(values.config);
  if (values["run-id"]) request.runId = values["run-id"];
  return followAttached(client, values, (opts) => trainViaSidecar(client, request, opts));
};

/**
 * Run `follow` (train or watch) with the live progress line and Ctrl-C detaching (a second Ctrl-C
 * within 2 s cancels), then print the outcome. Exit 0 when the run SUCCEEDED, 130 when detached.
 */
export async function followAttached(
  client: SidecarClient,
  values: { address?: string; token?: string; "evals-dir"?: string },
  follow: (opts: { log: (line: string) => void; evalsDir: string; signal: AbortSignal }) => Promise<TrainOutcome>,
): Promise<number> {
  const controller = new AbortController();
  const ctrlC = ctrlCDetaches(controller);
  const progress = trainProgressPrinter({ stepsOffTty: true });
  let out: TrainOutcome;
  try {
    out = await follow({ log: progress.log, evalsDir: evalsDirOrDefault(values["evals-dir"]), signal: controller.signal });
  } catch (err) {
    progress.end();
    if (err instanceof Detached) return ctrlC.afterDetach(client, err.runId, repeatFlags(values));
    ctrlC.dispose();
    throw err;
  }
  ctrlC.dispose();
  progress.end();
  printOutcome(out);
  return out.state === RunState.SUCCEEDED ? 0 : 1;
}
