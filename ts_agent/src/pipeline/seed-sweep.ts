/**
 * `agent sweep`'s run (commands/sweep.ts parses its flags): one request trained under N seeds on
 * the sidecar at once (at most `parallel` waiting or training there), followed together; as each
 * run ends: download -> eval -> report (evaluations one at a time), and the recipe across seeds in
 * <evals dir>/sweeps/<sweep_id>/report.md + sweep.json, rewritten after every seed. A seed refused
 * because the sidecar's queue is full is submitted again when another run of this sweep ends.
 * sweep-plan.json keeps what `--resume` needs.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";

import { clone, create, toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";

import { codeRevision } from "../agent/code-revision.js";
import {
  SWEEPS_DIR,
  SWEEP_FILE,
  SWEEP_REPORT,
  effectLine,
  passLine,
  placementLine,
  renderSweepReport,
  summarizeSweep,
  type DeltaLine,
  type SeedPlacement,
  type SeedRun,
  type SweepSummary,
} from "../agent/replicate/across-seeds.js";
import { writeReport } from "../agent/report/run-report.js";
import { loadTrainRequest, outcomeLine, readLocalRun, trainViaSidecar, watchViaSidecar, type TrainOutcome } from "../agent/train/run.js";
import { type TrainLog } from "../agent/train/progress.js";
import { REPO_ROOT, UserError, displayPath, runDir, writeFileAtomic } from "../agent/workspace.js";
import { GrpoConfigSchema, TrainRequestSchema, type RunEvent, type TrainRequest } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { RunState, SidecarError, runStateName, type SidecarClient } from "../sidecar/client.js";
import { ensureBaseline } from "./baseline-step.js";
import { DEMO_REQUEST_FILE, defaultDemoRequest, requestForTasks } from "./demo-request.js";
import type { EvalTarget } from "./eval-target.js";
import { evalRun } from "./evaluate-adapter.js";
import { onInterrupt, type Interrupted } from "./interrupt.js";

/** sweeps/<id>/sweep-plan.json: what `--resume` needs (the request, the seeds, the task file). */
const SWEEP_PLAN = "sweep-plan.json";

export interface SweepPlan {
  request: JsonValue;
  first: number;
  n: number;
  source: string;
  tasksPath: string;
  limit: number;
  /** --parallel (absent in a plan written before sweeps ran seeds at once) */
  parallel?: number;
}

export function readPlan(evalsDir: string, sweepId: string): SweepPlan {
  const path = join(evalsDir, SWEEPS_DIR, sweepId, SWEEP_PLAN);
  if (!existsSync(path))
    throw new UserError(
      `agent sweep: --resume ${sweepId}: no ${SWEEP_PLAN} in ${join(evalsDir, SWEEPS_DIR, sweepId)} (a sweep started by this agent writes it first)`,
    );
  return JSON.parse(readFileSync(path, "utf8")) as SweepPlan;
}

/** The placements a resumed sweep recorded before (a kept seed's slots were seen then, not now). */
function recordedPlacements(dir: string): Map<number, SeedPlacement> {
  const out = new Map<number, SeedPlacement>();
  try {
    const summary = JSON.parse(readFileSync(join(dir, SWEEP_FILE), "utf8")) as SweepSummary;
    for (const s of summary.seeds ?? []) if (s.placement) out.set(s.seed, s.placement);
  } catch {
    // no sweep.json yet (no seed had finished), or a damaged one: the placements are seen again
  }
  return out;
}

/** A resumed seed: its local, evaluated run as it is; else the run followed on the sidecar to its
 *  end; else undefined (never started: train it). */
async function resumedSeed(
  client: SidecarClient,
  evalsDir: string,
  runId: string,
  log: TrainLog,
  onEvent: (ev: RunEvent) => void,
): Promise<{ out: TrainOutcome; evaluated: boolean } | undefined> {
  const local = readLocalRun(evalsDir, runId);
  if (local && existsSync(join(runDir(evalsDir, runId), "eval.json"))) {
    return { out: { runId, state: local.state, reason: local.reason, result: local.result, events: [], localDir: runDir(evalsDir, runId) }, evaluated: true };
  }
  try {
    await client.getRun(runId);
  } catch (err) {
    if (err instanceof SidecarError && err.code === Code.NotFound) return undefined;
    throw err;
  }
  return { out: await watchViaSidecar(client, runId, { evalsDir, log, onEvent }), evaluated: false };
}

export function defaultSweepId(now = new Date()): string {
  const p = (n: number) => String(n).padStart(2, "0");
  const d = `${now.getUTCFullYear()}${p(now.getUTCMonth() + 1)}${p(now.getUTCDate())}-${p(now.getUTCHours())}${p(now.getUTCMinutes())}${p(now.getUTCSeconds())}`;
  return `sweep-${d}-${randomBytes(2).toString("hex")}`;
}

export async function requestFromFlags(
  values: { config?: string; "from-run"?: string; tasks?: string },
  evalsDir: string,
): Promise<{ request: TrainRequest; source: string }> {
  if (values.config && values["from-run"]) throw new UserError("agent sweep: give --config or --from-run, not both");
  if (values.config) {
    const request = await loadTrainRequest(resolve(values.config));
    return { request: values.tasks ? requestForTasks(request, values.tasks, false) : request, source: values.config };
  }
  if (values["from-run"]) {
    const run = readLocalRun(evalsDir, values["from-run"]);
    if (!run?.request)
      throw new UserError(
        `agent sweep: --from-run ${values["from-run"]}: no runs/${values["from-run"]}/run.json with a request (download it first: agent download ${values["from-run"]})`,
      );
    return { request: clone(TrainRequestSchema, run.request), source: `the request of run ${values["from-run"]}` };
  }
  return { request: await defaultDemoRequest(values.tasks), source: relative(REPO_ROOT, DEMO_REQUEST_FILE) };
}

function deltaLine(
  c: { n: number; paired?: { meanDiff: number } | null; decision?: { lower: number; upper: number; method: string } | null } | null | undefined,
): DeltaLine | null {
  if (!c?.paired || !c.decision) return null;
  return { n: c.n, delta: c.paired.meanDiff, ciLow: c.decision.lower, ciHigh: c.decision.upper, method: c.decision.method };
}

// ---------------------------------------------------------------------------------------------
// Several runs followed at once

/** One seed's log lines, each naming its run (several runs print at once): state changes and
 *  warnings always, a step line at most every `everyMs` and at the last step. Never rewritten in
 *  place: two runs share the terminal. */
export function seedLog(runId: string, print: (line: string) => void = console.log, everyMs = 10_000): TrainLog {
  let shownAt = -Infinity;
  return (line, final, step) => {
    if (!final) {
      const now = Date.now();
      if (!(step !== undefined && step.step >= step.maxSteps) && now - shownAt < everyMs) return;
      shownAt = now;
    }
    print(line.startsWith(`[${runId}]`) ? line : `[${runId}] ${line}`);
  };
}

/** Records a run's slots and node into `p` as the sidecar shows them while it is RUNNING (GetRun at
 *  its RUNNING event and again at its first step: a cluster names the node once the worker is
 *  placed). `settled` waits for the answers. */
function placementWatcher(client: SidecarClient, runId: string, p: SeedPlacement): { onEvent: (ev: RunEvent) => void; settled: () => Promise<unknown> } {
  const asked: Array<Promise<unknown>> = [];
  let atStep = false;
  const ask = () =>
    asked.push(
      client.getRun(runId).then(
        (r) => {
          if (r.slots.length) p.slots = [...r.slots];
          if (r.node) p.node = r.node;
        },
        () => undefined, // the placement is what was seen; a failed look leaves it as it was
      ),
    );
  return {
    onEvent: (ev) => {
      if (ev.kind.case === "stateChange" && ev.kind.value.state === RunState.RUNNING) ask();
      else if (ev.kind.case === "trainStep" && !atStep) {
        atStep = true;
        ask();
      }
    },
    settled: () => Promise.all(asked),
  };
}

/**
 * `attempt()` until the sidecar admits it: a RESOURCE_EXHAUSTED refusal (its queue is full) waits
 * for `nextEnd()` (another run of this sweep ended, so its queue has room) and tries again, as long
 * as `othersOnSidecar()` > 0; with none, nothing of ours will free a place and the refusal stands.
 * Any other error is thrown at once.
 */
export async function untilAdmitted<T>(
  attempt: () => Promise<T>,
  opts: { othersOnSidecar: () => number; nextEnd: () => Promise<void>; onRefused?: (err: SidecarError) => void; onRetry?: () => void },
): Promise<T> {
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (!(err instanceof SidecarError && err.code === Code.ResourceExhausted) || opts.othersOnSidecar() <= 0) throw err;
      opts.onRefused?.(err);
      await opts.nextEnd();
      opts.onRetry?.();
    }
  }
}

/** Wakes everyone waiting for the next run of this sweep to end. */
function endSignal(): { next: () => Promise<void>; fire: () => void } {
  let waiters: Array<() => void> = [];
  return {
    next: () => new Promise<void>((res) => waiters.push(res)),
    fire: () => {
      const w = waiters;
      waiters = [];
      for (const f of w) f();
    },
  };
}

/** Runs `f`s one at a time, in call order (the sidecar evaluates one job at a time anyway; this
 *  keeps each evaluation's lines together). */
function oneAtATime(): <T>(f: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(f: () => Promise<T>) => {
    const p = tail.then(f);
    tail = p.catch(() => undefined);
    return p;
  };
}

/** What runSweep is given: the sweep's id, seeds first..first+n-1, the request and where it came
 *  from, the eval target, the plan of a resumed sweep, and the flags to repeat in printed commands. */
export interface SweepSpec {
  sweepId: string;
  n: number;
  first: number;
  parallel: number;
  request: TrainRequest;
  source: string;
  target: EvalTarget;
  plan: SweepPlan | null;
  flags: Interrupted["flags"];
}

/** A seed's record once its run ended and was evaluated: report.md written, the run judged as
 *  report.md judges it (held-out reward, downstream, the milestone), where and how long it ran. */
function judgedSeed(evalsDir: string, seed: number, out: TrainOutcome, placement: SeedPlacement, s0: number): SeedRun {
  const { path: reportPath, analysis } = writeReport(evalsDir, out.runId);
  // the held-out-template split's row, as report.md shows it (the verdict's splits)
  const templ = out.state === RunState.SUCCEEDED ? deltaLine(analysis.splits[1]?.comparison) : null;
  const h = analysis.reward;
  const d = analysis.downstream;
  return {
    seed,
    runId: out.runId,
    state: runStateName(out.state),
    heldOut: h ? { start: h.startMean, end: h.endMean, relativeChange: h.relativeChange, ciLow: h.relativeChangeCiLow, ciHigh: h.relativeChangeCiHigh } : null,
    downstream: d ? { n: d.n, delta: d.meanDiff, ciLow: d.lower, ciHigh: d.upper, method: d.method } : null,
    heldOutTemplate: templ,
    verdict: analysis.milestone.verdict,
    rewardVerdict: analysis.milestone.reward.verdict,
    downstreamVerdict: analysis.milestone.downstream.verdict,
    trainSeconds: out.result?.trainSeconds ?? NaN,
    wallSeconds: (Date.now() - s0) / 1000,
    report: relative(evalsDir, reportPath),
    placement,
  };
}

/** The sweep's last lines: how many seeds passed, the effect over seeds, where they ran, the report. */
function printSweepEnd(summary: SweepSummary, reportPath: string, t0: number): void {
  console.log("");
  console.log(`[sweep] ${passLine(summary)}`);
  console.log(`[sweep] ${effectLine(summary)}`);
  console.log(`[sweep] placement: ${placementLine(summary)}`);
  console.log(`[sweep] shown in detail: ${summary.detailRunId}; report: ${reportPath} (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
}

/** Before the first seed: the sidecar SERVING, baseline.json kept or set, the sweep's first line,
 *  and (a new sweep) its plan written for --resume; false when the sidecar is not serving. */
async function startSweep(client: SidecarClient, spec: SweepSpec, dir: string, described: string, t0: number): Promise<boolean> {
  const { sweepId, n, first, parallel, request, source, target, plan } = spec;
  const status = await client.checkHealth("");
  if (status !== "SERVING") {
    console.error(`agent sweep: sidecar ${client.options.address} is ${status}`);
    return false;
  }
  await ensureBaseline(client, target, "sweep", t0);
  console.log(
    `[sweep] ${sweepId}: ${n} seed${n === 1 ? "" : "s"} (${first}..${first + n - 1}) of ${described}; ` +
      (parallel > 1 ? `up to ${parallel} on the sidecar at once (its slots decide how many train at once)` : "one at a time"),
  );
  mkdirSync(dir, { recursive: true });
  if (!plan) {
    const written: SweepPlan = {
      request: toJson(TrainRequestSchema, request),
      first,
      n,
      source,
      tasksPath: target.tasksPath,
      limit: target.settings.limit,
      parallel,
    };
    writeFileAtomic(join(dir, SWEEP_PLAN), JSON.stringify(written, null, 2) + "\n");
  }
  return true;
}

/** Run the sweep; exit 0 when every seed's run SUCCEEDED (whatever the verdicts), 1 otherwise. */
export async function runSweep(client: SidecarClient, spec: SweepSpec): Promise<number> {
  const { sweepId, n, first, parallel, request, source, target, plan, flags: values } = spec;
  const dir = join(target.evalsDir, SWEEPS_DIR, sweepId);
  // every report names the base model and the task file (issue 32, item 1)
  const described = `${source} (base model ${request.baseModel || "the embedded default model"}, task file ${displayPath(target.tasksPath)})`;
  const links = { docs: relative(dir, join(REPO_ROOT, "docs")), runs: relative(dir, join(target.evalsDir, "runs")) };

  const t0 = Date.now();
  if (!(await startSweep(client, spec, dir, described, t0))) return 1;
  const recorded = plan ? recordedPlacements(dir) : new Map<number, SeedPlacement>();
  const seeds: SeedRun[] = [];
  const notStarted = new Set(Array.from({ length: n }, (_, i) => first + i));
  /** run ids submitted to the sidecar and not over yet (what Ctrl-C leaves training) */
  const inFlight = new Set<string>();
  const ended = endSignal();
  const evaluating = oneAtATime();
  let submitted = 0;

  const summarize = () =>
    summarizeSweep(
      sweepId,
      described,
      [...seeds].sort((a, b) => a.seed - b.seed),
      parallel,
    );

  /** Train `req` on the sidecar; a full queue waits for another run of this sweep to end. */
  const submit = (req: TrainRequest, seed: number, log: TrainLog, onEvent: (ev: RunEvent) => void): Promise<TrainOutcome> =>
    untilAdmitted(() => trainViaSidecar(client, req, { evalsDir: target.evalsDir, log, onEvent }), {
      othersOnSidecar: () => inFlight.size - 1,
      nextEnd: ended.next,
      onRefused: (err) => {
        inFlight.delete(req.runId);
        notStarted.add(seed);
        log(`[${req.runId}] not admitted (${err.message}): submitted again when another run of this sweep ends`, true);
      },
      onRetry: () => {
        notStarted.delete(seed);
        inFlight.add(req.runId);
      },
    });

  const runSeed = async (seed: number): Promise<SeedRun> => {
    const s0 = Date.now();
    const req = clone(TrainRequestSchema, request);
    req.grpo ??= create(GrpoConfigSchema);
    req.grpo.seed = BigInt(seed);
    req.runId = `${sweepId}-s${seed}`;
    console.log(`[sweep] seed ${seed} (${++submitted}/${n}): run ${req.runId}`);
    const placement: SeedPlacement = recorded.get(seed) ?? { slots: [], node: "", startMs: null, endMs: null };
    const watcher = placementWatcher(client, req.runId, placement);
    const log = seedLog(req.runId);
    notStarted.delete(seed);
    inFlight.add(req.runId);
    let resumed: { out: TrainOutcome; evaluated: boolean } | undefined;
    let out: TrainOutcome;
    try {
      resumed = plan ? await resumedSeed(client, target.evalsDir, req.runId, log, watcher.onEvent) : undefined;
      if (resumed) console.log(`[sweep] seed ${seed}: ${resumed.evaluated ? "already trained and evaluated: kept" : "followed on the sidecar"}`);
      out = resumed?.out ?? (await submit(req, seed, log, watcher.onEvent));
    } finally {
      inFlight.delete(req.runId);
      ended.fire();
    }
    await watcher.settled();
    const local = readLocalRun(target.evalsDir, out.runId);
    if (local?.startTime) placement.startMs = timestampMs(local.startTime);
    if (local?.endTime) placement.endMs = timestampMs(local.endTime);
    console.log(`[sweep] ${outcomeLine(out)}`);
    return evaluating(async () => {
      if (out.state === RunState.SUCCEEDED && !resumed?.evaluated) await evalRun(client, out.runId, target);
      const record = judgedSeed(target.evalsDir, seed, out, placement, s0);
      console.log(`[sweep] seed ${seed}: ${record.verdict} (${record.wallSeconds.toFixed(0)} s)`);
      return record;
    });
  };

  // `parallel` lanes take the seeds in order; after a failure no lane starts another seed, and the
  // seeds already on the sidecar are followed to their end (their records are written)
  const order = [...notStarted];
  let failure: { err: unknown } | undefined;
  const stopWatching = onInterrupt(() => ({
    command: "sweep",
    runId: "",
    runIds: [...inFlight],
    seedsLeft: [...notStarted].sort((a, b) => a - b),
    sweepId,
    flags: values,
  }));
  const lane = async () => {
    while (order.length && !failure) {
      try {
        seeds.push(await runSeed(order.shift()!));
      } catch (err) {
        failure ??= { err };
        continue;
      }
      const summary = summarize();
      writeFileAtomic(join(dir, SWEEP_FILE), JSON.stringify({ ...summary, codeRevision: codeRevision() }, null, 2) + "\n");
      writeFileAtomic(join(dir, SWEEP_REPORT), renderSweepReport(summary, links));
    }
  };
  try {
    await Promise.all(Array.from({ length: parallel }, lane));
  } finally {
    stopWatching();
  }
  if (failure) throw failure.err;
  // every run's report names the sweep and carries its replicate section (the final summary)
  for (const s of seeds) writeReport(target.evalsDir, s.runId);
  printSweepEnd(summarize(), join(dir, SWEEP_REPORT), t0);
  return seeds.every((s) => s.state === "SUCCEEDED") ? 0 : 1;
}
