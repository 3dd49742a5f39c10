/**
 * `agent compare <run_id> <run_id>...`: flags and output only; the comparison itself (one Evaluate
 * or the runs' eval.json files, every pair judged, Holm across them, compare.md/.json/.png) is
 * agent/run-comparison/run-comparison.ts.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { settingsForTaskSet } from "../agent/eval/evaluate.js";
import { loadEvalTaskSet } from "../agent/eval/agent-task-set.js";
import { recordTestEval } from "../agent/eval/test-evals.js";
import {
  COMPARE_FILE,
  comparePairs,
  evaluateTogether,
  pairLine,
  readComparedRuns,
  writeCompare,
  type ComparedRun,
} from "../agent/run-comparison/run-comparison.js";
import { UserError, displayPath } from "../agent/workspace.js";
import { EVAL_FLAGS, GLOBAL_FLAGS, evalTargetFromFlags, usageError, type CommandHandler, type CommandHelp } from "./flags.js";
import { targetForRuns } from "../pipeline/run-task-file.js";

export const help: CommandHelp = {
  summary: "Several runs' adapters and the base on the same test tasks: pairwise deltas, Holm across them -> compare.md.",
  usage: "agent compare <run_id> <run_id>... [--from-evals] [--id ID] [--tasks PATH] [--limit N] [--base-model M] [--evals-dir DIR]",
  flags: [
    ["--from-evals", "use each run's eval.json (agent eval) instead of one new Evaluate; fingerprints must agree"],
    ["--id ID", "the comparison's folder, compare/<ID>/ (default compare-<date>-<time>)"],
    ["--tasks PATH", "task file (default: the runs' own, else agent-evals/tasks/aml_typology.jsonl)"],
    ["--limit N", "only the first N test tasks (default all)"],
    ["--base-model M", "must be the runs' own base (default: it)"],
    ["--evals-dir DIR", "where runs/ and compare/ live (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)"],
  ],
  notes: "A pair differs only when its Holm-adjusted p < 0.05 (Holm across every comparison in the table).",
  examples: ["agent compare run-a run-b --limit 200", "agent compare run-a run-b --from-evals"],
};

function defaultId(now: Date): string {
  return `compare-${now.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15)}`;
}

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...EVAL_FLAGS, "from-evals": { type: "boolean" }, id: { type: "string" }, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length < 2) throw usageError("compare", help, "give at least two run ids");
  const dup = positionals.find((id, i) => positionals.indexOf(id) !== i);
  if (dup) throw usageError("compare", help, `run ${dup} is named twice`);
  const target = evalTargetFromFlags(values);
  const id = values.id ?? defaultId(new Date());
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(id)) throw new UserError(`agent compare: --id ${JSON.stringify(id)}: letters, digits, '.', '_' and '-' only`);
  if (existsSync(join(target.evalsDir, "compare", id, COMPARE_FILE)))
    throw new UserError(`agent compare: --id ${id}: ${displayPath(join(target.evalsDir, "compare", id))} already holds a comparison`);
  let runs: ComparedRun[];
  if (values["from-evals"]) {
    runs = readComparedRuns(target.evalsDir, positionals);
  } else {
    const own = await targetForRuns(client, "compare", positionals, target);
    const taskSet = await loadEvalTaskSet(own.tasksPath, own.settings.split, own.settings.limit);
    console.log(
      `evaluating base (${own.settings.baseModel || "the embedded default model"}) and ${positionals.length} adapters (${positionals.join(", ")}) on ${taskSet.rows.length} ${taskSet.split} tasks of ${taskSet.path}, in one Evaluate`,
    );
    runs = await evaluateTogether(client, positionals, settingsForTaskSet(own.settings, taskSet), taskSet);
    if (taskSet.split === "test")
      for (const r of runs)
        recordTestEval(target.evalsDir, {
          command: "compare",
          runId: r.runId,
          step: r.log.adapter?.step ?? null,
          tasks: taskSet.rows.length,
          taskSet: taskSet.path,
        });
  }
  const res = comparePairs(runs);
  const dir = writeCompare(target.evalsDir, id, res);
  for (const r of res.pairs) console.log(pairLine(r));
  console.log(`wrote ${displayPath(join(dir, COMPARE_FILE))}`);
  return 0;
};
