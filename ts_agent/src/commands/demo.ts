/**
 * `agent demo`: the whole first run against a running sidecar (scripts/demo.sh starts and stops
 * it; `make demo` calls that script):
 *   1. health check;
 *   2. `agent baseline set` if agent-evals/baseline.json is missing (never --force);
 *   3. train: agent-evals/demo-request.json (embedded default model, the AML train split, reward
 *      exact_match, 150 steps at batch 32, every other knob the sidecar's default), or the
 *      TrainRequest JSON given with --config; with --tasks FILE, that file's train rows inline
 *      (unless the config has a dataset) on the file's own embedded model (base_model
 *      "embedded:FILE", unless the request names a base); artifacts land in agent-evals/runs/<run_id>/;
 *   4. `agent eval <run_id>`: base vs the new adapter on the whole test split;
 *   5. `agent report <run_id>`;
 *   6. print where everything is.
 */
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { baselinePath } from "../agent/eval/baseline-record.js";
import { TASKS_RELATIVE_PATH } from "../agent/eval/tasks.js";
import { writeReport } from "../agent/report/run-report.js";
import { loadTrainRequest, outcomeLine, trainViaSidecar } from "../agent/train/run.js";
import { relativeChangeText, trainProgressPrinter } from "../agent/train/progress.js";
import { milestoneLine, reasonAfterLabel } from "../agent/verdict/milestone.js";
import { ensureBaseline } from "../pipeline/baseline-step.js";
import { defaultDemoRequest, requestForTasks } from "../pipeline/demo-request.js";
import { evalRun } from "../pipeline/evaluate-adapter.js";
import { onInterrupt } from "../pipeline/interrupt.js";
import { RunState } from "../sidecar/client.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, TRAIN_FLAGS, evalTargetFromFlags, type CommandHandler } from "./flags.js";

const USAGE = `usage: agent demo [--config FILE] [--run-id ID] [--tasks PATH] [--evals-dir DIR]
  --config FILE     a TrainRequest in proto JSON instead of the default request
  --run-id ID       the run id to ask for (default: the sidecar assigns one)
  --tasks PATH      task file (docs/tasks.md; default ${TASKS_RELATIVE_PATH}): its train rows,
                    its embedded model unless the request names a base, its test split
  --evals-dir DIR   where baseline.json and runs/ live (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)`;

/** The advice on how the recipe replicates: the default request's sweep is in docs/demo.md; a
 *  --config / --tasks demo (make demo-real) gets the sweep of its own request and task file. */
export function replicateLine(seed: bigint, given: { config?: string; tasks?: string }): string {
  const head = `[demo] this verdict is one draw of the training randomness (seed ${String(seed)} on this machine); how the recipe replicates: `;
  if (!given.config && !given.tasks) return head + "agent sweep --seeds 10, or make bench-seeds (docs/demo.md has this recipe's 10-seed sweep)";
  const args = [given.config ? `--config ${given.config}` : "", given.tasks ? `--tasks ${given.tasks}` : ""].filter((a) => a !== "").join(" ");
  return head + `agent sweep ${args} --seeds 5, or .venv/bin/python scripts/bench_seeds.py ${args} --seeds 5`;
}

function elapsed(t0: number): string {
  return `${((Date.now() - t0) / 1000).toFixed(1)} s`;
}

export const command: CommandHandler = async (argv, client) => {
  if (argv.some((a) => a === "--agent-program" || a.startsWith("--agent-program="))) argv = await (await import("./agent-task.js")).agentProgramArgv(argv);
  if (argv.some((a) => a === "--agent-task" || a.startsWith("--agent-task="))) return (await import("./agent-task.js")).demoAgentTask(argv, client);
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...TRAIN_FLAGS, tasks: { type: "string" }, ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) {
    console.error(USAGE);
    return 2;
  }
  const t0 = Date.now();

  // The request decides the base model; baseline and eval use the same one. A bad task file or
  // request is refused before the sidecar is asked anything.
  const paths = evalTargetFromFlags({ tasks: values.tasks, "evals-dir": values["evals-dir"] });
  const request = values.config
    ? values.tasks
      ? requestForTasks(await loadTrainRequest(resolve(values.config)), values.tasks, false)
      : await loadTrainRequest(resolve(values.config))
    : await defaultDemoRequest(values.tasks);
  if (values["run-id"]) request.runId = values["run-id"];
  const target = { ...paths, settings: { ...paths.settings, baseModel: request.baseModel } };

  // 1. health
  const status = await client.checkHealth("");
  console.log(`[demo] sidecar ${client.options.address}: ${status}`);
  if (status !== "SERVING") return 1;

  // 2. baseline
  await ensureBaseline(client, target, "demo", t0);

  // 3. train
  const source = request.dataset?.source;
  console.log(
    `[demo] training ${request.baseModel || "the embedded default model"} on ` +
      (source?.case === "inline"
        ? `${source.value.rows.length} inline train rows`
        : `dataset ${source?.case === "jsonlPath" ? source.value : "(from config)"}`),
  );
  const progress = trainProgressPrinter({ stepsOffTty: false });
  const stopWatching = onInterrupt(() => ({ command: "demo", runId: request.runId, flags: values }));
  const out = await trainViaSidecar(client, request, { evalsDir: target.evalsDir, log: progress.log }).finally(stopWatching);
  progress.end();
  console.log(`[demo] ${outcomeLine(out)} (${elapsed(t0)})`);
  const r = out.result;
  if (r?.startReward && r.endReward) {
    console.log(`[demo] held-out reward ${r.startReward.mean.toFixed(3)} -> ${r.endReward.mean.toFixed(3)} (${relativeChangeText(r)})`);
  }

  // 4. eval (only a SUCCEEDED run has an adapter to evaluate)
  let evalPath = "";
  if (out.state === RunState.SUCCEEDED) {
    evalPath = (await evalRun(client, out.runId, target)).path;
    console.log(`[demo] wrote ${evalPath} (${elapsed(t0)})`);
  }

  // 5. report (also for a failed run: it says what is pending)
  const { path: reportPath, analysis } = writeReport(target.evalsDir, out.runId);
  const m = analysis.milestone;

  // 6. where everything is
  const dir = out.localDir;
  console.log("");
  console.log(`[demo] ${milestoneLine(m)}`);
  console.log(`       ${reasonAfterLabel(m)}`);
  console.log(replicateLine(request.grpo?.seed ?? 0n, { config: values.config, tasks: values.tasks }));
  console.log(`[demo] done in ${elapsed(t0)}. Files:`);
  const lines: Array<[string, string]> = [
    ["report", reportPath],
    ["reward curve", join(dir, "reward-vs-step.png")],
    ["reward csv", join(dir, "reward-vs-step.csv")],
    ["adapter", join(dir, "adapter")],
    ["run record", join(dir, "run.json")],
    ["events", join(dir, "events.jsonl")],
    ["eval", evalPath || "(not run)"],
    ["baseline", baselinePath(target.evalsDir)],
  ];
  for (const [what, path] of lines) console.log(`  ${what.padEnd(13)} ${path}`);
  return out.state === RunState.SUCCEEDED ? 0 : 1;
};
