/**
 * `agent sweep [--config FILE | --from-run ID] [--seeds N] [--first-seed S]`: replicate one
 * training request under N seeds, one after another: baseline.json if missing, then per seed
 * train -> download -> `agent eval` -> `agent report`, and the recipe's effect across seeds in
 * <evals dir>/sweeps/<sweep_id>/report.md (+ sweep.json, rewritten after every seed so a sweep
 * that dies half-way keeps what it measured). agent/replicate/sweep.ts does the statistics.
 *
 * Exit 0 when every seed's run SUCCEEDED (whatever the verdicts), 1 otherwise.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";

import { clone, create, fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";

import { codeRevision } from "../agent/code-revision.js";
import { SWEEPS_DIR, SWEEP_FILE, SWEEP_REPORT, effectLine, passLine, renderSweepReport, summarizeSweep, type DeltaLine, type SeedRun } from "../agent/replicate/sweep.js";
import { writeReport } from "../agent/report/report.js";
import { loadTrainRequest, outcomeLine, readLocalRun, trainProgressPrinter, trainViaSidecar, watchViaSidecar, type TrainOutcome } from "../agent/train/run.js";
import { TASKS_RELATIVE_PATH } from "../agent/eval/tasks.js";
import { REPO_ROOT, UserError, displayPath, evalsDirOrDefault, runDir, writeFileAtomic } from "../agent/workspace.js";
import { GrpoConfigSchema, TrainRequestSchema, type TrainRequest } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { RunState, SidecarError, runStateName, type SidecarClient } from "../sidecar/client.js";
import { Code } from "@connectrpc/connect";
import { ensureBaseline } from "./baseline.js";
import { DEMO_REQUEST_FILE, defaultDemoRequest, requestForTasks } from "./demo.js";
import { evalRun } from "./eval.js";
import { onInterrupt } from "./interrupt.js";
import { targetForRun } from "./run-task-file.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, evalTargetFromFlags, numberFlag, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Replicate one request under N seeds (train, eval, report each) and judge the recipe across seeds.",
  usage: "agent sweep [--config FILE | --from-run ID] [--seeds N] [--first-seed S] [--sweep-id ID] [--tasks PATH] [--limit N] [--evals-dir DIR] | agent sweep --resume ID",
  flags: [
    ["--config FILE", "a TrainRequest in proto JSON (default agent-evals/demo-request.json)"],
    ["--from-run ID", "replicate a downloaded run: its request from runs/<ID>/run.json"],
    ["--resume ID", "continue sweep ID (after Ctrl-C or a crash): seeds already evaluated are kept, a seed still on the sidecar is followed, the missing ones are trained"],
    ["--seeds N", "how many seeds (default 5; the interval over seeds is Student's t at every n)"],
    ["--first-seed S", "seeds S..S+N-1 (default: the request's grpo.seed)"],
    ["--sweep-id ID", "names sweeps/<ID>/ and the runs <ID>-s<seed> (default sweep-<date>-<time>-<hex>)"],
    ["--tasks PATH", `task file (docs/tasks.md) to train and evaluate on, on its embedded model unless the request names a base (default ${TASKS_RELATIVE_PATH})`],
    ["--limit N", "evaluate only the first N test tasks (the milestone needs >= 200; default all)"],
    ["--evals-dir DIR", "where baseline.json, runs/ and sweeps/ live (default agent-evals/)"],
  ],
  notes:
    "Seeds run one after another (runs on one machine slow each other down). Each run gets its own\n" +
    "report.md; the sweep's report.md holds the table over seeds, the share that PASS with a Wilson\n" +
    "interval and the mean downstream delta with an interval over seeds.",
  examples: ["agent sweep --seeds 10", "agent sweep --config run.json --seeds 3 --first-seed 7", "agent sweep --from-run run-20261201-101500-ab12cd --seeds 5"],
};

const SWEEP_ID = /^[A-Za-z0-9_-]{1,50}$/;
/** sweeps/<id>/sweep-plan.json: what `--resume` needs (the request, the seeds, the task file). */
const SWEEP_PLAN = "sweep-plan.json";

interface SweepPlan {
  request: JsonValue;
  first: number;
  n: number;
  source: string;
  tasksPath: string;
  limit: number;
}

function readPlan(evalsDir: string, sweepId: string): SweepPlan {
  const path = join(evalsDir, SWEEPS_DIR, sweepId, SWEEP_PLAN);
  if (!existsSync(path)) throw new UserError(`agent sweep: --resume ${sweepId}: no ${SWEEP_PLAN} in ${join(evalsDir, SWEEPS_DIR, sweepId)} (a sweep started by this agent writes it first)`);
  return JSON.parse(readFileSync(path, "utf8")) as SweepPlan;
}

/** A resumed seed: its local, evaluated run as it is; else the run followed on the sidecar to its
 *  end; else undefined (never started: train it). */
async function resumedSeed(client: SidecarClient, evalsDir: string, runId: string, log: (line: string) => void): Promise<{ out: TrainOutcome; evaluated: boolean } | undefined> {
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
  return { out: await watchViaSidecar(client, runId, { evalsDir, log }), evaluated: false };
}

function defaultSweepId(now = new Date()): string {
  const p = (n: number) => String(n).padStart(2, "0");
  const d = `${now.getUTCFullYear()}${p(now.getUTCMonth() + 1)}${p(now.getUTCDate())}-${p(now.getUTCHours())}${p(now.getUTCMinutes())}${p(now.getUTCSeconds())}`;
  return `sweep-${d}-${randomBytes(2).toString("hex")}`;
}

async function requestFromFlags(values: { config?: string; "from-run"?: string; tasks?: string }, evalsDir: string): Promise<{ request: TrainRequest; source: string }> {
  if (values.config && values["from-run"]) throw new UserError("agent sweep: give --config or --from-run, not both");
  if (values.config) {
    const request = await loadTrainRequest(resolve(values.config));
    return { request: values.tasks ? requestForTasks(request, values.tasks, false) : request, source: values.config };
  }
  if (values["from-run"]) {
    const run = readLocalRun(evalsDir, values["from-run"]);
    if (!run?.request) throw new UserError(`agent sweep: --from-run ${values["from-run"]}: no runs/${values["from-run"]}/run.json with a request (download it first: agent download ${values["from-run"]})`);
    return { request: clone(TrainRequestSchema, run.request), source: `the request of run ${values["from-run"]}` };
  }
  return { request: await defaultDemoRequest(values.tasks), source: relative(REPO_ROOT, DEMO_REQUEST_FILE) };
}

function deltaLine(c: { n: number; paired?: { meanDiff: number } | null; decision?: { lower: number; upper: number; method: string } | null } | null | undefined): DeltaLine | null {
  if (!c?.paired || !c.decision) return null;
  return { n: c.n, delta: c.paired.meanDiff, ciLow: c.decision.lower, ciHigh: c.decision.upper, method: c.decision.method };
}

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      config: { type: "string" },
      "from-run": { type: "string" },
      seeds: { type: "string" },
      "first-seed": { type: "string" },
      "sweep-id": { type: "string" },
      resume: { type: "string" },
      tasks: { type: "string" },
      limit: { type: "string" },
      ...EVALS_DIR_FLAG,
      ...GLOBAL_FLAGS,
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length) throw usageError("sweep", help, `unexpected argument '${positionals[0]}'`);
  const resume = values.resume;
  if (resume !== undefined) {
    const other = (["config", "from-run", "seeds", "first-seed", "sweep-id", "tasks", "limit"] as const).find((k) => values[k] !== undefined);
    if (other) throw usageError("sweep", help, `--resume takes the sweep's own settings: leave out --${other}`);
  }
  const plan = resume !== undefined ? readPlan(evalsDirOrDefault(values["evals-dir"]), resume) : null;
  const n = plan ? plan.n : values.seeds === undefined ? 5 : numberFlag("--seeds", values.seeds, { min: 1, max: 1000, integer: true });
  const sweepId = resume ?? values["sweep-id"] ?? defaultSweepId();
  if (!SWEEP_ID.test(sweepId)) throw usageError("sweep", help, `--sweep-id '${sweepId}' must be 1-50 of [A-Za-z0-9_-]`);
  let target0 = evalTargetFromFlags({ tasks: plan?.tasksPath ?? values.tasks, limit: plan ? String(plan.limit) : values.limit, "evals-dir": values["evals-dir"] });
  const { request, source } = plan ? { request: fromJson(TrainRequestSchema, plan.request), source: plan.source } : await requestFromFlags(values, target0.evalsDir);
  // --from-run: the run decides the task file (and its base), not the AML default
  if (values["from-run"]) target0 = await targetForRun(client, "sweep", values["from-run"], target0);
  const first = plan ? plan.first : values["first-seed"] === undefined ? Number(request.grpo?.seed ?? 0n) : numberFlag("--first-seed", values["first-seed"], { min: 0, integer: true });
  if (first + n > 2 ** 32) throw usageError("sweep", help, `seeds ${first}..${first + n - 1} go past 2^32 - 1`);
  const target = { ...target0, settings: { ...target0.settings, baseModel: request.baseModel } };
  const dir = join(target.evalsDir, SWEEPS_DIR, sweepId);
  // every report names the base model and the task file (issue 32, item 1)
  const described = `${source} (base model ${request.baseModel || "the embedded default model"}, task file ${displayPath(target.tasksPath)})`;
  const links = { docs: relative(dir, join(REPO_ROOT, "docs")), runs: relative(dir, join(target.evalsDir, "runs")) };

  const t0 = Date.now();
  const status = await client.checkHealth("");
  if (status !== "SERVING") {
    console.error(`agent sweep: sidecar ${client.options.address} is ${status}`);
    return 1;
  }
  await ensureBaseline(client, target, "sweep", t0);
  console.log(`[sweep] ${sweepId}: ${n} seed${n === 1 ? "" : "s"} (${first}..${first + n - 1}) of ${described}`);

  mkdirSync(dir, { recursive: true });
  if (!plan) {
    const written: SweepPlan = { request: toJson(TrainRequestSchema, request), first, n, source, tasksPath: target.tasksPath, limit: target.settings.limit };
    writeFileAtomic(join(dir, SWEEP_PLAN), JSON.stringify(written, null, 2) + "\n");
  }
  const seeds: SeedRun[] = [];
  let allSucceeded = true;
  for (let seed = first; seed < first + n; seed++) {
    const s0 = Date.now();
    const req = clone(TrainRequestSchema, request);
    req.grpo ??= create(GrpoConfigSchema);
    req.grpo.seed = BigInt(seed);
    req.runId = `${sweepId}-s${seed}`;
    console.log(`[sweep] seed ${seed} (${seeds.length + 1}/${n}): run ${req.runId}`);
    const progress = trainProgressPrinter({ stepsOffTty: false, everySteps: 50 });
    const left = Array.from({ length: first + n - seed - 1 }, (_, i) => seed + 1 + i);
    const stopWatching = onInterrupt(() => ({ command: "sweep", runId: req.runId, seedsLeft: left, sweepId, flags: values }));
    const resumed = plan ? await resumedSeed(client, target.evalsDir, req.runId, progress.log) : undefined;
    if (resumed) console.log(`[sweep] seed ${seed}: ${resumed.evaluated ? "already trained and evaluated: kept" : "followed on the sidecar"}`);
    const out = resumed?.out ?? (await trainViaSidecar(client, req, { evalsDir: target.evalsDir, log: progress.log }).finally(stopWatching));
    stopWatching();
    progress.end();
    console.log(`[sweep] ${outcomeLine(out)}`);
    if (out.state === RunState.SUCCEEDED && !resumed?.evaluated) await evalRun(client, out.runId, target);
    else if (out.state !== RunState.SUCCEEDED) allSucceeded = false;
    const { path: reportPath, analysis } = writeReport(target.evalsDir, out.runId);
    // the held-out-template split's row, as report.md shows it (the verdict's splits)
    const templ = out.state === RunState.SUCCEEDED ? deltaLine(analysis.splits[1]?.comparison) : null;
    const r = out.result;
    const h = analysis.reward;
    const d = analysis.downstream;
    seeds.push({
      seed,
      runId: out.runId,
      state: runStateName(out.state),
      heldOut: h ? { start: h.startMean, end: h.endMean, relativeChange: h.relativeChange, ciLow: h.relativeChangeCiLow, ciHigh: h.relativeChangeCiHigh } : null,
      downstream: d ? { n: d.n, delta: d.meanDiff, ciLow: d.lower, ciHigh: d.upper, method: d.method } : null,
      heldOutTemplate: templ,
      verdict: analysis.milestone.verdict,
      rewardVerdict: analysis.milestone.reward.verdict,
      downstreamVerdict: analysis.milestone.downstream.verdict,
      trainSeconds: r?.trainSeconds ?? NaN,
      wallSeconds: (Date.now() - s0) / 1000,
      report: relative(target.evalsDir, reportPath),
    });
    console.log(`[sweep] seed ${seed}: ${analysis.milestone.verdict} (${((Date.now() - s0) / 1000).toFixed(0)} s)`);
    const summary = summarizeSweep(sweepId, described, seeds);
    writeFileAtomic(join(dir, SWEEP_FILE), JSON.stringify({ ...summary, codeRevision: codeRevision() }, null, 2) + "\n");
    writeFileAtomic(join(dir, SWEEP_REPORT), renderSweepReport(summary, links));
  }
  // every run's report names the sweep and carries its replicate section (the final summary)
  for (const s of seeds) writeReport(target.evalsDir, s.runId);
  const summary = summarizeSweep(sweepId, described, seeds);
  console.log("");
  console.log(`[sweep] ${passLine(summary)}`);
  console.log(`[sweep] ${effectLine(summary)}`);
  console.log(`[sweep] shown in detail: ${summary.detailRunId}; report: ${join(dir, SWEEP_REPORT)} (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  return allSucceeded ? 0 : 1;
};
