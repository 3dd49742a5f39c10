/**
 * Training through the sidecar, as a library: start a run or re-attach to one, follow it (again
 * with WatchRun when the stream drops), download and verify every artifact into
 * <evals dir>/runs/<run_id>/ (the live progress line they print is progress.ts's).
 *
 * - A dropped stream does not stop the run on the sidecar: followRun re-attaches from the last seq
 *   it saw (Unavailable / Internal / Unknown only, with a growing pause, at most `maxReattach`
 *   times), so every event arrives once and in order. Aborting its signal detaches (`Detached`).
 * - downloadRun is the one recovery path (`agent watch` and `agent download` end in it): every
 *   artifact arrives as <name>.partial, resumed by offset, renamed once its sha256 matched; files
 *   already there and verified are kept; events.jsonl and then run.json are written last, so a
 *   local folder with run.json is complete (workspace.RUN_RECORD). Running it twice fetches nothing.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

import { fromJson, toJsonString, type DescMessage, type JsonValue } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";

import {
  RunEventSchema,
  RunSchema,
  TrainRequestSchema,
  type Artifact,
  type Run,
  type RunEvent,
  type RunResult,
  type TrainRequest,
} from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { RunState, SidecarClient, SidecarError, isTerminal, runStateName, sha256File } from "../../sidecar/client.js";
import { RunClock, type TrainLog } from "./progress.js";
import { EVALS_DIR, RUN_RECORD, UserError, didYouMean, readJsonFile, runDir, withDirLock, writeFileAtomic } from "../workspace.js";

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

/** The caller aborted the stream (Ctrl-C): the run goes on on the sidecar. `runId` is "" when no
 *  event had arrived yet. */
export class Detached extends Error {
  constructor(readonly runId: string) {
    super(`detached from run ${runId || "(not started yet)"}`);
    this.name = "Detached";
  }
}

/** The sidecar went away while a run was followed and did not come back within the re-attach
 *  attempts. The run itself is on the sidecar's disk: `agent watch` / `agent resume` recover it. */
export class SidecarLost extends Error {
  constructor(
    readonly runId: string,
    readonly address: string,
    /** the last train step seen (0 = none yet) */
    readonly lastStep: number,
    readonly cause: SidecarError,
    attempts: number,
    /** the run's end when the sidecar went away after it (a SIGTERM'd sidecar ends its run
     *  CANCELLED, then stops): the download failed, not the following */
    readonly ended?: { state: RunState; reason: string },
  ) {
    super(
      ended
        ? `lost the sidecar at ${address} after run ${runId} ended ${runStateName(ended.state)}${ended.reason ? ` (${ended.reason})` : ""}, before its files were downloaded (${cause.codeName})`
        : `lost the sidecar at ${address} while following run ${runId} (${lastStep ? `last step seen: ${lastStep}` : "no step seen yet"}; ` +
            `${attempts} re-attach attempts failed, the last with ${cause.codeName})`,
    );
    this.name = "SidecarLost";
  }
}

/** The stream broke on the sidecar's side (it died, restarted, or reset the stream): re-attach.
 *  Canceled counts when we did not abort: an HTTP/2 stream reset by a dying server arrives as it. */
const RETRIABLE = [Code.Unavailable, Code.Internal, Code.Unknown, Code.Canceled];

function lastStepOf(events: ReadonlyArray<RunEvent>): number {
  for (let i = events.length - 1; i >= 0; i--) {
    const k = events[i].kind;
    if (k.case === "trainStep") return Number(k.value.step);
  }
  return 0;
}

/** Stream a run to its end, re-attaching with WatchRun if the stream drops; SidecarLost once the
 *  re-attach attempts are spent. */
export async function followRun(
  client: SidecarClient,
  first: AsyncIterable<RunEvent>,
  onEvent: (ev: RunEvent) => void,
  opts: { signal?: AbortSignal; maxReattach?: number; runId?: string; afterSeq?: bigint } = {},
): Promise<{ runId: string; events: RunEvent[] }> {
  const events: RunEvent[] = [];
  let runId = opts.runId ?? "";
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
      if (opts.signal?.aborted) throw new Detached(runId);
      const retriable = err instanceof SidecarError && RETRIABLE.includes(err.code);
      if (!runId || !retriable) throw err;
      if (reattach >= (opts.maxReattach ?? 5)) throw new SidecarLost(runId, client.options.address, lastStepOf(events), err as SidecarError, reattach);
      reattach += 1;
      await new Promise((r) => setTimeout(r, 500 * reattach));
      const after = events.length ? events[events.length - 1].seq : (opts.afterSeq ?? 0n);
      stream = client.watchRun(runId, after, { signal: opts.signal });
    }
  }
}

/** What a run does between RUNNING and its first step line (the sidecar sends no event for it:
 *  seconds on a CPU, more for a large model), printed once under the RUNNING line. */
export function startingLine(runId: string): string {
  return `[${runId}] starting: loading the model, then the held-out measurement at step 0; the step line follows from the first step`;
}

/** The onEvent that turns a run's events into log lines (state changes, the starting phase, steps, warnings). */
export function eventLogger(log: TrainLog): { onEvent: (ev: RunEvent) => void; state: () => RunState; reason: () => string } {
  const clk = new RunClock();
  let state = RunState.UNSPECIFIED;
  let reason = "";
  return {
    state: () => state,
    reason: () => reason,
    onEvent: (ev) => {
      const line = clk.line(ev);
      switch (ev.kind.case) {
        case "stateChange":
          state = ev.kind.value.state;
          reason = ev.kind.value.reason;
          log(`[${ev.runId}] ${runStateName(state)}${reason ? `: ${reason}` : ""}`, true);
          if (state === RunState.RUNNING) log(startingLine(ev.runId), true);
          break;
        case "trainStep":
          log(line!, false, { step: Number(ev.kind.value.step), maxSteps: Number(ev.kind.value.maxSteps) });
          break;
        case "warning":
          log(`warning [${ev.kind.value.code}] at step ${ev.kind.value.step}: ${ev.kind.value.message}`, true);
          break;
      }
    },
  };
}

export interface FollowOptions {
  log?: TrainLog;
  evalsDir?: string;
  signal?: AbortSignal;
  /** every event as it arrives, after the log's line (agent sweep reads a run's slots at RUNNING) */
  onEvent?: (ev: RunEvent) => void;
}

async function followAndDownload(client: SidecarClient, stream: AsyncIterable<RunEvent>, opts: FollowOptions & { runId?: string }): Promise<TrainOutcome> {
  const log = opts.log ?? (() => undefined);
  const logger = eventLogger(log);
  const onEvent = opts.onEvent ? (ev: RunEvent) => (logger.onEvent(ev), opts.onEvent!(ev)) : logger.onEvent;
  const { runId, events } = await followRun(client, stream, onEvent, { signal: opts.signal, runId: opts.runId });
  const onWait = (pid: number) => log(`another agent (pid ${pid}) is downloading ${runId} into the same folder: waiting for it`, true);
  // the sidecar may go away once the run ended (a SIGTERM'd sidecar ends it CANCELLED, then stops)
  const dl = await downloadRun(client, runId, opts.evalsDir ?? EVALS_DIR, { events, onWait }).catch((err: unknown) => {
    const gone = err instanceof SidecarError && RETRIABLE.includes(err.code);
    throw gone ? new SidecarLost(runId, client.options.address, lastStepOf(events), err, 0, { state: logger.state(), reason: logger.reason() }) : err;
  });
  return { runId, state: dl.run.state, reason: dl.run.reason || logger.reason(), result: dl.run.result, events, localDir: dl.localDir };
}

/** Train through the sidecar; returns the outcome with artifacts downloaded to <evals>/runs/<id>/. */
export async function trainViaSidecar(client: SidecarClient, request: TrainRequest, opts: FollowOptions = {}): Promise<TrainOutcome> {
  return followAndDownload(client, client.train(request, { signal: opts.signal }), { ...opts, runId: request.runId || undefined });
}

/** Re-attach to a run (replaying its events from the start, then following it live) and
 *  download it once it is over: the recovery of a run whose client went away. */
export async function watchViaSidecar(client: SidecarClient, runId: string, opts: FollowOptions = {}): Promise<TrainOutcome> {
  return followAndDownload(client, client.watchRun(runId, 0n, { signal: opts.signal }), { ...opts, runId });
}

// ---------------------------------------------------------------------------------------------
// Downloading a run

/** A run that is still QUEUED/RUNNING/CANCELLING cannot be downloaded yet. */
export class RunNotFinished extends Error {
  constructor(readonly run: Run) {
    super(`run ${run.runId} is ${runStateName(run.state)} (step ${run.currentStep})`);
    this.name = "RunNotFinished";
  }
}

export interface DownloadOutcome {
  run: Run;
  localDir: string;
  /** artifacts fetched now / already there and verified */
  fetched: Artifact[];
  kept: Artifact[];
}

async function verifiedLocally(dest: string, art: Artifact): Promise<boolean> {
  if (!existsSync(dest) || BigInt(statSync(dest).size) !== art.sizeBytes) return false;
  return (await sha256File(dest)) === art.sha256;
}

/**
 * Download a finished run into <evalsDir>/runs/<id>/: every listed artifact (resumed from its
 * .partial, sha256-checked, renamed once verified; a file already there with the listed sha256 is
 * kept), then events.jsonl (the given events, else a replay of the run's log), then run.json.
 * Idempotent, and one downloader at a time per folder (workspace.withDirLock). Throws
 * RunNotFinished for a run that is not over.
 */
export async function downloadRun(
  client: SidecarClient,
  runId: string,
  evalsDir: string,
  opts: { events?: RunEvent[]; onArtifact?: (art: Artifact, fetched: boolean) => void; onWait?: (pid: number) => void } = {},
): Promise<DownloadOutcome> {
  const run = await client.getRun(runId);
  if (!isTerminal(run.state)) throw new RunNotFinished(run);
  const localDir = runDir(evalsDir, runId);
  mkdirSync(localDir, { recursive: true });
  return withDirLock(localDir, () => downloadInto(client, run, localDir, opts), { onWait: opts.onWait });
}

async function downloadInto(
  client: SidecarClient,
  run: Run,
  localDir: string,
  opts: { events?: RunEvent[]; onArtifact?: (art: Artifact, fetched: boolean) => void },
): Promise<DownloadOutcome> {
  const runId = run.runId;
  const fetched: Artifact[] = [];
  const kept: Artifact[] = [];
  for (const art of run.result?.artifacts ?? []) {
    const dest = join(localDir, ...art.path.split("/"));
    if (await verifiedLocally(dest, art)) {
      kept.push(art);
      opts.onArtifact?.(art, false);
      continue;
    }
    rmSync(dest, { force: true }); // a stale or foreign file: never keep it under the real name
    for (let attempt = 1; ; attempt++) {
      try {
        const got = await client.downloadArtifact(runId, art.path, dest, { expectedSha256: art.sha256, totalSize: art.sizeBytes });
        if (got.bytes !== art.sizeBytes) {
          rmSync(dest, { force: true });
          throw new SidecarError(`${art.path}: ${got.bytes} bytes, listed as ${art.sizeBytes}`, Code.DataLoss, undefined);
        }
        break;
      } catch (err) {
        // a resumed .partial that did not verify was deleted: one more try from byte 0
        if (attempt >= 2 || !(err instanceof SidecarError && err.code === Code.DataLoss)) throw err;
      }
    }
    fetched.push(art);
    opts.onArtifact?.(art, true);
  }
  let events = opts.events;
  if (!events?.length) {
    events = [];
    for await (const ev of client.watchRun(runId, 0n)) events.push(ev);
  }
  writeFileAtomic(join(localDir, "events.jsonl"), events.map((e) => toJsonString(RunEventSchema, e)).join("\n") + "\n");
  writeFileAtomic(join(localDir, RUN_RECORD), toJsonString(RunSchema, run, { prettySpaces: 2 }) + "\n");
  return { run, localDir, fetched, kept };
}

/** The local record of a downloaded run (its run.json), or undefined when it is not (fully) local. */
export function readLocalRun(evalsDir: string, runId: string): Run | undefined {
  const path = join(runDir(evalsDir, runId), RUN_RECORD);
  if (!existsSync(path)) return undefined;
  return fromJson(RunSchema, JSON.parse(readFileSync(path, "utf8")) as JsonValue, { ignoreUnknownFields: true });
}

// ---------------------------------------------------------------------------------------------
// Requests from files

/**
 * Every key of `obj` (recursively) that is no field of `desc`, as "grpo.maxStep: unknown field
 * (did you mean maxSteps?)": the suggestion is in the user's spelling, the camelCase JSON name
 * unless the key has an underscore (then the .proto name).
 */
export function unknownKeys(obj: Record<string, unknown>, desc: DescMessage, prefix = ""): string[] {
  const out: string[] = [];
  for (const [key, value] of Object.entries(obj)) {
    const field = desc.fields.find((f) => f.name === key || f.jsonName === key);
    const where = `${prefix}${key}`;
    if (!field) {
      const names = desc.fields.map((f) => (key.includes("_") ? f.name : f.jsonName));
      out.push(`${where}: unknown field${didYouMean(key, names)}`);
      continue;
    }
    const sub = field.fieldKind === "message" ? field.message : field.fieldKind === "list" && field.listKind === "message" ? field.message : undefined;
    if (!sub || sub.typeName.startsWith("google.protobuf.")) continue;
    const items = Array.isArray(value) ? value : [value];
    items.forEach((item, i) => {
      if (item && typeof item === "object" && !Array.isArray(item)) {
        out.push(...unknownKeys(item as Record<string, unknown>, sub, Array.isArray(value) ? `${where}[${i}].` : `${where}.`));
      }
    });
  }
  return out;
}

/** A TrainRequest from a proto-JSON file (field names as in the .proto or their camelCase JSON
 *  names). Every mistake is a UserError naming the file: missing, line:col of a syntax error,
 *  the first unknown key with a did-you-mean, a value of the wrong type. */
export async function loadTrainRequest(path: string): Promise<TrainRequest> {
  const json = readJsonFile(path);
  if (!json || typeof json !== "object" || Array.isArray(json)) throw new UserError(`${path}: expected a JSON object at the top level`);
  const unknown = unknownKeys(json as Record<string, unknown>, TrainRequestSchema);
  if (unknown.length) throw new UserError(`${path}: ${unknown[0]}${unknown.length > 1 ? ` (and ${unknown.length - 1} more)` : ""}`);
  try {
    return fromJson(TrainRequestSchema, json as JsonValue);
  } catch (err) {
    // "cannot decode field grpo.trainer.v1.GrpoConfig.max_steps from JSON: "abc"" -> "GrpoConfig.max_steps: ..."
    const msg = (err as Error).message.replace(/grpo\.trainer\.v1\./g, "").replace(/\s+/g, " ");
    throw new UserError(`${path}: ${msg}`);
  }
}
