/**
 * `agent select <run_id>`: flags and refusals only; the selection itself (validation rows the run
 * did not train on, one Evaluate over its checkpoints, the rule's choice, one look at test,
 * selection.json) is agent/checkpoint-selection/checkpoint-selection.ts.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";

import { selectCheckpoint } from "../agent/checkpoint-selection/checkpoint-selection.js";
import { TASKS_RELATIVE_PATH } from "../agent/eval/tasks.js";
import { RULES, SELECTION_FILE, readSelection, type SelectionRule } from "../agent/verdict/checkpoint-selection-rule.js";
import { UserError, displayPath, runDir } from "../agent/workspace.js";
import { targetForRun } from "../pipeline/run-task-file.js";
import { EVAL_FLAGS, GLOBAL_FLAGS, evalTargetFromFlags, numberFlag, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Choose a run's checkpoint on a validation split (train rows it did not train on), then evaluate only that one on test -> selection.json.",
  usage: "agent select <run_id> [--rule last-unless-better|best] [--val-limit N] [--force] [--tasks PATH] [--limit N] [--evals-dir DIR]",
  flags: [
    ["--rule R", "last-unless-better (default: the last checkpoint unless an earlier one is better beyond its CI) or best (highest validation mean)"],
    ["--val-limit N", "only the first N validation rows (default all)"],
    ["--force", "replace an earlier selection.json (a second selection is a second look at test, counted)"],
    [
      "--tasks PATH",
      `task file (docs/tasks.md; default: the run's own, else ${TASKS_RELATIVE_PATH}); validation comes from its train split, test from its test split`,
    ],
    ["--limit N", "only the first N test tasks (default all)"],
    ["--base-model M", "must be the run's own base (default: it)"],
    ["--evals-dir DIR", "where runs/<run_id>/ lives (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)"],
  ],
  notes: "The test split is evaluated once, after the choice; each such eval is counted in runs/<run_id>/test-evals.jsonl.",
  examples: ["agent select run-20261201-101500-ab12cd", "agent select run-20261201-101500-ab12cd --rule best --limit 200"],
};

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...EVAL_FLAGS, rule: { type: "string" }, "val-limit": { type: "string" }, force: { type: "boolean" }, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw usageError("select", help, positionals.length ? "one run id, please" : "which run? give its id");
  const runId = positionals[0];
  const rule = (values.rule ?? "last-unless-better") as SelectionRule;
  if (!RULES.includes(rule)) throw usageError("select", help, `--rule ${values.rule}: one of ${RULES.join(", ")}`);
  const valLimit = values["val-limit"] === undefined ? 0 : numberFlag("--val-limit", values["val-limit"], { min: 1, integer: true });
  const target = evalTargetFromFlags(values);
  const previous = readSelection(target.evalsDir, runId);
  if (previous && !values.force) {
    throw new UserError(
      `agent select: ${displayPath(join(runDir(target.evalsDir, runId), SELECTION_FILE))} already holds a selection (step ${previous.chosenStep}, ${previous.date.slice(0, 10)}); selecting again looks at test again: add --force to replace it`,
    );
  }
  const own = await targetForRun(client, "select", runId, target);
  await selectCheckpoint(client, own.evalsDir, runId, { rule, valLimit, settings: own.settings, tasksPath: own.tasksPath });
  return 0;
};
