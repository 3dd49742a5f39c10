/**
 * `agent sweep [--config FILE | --from-run ID] [--seeds N] [--first-seed S] [--parallel P]`:
 * replicate one training request under N seeds: baseline.json if missing, then every seed's run
 * submitted to the sidecar at once (at most P waiting or training there; default all N) and
 * followed together; the sidecar's slots decide how many train at once (`py-trainer serve
 * --slots`), the rest wait in its queue, so a 1-slot sidecar trains them one after another. As
 * each run ends: download -> `agent eval` -> `agent report` (evaluations one at a time, as the
 * sidecar runs them), and the recipe's effect across seeds in
 * <evals dir>/sweeps/<sweep_id>/report.md (+ sweep.json, rewritten after every seed so a sweep
 * that dies half-way keeps what it measured), with where each seed ran (Run.slots / Run.node seen
 * while it was RUNNING, and its RUNNING interval). pipeline/seed-sweep.ts runs it;
 * agent/replicate/across-seeds.ts does the statistics.
 *
 * A seed refused because the sidecar's queue is full (RESOURCE_EXHAUSTED) is submitted again
 * when another run of this sweep ends; with none of its runs left on the sidecar, the refusal
 * stands. Exit 0 when every seed's run SUCCEEDED (whatever the verdicts), 1 otherwise.
 */

import { parseArgs } from "node:util";

import { fromJson } from "@bufbuild/protobuf";

import { TASKS_RELATIVE_PATH } from "../agent/eval/tasks.js";
import { evalsDirOrDefault } from "../agent/workspace.js";
import { TrainRequestSchema } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { targetForRun } from "../pipeline/run-task-file.js";
import { agentSweepRequest, servingRecordedTask } from "../pipeline/agent-run.js";
import { agentPreflight, noSignal, notStartedLine, preflightLines } from "../pipeline/agent-preflight.js";
import { defaultSweepId, readPlan, requestFromFlags, runSweep } from "../pipeline/seed-sweep.js";
import { agentProgramHelp } from "./agent-task-help.js";
import {
  EVALS_DIR_FLAG,
  GLOBAL_FLAGS,
  evalTargetFromFlags,
  hasAgentProgramFlag,
  numberFlag,
  usageError,
  type CommandHandler,
  type CommandHelp,
} from "./flags.js";

export const help: CommandHelp = {
  summary: "Replicate one request under N seeds (train, eval, report each) and judge the recipe across seeds.",
  usage:
    "agent sweep [--config FILE | --from-run ID] [--seeds N] [--first-seed S] [--parallel P] [--sweep-id ID] [--tasks PATH | --agent-task FILE | --agent-program FILE] [--limit N] [--evals-dir DIR] | agent sweep --resume ID [--parallel P]",
  flags: [
    ["--config FILE", "a TrainRequest in proto JSON (default agent-evals/demo-request.json)"],
    ["--from-run ID", "replicate a downloaded run: its request from runs/<ID>/run.json"],
    [
      "--resume ID",
      "continue sweep ID (after Ctrl-C or a crash): seeds already evaluated are kept, seeds still on the sidecar are followed, the missing ones are trained",
    ],
    ["--seeds N", "how many seeds (default 5; the interval over seeds is Student's t at every n)"],
    ["--first-seed S", "seeds S..S+N-1 (default: the request's grpo.seed)"],
    ["--parallel P", "at most P seeds waiting or training on the sidecar at once (default: all of them; 1: one after another)"],
    ["--sweep-id ID", "names sweeps/<ID>/ and the runs <ID>-s<seed> (default sweep-<date>-<time>-<hex>)"],
    [
      "--tasks PATH",
      `task file (docs/tasks.md) to train and evaluate on, on its embedded model unless the request names a base (default ${TASKS_RELATIVE_PATH})`,
    ],
    [
      "--agent-task FILE",
      "an agent task (docs/agents.md): its train rows and AgentSpec with --config's knobs; this process serves its tools while the seeds train (also for --from-run of an agent run)",
    ],
    agentProgramHelp,
    ["--force", "with an agent task: sweep even when the preflight finds no group of the base's episodes whose rewards differ"],
    ["--limit N", "evaluate only the first N test tasks (the milestone needs >= 200; default all)"],
    [
      "--evals-dir DIR",
      "where baseline.json, runs/ and sweeps/ live (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)",
    ],
  ],
  notes:
    "Every seed is submitted at once and followed together: the sidecar trains as many at once as it\n" +
    "has free slots (py-trainer serve --slots N; default one per GPU, 1 on CPU) and queues the rest, so\n" +
    "on a 1-slot sidecar the seeds train one after another. A seed's result is the same either way\n" +
    "for the same threads per run (on CPU a slot gets cores/slots threads). Each run gets its own\n" +
    "report.md; the sweep's report.md holds the table over seeds (with each seed's slots), the share\n" +
    "that PASS with a Wilson interval, the mean downstream delta with an interval over seeds, and\n" +
    "whether the seeds trained at once.",
  examples: [
    "agent sweep --seeds 10",
    "agent sweep --config run.json --seeds 3 --first-seed 7",
    "agent sweep --from-run run-20261201-101500-ab12cd --seeds 5 --parallel 2",
  ],
};

const SWEEP_ID = /^[A-Za-z0-9_-]{1,50}$/;

export const command: CommandHandler = async (argv, client) => {
  if (hasAgentProgramFlag(argv)) argv = await (await import("./agent-task.js")).agentProgramArgv(argv);
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      config: { type: "string" },
      "from-run": { type: "string" },
      seeds: { type: "string" },
      "first-seed": { type: "string" },
      parallel: { type: "string" },
      "sweep-id": { type: "string" },
      resume: { type: "string" },
      tasks: { type: "string" },
      "agent-task": { type: "string" },
      force: { type: "boolean" },
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
    const other = (["config", "from-run", "seeds", "first-seed", "sweep-id", "tasks", "agent-task", "limit"] as const).find((k) => values[k] !== undefined);
    if (other) throw usageError("sweep", help, `--resume takes the sweep's own settings: leave out --${other}`);
  }
  const plan = resume !== undefined ? readPlan(evalsDirOrDefault(values["evals-dir"]), resume) : null;
  const n = plan ? plan.n : values.seeds === undefined ? 5 : numberFlag("--seeds", values.seeds, { min: 1, max: 1000, integer: true });
  const parallel = Math.min(
    n,
    values.parallel === undefined ? (plan?.parallel ?? n) : numberFlag("--parallel", values.parallel, { min: 1, max: 1000, integer: true }),
  );
  const sweepId = resume ?? values["sweep-id"] ?? defaultSweepId();
  if (!SWEEP_ID.test(sweepId)) throw usageError("sweep", help, `--sweep-id '${sweepId}' must be 1-50 of [A-Za-z0-9_-]`);
  if (values["agent-task"] !== undefined && (values.tasks !== undefined || values["from-run"] !== undefined)) {
    throw usageError("sweep", help, "--agent-task names the task and the request's rows: leave out --tasks and --from-run");
  }
  let target0 = evalTargetFromFlags({
    tasks: plan?.tasksPath ?? values.tasks ?? values["agent-task"],
    limit: plan ? String(plan.limit) : values.limit,
    "evals-dir": values["evals-dir"],
  });
  const { request, source } = plan
    ? { request: fromJson(TrainRequestSchema, plan.request), source: plan.source }
    : values["agent-task"] !== undefined
      ? await agentSweepRequest(values["agent-task"], values.config)
      : await requestFromFlags(values, target0.evalsDir);
  // --from-run: the run decides the task file (and its base), not the AML default
  if (values["from-run"]) target0 = await targetForRun(client, "sweep", values["from-run"], target0);
  const first = plan
    ? plan.first
    : values["first-seed"] === undefined
      ? Number(request.grpo?.seed ?? 0n)
      : numberFlag("--first-seed", values["first-seed"], { min: 0, integer: true });
  if (first + n > 2 ** 32) throw usageError("sweep", help, `seeds ${first}..${first + n - 1} go past 2^32 - 1`);
  const target = { ...target0, settings: { ...target0.settings, baseModel: request.baseModel } };
  // an agent's request: the preflight first (no group with a spread: refused unless --force), then
  // this process serves its recorded task file's tools while the seeds train
  if (request.agent?.source?.path && !plan) {
    const preflight = await agentPreflight(client, request.agent.source.path, request);
    for (const line of preflightLines(preflight)) console.log(line);
    if (noSignal(preflight) && !values.force) {
      console.error(notStartedLine("sweep"));
      return 2;
    }
  }
  return servingRecordedTask(request, sweepId, "sweep", () => runSweep(client, { sweepId, n, first, parallel, request, source, target, plan, flags: values }));
};
