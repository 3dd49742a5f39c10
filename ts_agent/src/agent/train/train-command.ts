/**
 * `agent train --config FILE`: start a GRPO run on the sidecar, show live progress, then download
 * and verify every artifact into agent-evals/runs/<run_id>/.
 *
 * FILE is a TrainRequest in proto JSON (field names as in the .proto or their camelCase JSON
 * names). A dropped stream does not stop the run: the command re-attaches with WatchRun from the
 * last seq it saw.
 */
import { readFile, writeFile, mkdir, rename } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

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

export const REPO_ROOT = resolve(new URL("../../../..", import.meta.url).pathname);
export const EVALS_DIR = join(REPO_ROOT, "agent-evals");

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

export interface TrainOutcome {
  runId: string;
  state: RunState;
  reason: string;
  result?: RunResult;
  events: RunEvent[];
  localDir: string;
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

async function writeJsonAtomic(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, text);
  await rename(tmp, path);
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
  const localDir = join(opts.evalsDir ?? EVALS_DIR, "runs", runId);
  await mkdir(localDir, { recursive: true });
  if (result) await downloadArtifacts(client, runId, result, localDir);
  const run = await client.getRun(runId);
  await writeJsonAtomic(join(localDir, "run.json"), toJsonString(RunSchema, run, { prettySpaces: 2 }) + "\n");
  await writeJsonAtomic(
    join(localDir, "events.jsonl"),
    events.map((e) => toJsonString(RunEventSchema, e)).join("\n") + "\n",
  );
  return { runId, state, reason, result, events, localDir };
}

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

export async function command(argv: string[], client: SidecarClient): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { config: { type: "string" }, "run-id": { type: "string" }, address: { type: "string" }, token: { type: "string" }, timeout: { type: "string" } },
    strict: true,
  });
  if (!values.config) {
    console.error("usage: agent train --config FILE [--run-id ID]");
    return 2;
  }
  const request = await loadTrainRequest(values.config);
  if (values["run-id"]) request.runId = values["run-id"];
  const tty = process.stdout.isTTY;
  const out = await trainViaSidecar(client, request, {
    log: (line, final) => {
      if (tty && !final) process.stdout.write(`\r${line.padEnd(78)}`);
      else process.stdout.write(`${tty ? "\n" : ""}${line}\n`);
    },
  });
  if (tty) process.stdout.write("\n");
  const r = out.result;
  if (r?.startReward && r.endReward) {
    console.log(
      `held-out reward: step 0 ${r.startReward.mean.toFixed(3)} -> step ${r.endReward.step} ${r.endReward.mean.toFixed(3)} ` +
        `(${(r.relativeChange * 100).toFixed(1)}%, 95% CI ${(r.relativeChangeCiLow * 100).toFixed(1)}% to ${(r.relativeChangeCiHigh * 100).toFixed(1)}%)`,
    );
  }
  console.log(`run ${out.runId}: ${runStateName(out.state)}${out.reason ? ` (${out.reason})` : ""}`);
  if (r) console.log(`artifacts (sha256 verified): ${out.localDir}`);
  return out.state === RunState.SUCCEEDED ? 0 : 1;
}
