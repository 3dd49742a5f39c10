/**
 * `agent eval <run_id>` / `agent eval --adapter PATH [--name N]`: evaluate the base model and an
 * adapter (the run's, a SUCCEEDED run's or a CANCELLED run's kept one; or any PEFT folder under
 * the sidecar's data root) on the test split through the sidecar's Evaluate and write
 * <evals dir>/runs/<run_id or N>/eval.json (atomically) with junit.xml beside it. The task set is
 * the run's own (a JSONL task file, re-graded in TS, or an agent task file, whose episodes its
 * own scorers scored: docs/agents.md), or --tasks / --agent-task FILE. Prints accuracy per
 * variant and the paired difference the milestone judges, with the verdict's decision interval
 * (verdict.judgeEval: against the eval's own base variant, the same numbers report.md prints),
 * the downstream verdict, and whether baseline.json gates it (its fingerprint and per-task
 * check). --threshold T: exit 1 when the adapter's primary accuracy is below T (promptfoo's
 * gate). A TS/Python grading disagreement fails the command and writes nothing.
 */
import { basename } from "node:path";
import { parseArgs } from "node:util";

import { RegradeMismatchError } from "../agent/eval/grading.js";
import { TASKS_RELATIVE_PATH } from "../agent/eval/tasks.js";
import { thresholdFailure } from "../agent/report/junit.js";
import { evalAdapterPath, evalBaseOnly, evalRun } from "../pipeline/evaluate-adapter.js";
import { agentProgramHelp } from "./agent-task-help.js";
import { EVAL_FLAGS, GLOBAL_FLAGS, evalTargetFromFlags, hasAgentProgramFlag, numberFlag, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary:
    "Base model vs an adapter on the test split (Evaluate; a task file re-graded in TS, an agent task scored by its scorers) -> runs/<id>/eval.json, junit.xml.",
  usage:
    "agent eval <run_id> [options] | agent eval --adapter PATH [--name N] [options] | agent eval --agent-task FILE (or --agent-program FILE, --tasks FILE) [--name N] [options]",
  flags: [
    ["--run ID", "the run, as a flag instead of the positional <run_id>"],
    ["--adapter PATH", "a PEFT adapter folder under the sidecar's data root, instead of a run's"],
    [
      "--name N",
      "with --adapter: the record's name, runs/<N>/eval.json (default: the folder's name); with no run: the base-only record's (default base-<file name>)",
    ],
    ["--tasks PATH", `task file (docs/tasks.md; default: the run's own, else ${TASKS_RELATIVE_PATH})`],
    ["--agent-task FILE", "an agent task file (docs/agents.md) as the task set (default for an agent run: the file it recorded, refused when it changed)"],
    agentProgramHelp,
    [
      "--limit N",
      "only the first N test tasks (the milestone needs >= 200; default all); beside a run's eval.json of more tasks it goes to eval-limit-<N>.json",
    ],
    ["--samples K", "samples (episodes) per task (default 1, greedy; K > 1 samples at temperature 1, the task's mean is its score)"],
    [
      "--temperature T",
      "sample at T in (0, 2] instead (with --samples 1 too: one sampled episode per task, as an agent served at T behaves); 0 is greedy (default for --samples 1)",
    ],
    ["--threshold T", "exit 1 when the adapter's primary accuracy (success) is below T, a fraction in [0, 1]"],
    ["--base-model M", "base model as the sidecar knows it (default: the run's own base, else the embedded default model)"],
    ["--evals-dir DIR", "where baseline.json and runs/ live (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)"],
  ],
  notes:
    "A CANCELLED run's kept adapter (saved after its last completed step) is evaluated like a SUCCEEDED run's. " +
    "junit.xml (one testcase per task, failed below a per-task score of 0.5) is written beside eval.json for every eval. " +
    "With no run and no --adapter, --agent-task FILE (or --tasks FILE) evaluates the base alone: its success and, for an agent task, " +
    "its tool-call, well-formed-call and limit rates, with report.md (transcripts) beside eval.json: no verdict, there is nothing to compare.",
  examples: [
    "agent eval run-20261201-101500-ab12cd --limit 200",
    "agent eval --adapter adapters/aml-v2 --name aml-v2",
    "agent eval orders-1 --agent-task agent-evals/agent-tasks/orders.agent.ts --threshold 0.9",
    "agent eval --agent-task agent-evals/agent-tasks/calculator.agent.ts --base-model smollm2-135m-instruct",
    "agent eval --agent-program agent-evals/agent-programs/orders-openai.ts --run orders-openai-1",
  ],
};

export const command: CommandHandler = async (argv, client) => {
  if (hasAgentProgramFlag(argv)) argv = await (await import("./agent-task.js")).agentProgramArgv(argv);
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      ...EVAL_FLAGS,
      adapter: { type: "string" },
      name: { type: "string" },
      run: { type: "string" },
      samples: { type: "string" },
      temperature: { type: "string" },
      threshold: { type: "string" },
      ...GLOBAL_FLAGS,
    },
    allowPositionals: true,
    strict: true,
  });
  // `--run ID` is the run given as a flag (as `agent eval --agent-task FILE --run ID` reads)
  const runIds = [...positionals, ...(values.run !== undefined ? [values.run] : [])];
  const byPath = values.adapter !== undefined;
  const tasksGiven = values.tasks ?? values["agent-task"];
  // no run and no adapter, a task file named: the base alone (what it does before any training)
  const baseOnly = !byPath && runIds.length === 0 && tasksGiven !== undefined;
  if (!baseOnly && (byPath ? runIds.length !== 0 : runIds.length !== 1)) {
    throw usageError(
      "eval",
      help,
      byPath ? "give a run id or --adapter, not both" : runIds.length > 1 ? "one run at a time" : "which run? give its id (or --adapter PATH)",
    );
  }
  if (values.name !== undefined && !byPath && !baseOnly) throw usageError("eval", help, "--name goes with --adapter (or with a base-only eval)");
  const threshold = values.threshold === undefined ? undefined : numberFlag("--threshold", values.threshold, { min: 0, max: 1 });
  const samples = values.samples === undefined ? 1 : numberFlag("--samples", values.samples, { min: 1, max: 64, integer: true });
  const temperature = values.temperature === undefined ? (samples > 1 ? 1 : 0) : numberFlag("--temperature", values.temperature, { min: 0, max: 2 });
  if (temperature === 0 && samples > 1)
    throw usageError("eval", help, `--temperature 0 (greedy) gives K identical samples: use --samples 1, or a temperature above 0`);
  try {
    const given = evalTargetFromFlags(values);
    const target = { ...given, settings: { ...given.settings, samplesPerTask: samples, temperature } };
    if (baseOnly) {
      const name = values.name ?? `base-${basename(tasksGiven).replace(/\.(agent\.)?([cm]?[tj]s|jsonl)$/, "")}`;
      const base = await evalBaseOnly(client, name, target);
      console.log(`wrote ${base.path}, ${basename(base.junit)}, ${basename(base.report)}`);
      const failed = threshold === undefined ? "" : thresholdFailure(base.record, threshold);
      if (failed) console.log(failed);
      return failed ? 1 : 0;
    }
    const written = byPath
      ? await evalAdapterPath(client, values.adapter!, values.name ?? basename(values.adapter!.replace(/\/+$/, "")), target)
      : await evalRun(client, runIds[0], target);
    console.log(`wrote ${written.path}, ${basename(written.junit)}`);
    const failed = threshold === undefined ? "" : thresholdFailure(written.record, threshold);
    if (failed) {
      console.log(failed);
      return 1;
    }
    return 0;
  } catch (err) {
    if (err instanceof RegradeMismatchError) {
      console.error(`agent eval: ${err.message}`);
      return 1;
    }
    throw err;
  }
};
