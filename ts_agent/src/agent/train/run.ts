/**
 * Training through the sidecar, as a library: start a run (or follow one), re-attach with
 * WatchRun when the stream drops, download and verify every artifact into
 * agent-evals/runs/<run_id>/, and the one live progress line `agent train` and `agent demo` print.
 *
 * A dropped stream does not stop the run on the sidecar: followRun re-attaches from the last seq
 * it saw (Unavailable / Internal / Unknown only, with a growing pause, at most `maxReattach` times),
 * so every event arrives once and in order.
 */
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";

import { fromJson, toJsonString, type JsonValue } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import {
  RunEventSchema,
  RunSchema,
  TrainRequestSchema,
  type RunEvent,
  type RunResult,
  type TrainRequest,
} from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { RunState, SidecarClient, SidecarError, runStateName } from "../../sidecar/client.js";
import { EVALS_DIR, runDir, writeFileAtomic } from "../workspace.js";

// ---------------------------------------------------------------------------------------------
// Progress

/** Render one progress line: step, reward, KL, ETA. */
export function progressLine(step: bigint, maxSteps: bigint, metrics: Record<string, number>, elapsedS: number): string {
  const s = Number(step);
  const total = Number(maxSteps);
  const eta = s > 0 && total > s ? ((elapsedS / s) * (total - s)) : 0;
  const fmt = (x: number | undefined, d: number) => (x === undefined || Number.isNaN(x) ? "   -  " : x.toFixed(d));
  const mm = Math.floor(eta / 60);
  const ss = Math.round(eta % 60).toString().padStart(2, "0");
  return `step ${s}/${total}  reward ${fmt(metrics["reward"], 3)}  kl ${fmt(metrics["kl"], 4)}  ETA ${mm}:${ss}`;
}

/** A terminal sink for trainViaSidecar's log lines. */
export interface TrainProgressPrinter {
  /** pass as trainViaSidecar's `log` */
  log: (line: string, final?: boolean) => void;
  /** end the live line once the run is over */
  end: () => void;
}

/**
 * The live training line on stdout. On a TTY the step line is rewritten in place and a final line
 * (state change, warning) goes on its own line below it. Off a TTY every final line is printed,
 * and the step lines too when `stepsOffTty` (train: yes; demo keeps its log to the milestones).
 */
export function trainProgressPrinter(opts: { stepsOffTty: boolean }): TrainProgressPrinter {
  const tty = process.stdout.isTTY;
  return {
    log: (line, final) => {
      if (tty && !final) process.stdout.write(`\r${line.padEnd(78)}`);
      else if (final || opts.stepsOffTty) process.stdout.write(`${tty ? "\n" : ""}${line}\n`);
    },
    end: () => {
      if (tty) process.stdout.write("\n");
    },
  };
}

/** "+12.3%, 95% CI 4.5% to 20.1%": the held-out reward's relative change, step 0 -> end. */
export function relativeChangeText(r: RunResult): string {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  return `${pct(r.relativeChange)}, 95% CI ${pct(r.relativeChangeCiLow)} to ${pct(r.relativeChangeCiHigh)}`;
}

// ---------------------------------------------------------------------------------------------
// Following a run

export interface TrainOutcome {
  runId: string;
  state: RunState;
  reason: string;
  result?: RunResult;
  events: RunEvent[];
  localDir: string;
}

/** "run <id>: SUCCEEDED" or "run <id>: FAILED (reason)". */
export function outcomeLine(out: Pick<TrainOutcome, "runId" | "state" | "reason">): string {
  return `run ${out.runId}: ${runStateName(out.state)}${out.reason ? ` (${out.reason})` : ""}`;
}

/** Stream a run to its end, re-attaching with WatchRun if the stream drops. */
export async function followRun(
  client: SidecarClient,
  first: AsyncIterable<RunEvent>,
  onEvent: (ev: RunEvent) => void,
  opts: { signal?: AbortSignal; maxReattach?: number } = {},
): Promise<{ runId: string; events: RunEvent[] }> {
  const events: RunEvent[] = [];
  let runId = "";
  let stream: AsyncIterable<RunEvent> = first;
  let reattach = 0;
  for (;;) {
    try {
      for await (const ev of stream) {
        runId = ev.runId;
        events.push(ev);
        onEvent(ev);
      }
      return { runId, events };
    } catch (err) {
      const retriable = err instanceof SidecarError && [Code.Unavailable, Code.Internal, Code.Unknown].includes(err.code);
      if (!runId || !retriable || reattach >= (opts.maxReattach ?? 5) || opts.signal?.aborted) throw err;
      reattach += 1;
      await new Promise((r) => setTimeout(r, 500 * reattach));
      const after = events.length ? events[events.length - 1].seq : 0n;
      stream = client.watchRun(runId, after, { signal: opts.signal });
    }
  }
}

/** Download every artifact of a finished run, verifying each sha256 against the result listing. */
export async function downloadArtifacts(client: SidecarClient, runId: string, result: RunResult, localDir: string): Promise<void> {
  for (const art of result.artifacts) {
    const dest = join(localDir, ...art.path.split("/"));
    const got = await client.downloadArtifact(runId, art.path, dest, { expectedSha256: art.sha256 });
    if (got.bytes !== art.sizeBytes) {
      throw new SidecarError(`${art.path}: ${got.bytes} bytes, listed as ${art.sizeBytes}`, Code.DataLoss, undefined);
    }
  }
}

/** Train through the sidecar; returns the outcome with artifacts downloaded to agent-evals/runs/<id>/. */
export async function trainViaSidecar(
  client: SidecarClient,
  request: TrainRequest,
  opts: { log?: (line: string, final?: boolean) => void; evalsDir?: string; signal?: AbortSignal } = {},
): Promise<TrainOutcome> {
  const log = opts.log ?? (() => undefined);
  const t0 = Date.now();
  let state = RunState.UNSPECIFIED;
  let reason = "";
  let result: RunResult | undefined;
  const { runId, events } = await followRun(
    client,
    client.train(request, { signal: opts.signal }),
    (ev) => {
      switch (ev.kind.case) {
        case "stateChange":
          state = ev.kind.value.state;
          reason = ev.kind.value.reason;
          log(`[${ev.runId}] ${runStateName(state)}${reason ? `: ${reason}` : ""}`, true);
          break;
        case "trainStep":
          log(progressLine(ev.kind.value.step, ev.kind.value.maxSteps, ev.kind.value.metrics, (Date.now() - t0) / 1000));
          break;
        case "warning":
          log(`warning [${ev.kind.value.code}] at step ${ev.kind.value.step}: ${ev.kind.value.message}`, true);
          break;
        case "result":
          result = ev.kind.value;
          break;
      }
    },
    { signal: opts.signal },
  );
  const localDir = runDir(opts.evalsDir ?? EVALS_DIR, runId);
  await mkdir(localDir, { recursive: true });
  if (result) await downloadArtifacts(client, runId, result, localDir);
  const run = await client.getRun(runId);
  writeFileAtomic(join(localDir, "run.json"), toJsonString(RunSchema, run, { prettySpaces: 2 }) + "\n");
  writeFileAtomic(join(localDir, "events.jsonl"), events.map((e) => toJsonString(RunEventSchema, e)).join("\n") + "\n");
  return { runId, state, reason, result, events, localDir };
}

/** A TrainRequest from a proto-JSON file (field names as in the .proto or their camelCase JSON names). */
export async function loadTrainRequest(path: string): Promise<TrainRequest> {
  const text = await readFile(path, "utf8");
  let json: JsonValue;
  try {
    json = JSON.parse(text) as JsonValue;
  } catch (err) {
    throw new Error(`${path}: not valid JSON: ${(err as Error).message}`);
  }
  return fromJson(TrainRequestSchema, json);
}
