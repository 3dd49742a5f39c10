/**
 * Training through the sidecar, as a library: start a run or re-attach to one, follow it (again
 * with WatchRun when the stream drops), download and verify every artifact into
 * <evals dir>/runs/<run_id>/, and the one live progress line `agent train`, `agent watch` and
 * `agent demo` print.
 *
 * - A dropped stream does not stop the run on the sidecar: followRun re-attaches from the last seq
 *   it saw (Unavailable / Internal / Unknown only, with a growing pause, at most `maxReattach`
 *   times), so every event arrives once and in order. Aborting its signal detaches (`Detached`).
 * - downloadRun is the one recovery path (`agent watch` and `agent download` end in it): every
 *   artifact arrives as <name>.partial, resumed by offset, renamed once its sha256 matched; files
 *   already there and verified are kept; events.jsonl and then run.json are written last, so a
 *   local folder with run.json is complete (workspace.RUN_RECORD). Running it twice fetches nothing.
 * - Elapsed time and the ETA come from the events' own timestamps, so a replayed run (watch)
 *   shows the times it really took; the ETA counts training steps only: it is anchored at the
 *   first train step, never at the start (the step-0 held-out measurement comes before it).
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
import { pairedBootstrapCI } from "../core/stats/index.js";
import { EVALS_DIR, RUN_RECORD, UserError, didYouMean, readJsonFile, runDir, withDirLock, writeFileAtomic } from "../workspace.js";

// ---------------------------------------------------------------------------------------------
// Progress

/** "m:ss" (or "h:mm:ss"). */
export function clock(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`;
}

/** The metrics the line shows: GRPO's reward and KL, or (no reward logged) the ranked-preference
 *  mode's held-out pairwise accuracy, margin and DPO loss: never "reward nan kl nan". */
export function lineMetrics(metrics: Record<string, number>): Array<[string, number]> {
  if (!("reward" in metrics) && "heldout/pairwise_accuracy" in metrics) {
    return [["heldout/pairwise_accuracy", 3], ["rewards/margins", 3], ["loss", 4]];
  }
  return [["reward", 3], ["kl", 4]];
}

/** Render one progress line: "step 3/30 reward 0.125 kl 0.0012 elapsed 0:05 ETA 0:41". */
export function progressLine(step: number, maxSteps: number, metrics: Record<string, number>, elapsedS: number, etaS: number | undefined): string {
  const fmt = (x: number | undefined, d: number) => (x === undefined || Number.isNaN(x) ? "-" : x.toFixed(d));
  const shown = lineMetrics(metrics).map(([k, d]) => `${k} ${fmt(metrics[k], d)}`).join(" ");
  return `step ${step}/${maxSteps} ${shown} elapsed ${clock(elapsedS)} ETA ${etaS === undefined ? "-:--" : clock(etaS)}`;
}

/** Elapsed time and ETA of a run from its events' timestamps. */
export class RunClock {
  private start?: number;
  private anchor?: { step: number; t: number };
  /** ms the run was down: from an end (CANCELLED, FAILED) to the RUNNING of its resume */
  private down = 0;
  private endedAt?: number;

  /** Feed every event; returns the line for a train step. */
  line(ev: RunEvent): string | undefined {
    const t = ev.time ? timestampMs(ev.time) : Date.now();
    if (ev.kind.case === "stateChange") {
      const st = ev.kind.value.state;
      if (st === RunState.RUNNING && this.start === undefined) this.start = t;
      else if (st === RunState.RUNNING && this.endedAt !== undefined) {
        // a resume: the time it was down is neither elapsed nor a step's time, and the resumed
        // run loads its model again before its first step, so the ETA re-anchors there
        this.down += t - this.endedAt;
        this.endedAt = undefined;
        this.anchor = undefined;
      } else if (st === RunState.CANCELLED || st === RunState.FAILED) this.endedAt = t;
    }
    this.start ??= t;
    if (ev.kind.case !== "trainStep") return undefined;
    const step = Number(ev.kind.value.step);
    const max = Number(ev.kind.value.maxSteps);
    if (step > 0 && !this.anchor) this.anchor = { step, t };
    let eta: number | undefined;
    if (step >= max) eta = 0;
    else if (this.anchor && step > this.anchor.step) eta = ((t - this.anchor.t) / 1000 / (step - this.anchor.step)) * (max - step);
    return progressLine(step, max, ev.kind.value.metrics, (t - this.start - this.down) / 1000, eta);
  }
}

/** Where a step line belongs, so an off-TTY printer can thin them out. */
export interface StepInfo {
  step: number;
  maxSteps: number;
}

/** trainViaSidecar's and watchViaSidecar's sink: a line; `final` = its own line (state, warning). */
export type TrainLog = (line: string, final?: boolean, step?: StepInfo) => void;

/** A terminal sink for trainViaSidecar's log lines. */
export interface TrainProgressPrinter {
  /** pass as trainViaSidecar's `log` */
  log: TrainLog;
  /** end the live line once the run is over */
  end: () => void;
}

/**
 * The live training line on stdout. On a TTY the step line is rewritten in place and a final line
 * (state change, warning) goes on its own line below it. Off a TTY (a log file, CI) every final
 * line is printed, and a step line at most every `everySeconds` (10 s), plus, when `stepsOffTty`
 * (train, watch: yes; demo keeps its log to the milestones and this heartbeat), every
 * `everySteps` steps (default a tenth of the run) and the first and last step.
 */
export function trainProgressPrinter(opts: { stepsOffTty?: boolean; everySteps?: number; everySeconds?: number } = {}): TrainProgressPrinter {
  const tty = process.stdout.isTTY;
  const everyMs = (opts.everySeconds ?? 10) * 1000;
  let shownAt = -Infinity;
  let live = false;
  return {
    log: (line, final, step) => {
      if (final) {
        process.stdout.write(`${live ? "\n" : ""}${line}\n`);
        live = false;
        return;
      }
      if (tty) {
        process.stdout.write(`\r${line.padEnd(78)}`);
        live = true;
        return;
      }
      const now = Date.now();
      const n = opts.everySteps ?? Math.max(1, Math.round((step?.maxSteps ?? 10) / 10));
      const byStep = opts.stepsOffTty && step !== undefined && (step.step % n === 0 || shownAt === -Infinity);
      const last = step !== undefined && step.step >= step.maxSteps;
      if (byStep || last || now - shownAt >= everyMs) {
        process.stdout.write(`${line}\n`);
        shownAt = now;
      }
    },
    end: () => {
      if (live) process.stdout.write("\n");
      live = false;
    },
  };
}

/** "+12.3%, 95% CI 4.5% to 20.1%": the held-out reward's relative change, step 0 -> end. */
export function relativeChangeText(r: RunResult): string {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  return `${pct(r.relativeChange)}, 95% CI ${pct(r.relativeChangeCiLow)} to ${pct(r.relativeChangeCiHigh)}`;
}

/** A ranked-preference run's result: its held-out "reward" is pairwise accuracy (0.5 at step 0 by
 *  construction), so a ratio to step 0 means nothing; GRPO results carry no preference metrics. */
export function isPreferenceResult(r: RunResult): boolean {
  return r.preferenceMetrics !== undefined;
}

/**
 * The outcome's held-out line: "held-out reward: step 0 0.250 -> step 30 0.400 (+60.0%, 95% CI ...)"
 * for GRPO; "held-out pairwise accuracy: step 0 0.500 -> step 40 0.625 (+0.125, paired 95% CI
 * ... over 16 groups)" for ranked preference (the change, paired percentile bootstrap over groups,
 * 2000 resamples, seed 0: the interval report.md prints). undefined without both measurements.
 */
export function heldOutChangeLine(r: RunResult): string | undefined {
  const s = r.startReward;
  const e = r.endReward;
  if (!s || !e) return undefined;
  const ends = `step ${s.step} ${s.mean.toFixed(3)} -> step ${e.step} ${e.mean.toFixed(3)}`;
  if (!isPreferenceResult(r)) return `held-out reward: ${ends} (${relativeChangeText(r)})`;
  const change = e.mean - s.mean;
  const paired = s.perPrompt.length === e.perPrompt.length && s.perPrompt.length >= 2 && [...s.perPrompt, ...e.perPrompt].every(Number.isFinite);
  const ci = paired ? pairedBootstrapCI([...s.perPrompt], [...e.perPrompt], { resamples: 2000, seed: 0 }) : null;
  const sign = (x: number) => `${x >= 0 ? "+" : ""}${x.toFixed(3)}`;
  return (
    `held-out pairwise accuracy: ${ends} (${sign(change)}` +
    (ci ? `, paired 95% CI ${sign(ci.lower)} to ${sign(ci.upper)}` : "") +
    ` over ${e.numPrompts} groups; 0.5 at step 0 by construction)`
  );
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

async function followAndDownload(
  client: SidecarClient,
  stream: AsyncIterable<RunEvent>,
  opts: FollowOptions & { runId?: string },
): Promise<TrainOutcome> {
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

