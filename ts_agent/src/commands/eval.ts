/**
 * `agent eval <run_id>` / `agent eval --adapter PATH [--name N]`: evaluate the base model and an
 * adapter (the run's, a SUCCEEDED run's or a CANCELLED run's kept one; or any PEFT folder under
 * the sidecar's data root) on the test split through the sidecar's Evaluate, re-grade every
 * completion in TS, and write <evals dir>/runs/<run_id or N>/eval.json (atomically). Prints
 * accuracy per variant and the paired difference the milestone judges, with the verdict's decision
 * interval (verdict.judgeEvalComparison: against the eval's own base variant, the same numbers
 * report.md prints), and whether baseline.json gates the verdict (its fingerprint and per-task
 * check). A TS/Python grading disagreement fails the command and writes nothing.
 */
import { evalHelp as agentEvalHelp } from "./agent-task-help.js";
import { basename } from "node:path";
import { parseArgs } from "node:util";

import { RegradeMismatchError } from "../agent/eval/grading.js";
import { TASKS_RELATIVE_PATH } from "../agent/eval/tasks.js";
import { evalAdapterPath, evalRun } from "../pipeline/evaluate-adapter.js";
import { EVAL_FLAGS, GLOBAL_FLAGS, evalTargetFromFlags, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Base model vs an adapter on the test split (Evaluate + TS re-grading) -> runs/<id>/eval.json.",
  usage: "agent eval <run_id> [options] | agent eval --adapter PATH [--name N] [options] | agent eval --agent-task FILE --run ID [--threshold T]",
  flags: [
    ...agentEvalHelp,
    ["--adapter PATH", "a PEFT adapter folder under the sidecar's data root, instead of a run's"],
    ["--name N", "with --adapter: the record's name, runs/<N>/eval.json (default: the folder's name)"],
    ["--tasks PATH", `task file (docs/tasks.md; default: the run's own, else ${TASKS_RELATIVE_PATH})`],
    ["--limit N", "only the first N test tasks (the milestone needs >= 200; default all); beside a run's eval.json of more tasks it goes to eval-limit-<N>.json"],
    ["--base-model M", "base model as the sidecar knows it (default: the run's own base, else the embedded default model)"],
    ["--evals-dir DIR", "where baseline.json and runs/ live (default: the nearest agent-evals/ at or above the working directory)"],
  ],
  notes: "A CANCELLED run's kept adapter (saved after its last completed step) is evaluated like a SUCCEEDED run's.",
  examples: ["agent eval run-20261201-101500-ab12cd --limit 200", "agent eval --adapter adapters/aml-v2 --name aml-v2"],
};

export const command: CommandHandler = async (argv, client) => {
  if (argv.some((a) => a === "--agent-task" || a.startsWith("--agent-task="))) return (await import("./agent-task.js")).evalAgentTask(argv, client);
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...EVAL_FLAGS, adapter: { type: "string" }, name: { type: "string" }, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  const byPath = values.adapter !== undefined;
  if (byPath ? positionals.length !== 0 : positionals.length !== 1) {
    throw usageError("eval", help, byPath ? "give a run id or --adapter, not both" : "which run? give its id (or --adapter PATH)");
  }
  if (values.name !== undefined && !byPath) throw usageError("eval", help, "--name goes with --adapter");
  try {
    const target = evalTargetFromFlags(values);
    const { path } = byPath
      ? await evalAdapterPath(client, values.adapter!, values.name ?? basename(values.adapter!.replace(/\/+$/, "")), target)
      : await evalRun(client, positionals[0], target);
    console.log(`wrote ${path}`);
    return 0;
  } catch (err) {
    if (err instanceof RegradeMismatchError) {
      console.error(`agent eval: ${err.message}`);
      return 1;
    }
    throw err;
  }
};
