/**
 * Following one run in the terminal (`agent train`, `agent watch`, `agent resume`): the live
 * progress line, Ctrl-C detaching (a second Ctrl-C within 2 s cancels), what a detach or a lost
 * sidecar prints, and the outcome.
 */
import { Detached, SidecarLost, outcomeLine, watchViaSidecar, type TrainOutcome } from "../agent/train/run.js";
import { heldOutChangeLine, trainProgressPrinter } from "../agent/train/progress.js";
import { evalsDirOrDefault } from "../agent/workspace.js";
import { RunState, runStateName, type SidecarClient } from "../sidecar/client.js";
import { repeatFlags, sidecarFlags } from "./next-commands.js";

/** The summary lines after a run ended (train and watch). */
export function printOutcome(out: TrainOutcome): void {
  const r = out.result;
  const heldOut = r ? heldOutChangeLine(r) : undefined;
  if (heldOut) console.log(heldOut);
  console.log(outcomeLine(out));
  if (r) console.log(`artifacts (sha256 verified): ${out.localDir}`);
}

type RepeatedFlags = { address?: string; token?: string; "evals-dir"?: string };

/** What a detach prints: how to re-attach (watch takes --evals-dir) and how to cancel (cancel does not). */
export function detachLines(runId: string, values: RepeatedFlags): string[] {
  if (!runId) return [`detached before the sidecar named the run; find it with: agent runs${sidecarFlags(values)}`];
  return [
    `detached from run ${runId}: it keeps running on the sidecar.`,
    `  re-attach:  agent watch ${runId}${repeatFlags(values)}`,
    `  cancel:     agent cancel ${runId}${sidecarFlags(values)}   (or press Ctrl-C again within 2 s)`,
  ];
}

/** What losing the sidecar prints (stderr): the run id and the commands that recover the run. */
export function sidecarLostLines(err: SidecarLost, values: RepeatedFlags): string[] {
  if (err.ended) {
    return [
      `agent: ${err.message}.`,
      `  the run and its last checkpoint stay on the sidecar's disk; once the sidecar is back (py-trainer serve on the same runs root):`,
      `  continue it from its last checkpoint:  agent resume ${err.runId}${repeatFlags(values)}`,
      `  or fetch what it kept as it is:  agent download ${err.runId}${repeatFlags(values)}`,
    ];
  }
  return [
    `agent: ${err.message}.`,
    `  the run stays on the sidecar's disk; once the sidecar is back (py-trainer serve on the same runs root):`,
    `  follow it:  agent watch ${err.runId}${repeatFlags(values)}`,
    `  or, if it ended FAILED, continue it from its last checkpoint:  agent resume ${err.runId}${repeatFlags(values)}`,
  ];
}

/**
 * Ctrl-C while following a run: the first aborts `controller` (detach); `afterDetach` then prints
 * how to re-attach or cancel and waits 2 s, and a second Ctrl-C in that time cancels the run.
 */
export function ctrlCDetaches(controller: AbortController): {
  afterDetach: (client: SidecarClient, runId: string, values: RepeatedFlags) => Promise<number>;
  dispose: () => void;
} {
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
    afterDetach: async (client, runId, values) => {
      for (const line of detachLines(runId, values)) console.log(line);
      if (!runId) {
        dispose();
        return 130;
      }
      const left = Math.max(0, 2000 - (Date.now() - first));
      if (!secondSeen) await new Promise<void>((res) => ((second = res), setTimeout(res, left)));
      dispose();
      if (!secondSeen) return 130;
      const run = await client.cancelRun(runId);
      console.log(`cancel requested: run ${runId} is ${runStateName(run.state)}; follow it with: agent watch ${runId}${repeatFlags(values)}`);
      return 130;
    },
  };
}

/**
 * Run `follow` (train or watch) with the live progress line and Ctrl-C detaching (a second Ctrl-C
 * within 2 s cancels), then print the outcome. Exit 0 when the run SUCCEEDED, 130 when detached.
 */
export async function followAttached(
  client: SidecarClient,
  values: RepeatedFlags,
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
    if (err instanceof Detached) return ctrlC.afterDetach(client, err.runId, values);
    ctrlC.dispose();
    if (err instanceof SidecarLost) {
      for (const line of sidecarLostLines(err, values)) console.error(line);
      return 1;
    }
    throw err;
  }
  ctrlC.dispose();
  progress.end();
  printOutcome(out);
  return out.state === RunState.SUCCEEDED ? 0 : 1;
}

/** Re-attach to run `runId` (its events replayed, then followed live) and download it at the end
 *  (`agent watch`, and `agent resume` once the sidecar has queued the run again). */
export function followRun(client: SidecarClient, values: RepeatedFlags, runId: string): Promise<number> {
  return followAttached(client, values, (opts) => watchViaSidecar(client, runId, opts));
}
