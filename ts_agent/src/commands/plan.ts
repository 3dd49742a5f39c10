/**
 * `agent plan`: before training, can the test split detect the milestone's +5 pp at all? From
 * baseline.json's per-task scores (the base model's accuracy p) and the task file's split sizes,
 * the required n and the minimum detectable effect (alpha .05 two-sided, power .8) and
 * P(PASS | true delta = +5 pp) at the available n. No sidecar needed.
 *
 * What is deliberate: the sd of the per-task differences is unknown before an adapter exists, so
 * the plan brackets it with two models of how the errors overlap (stats.plannedPairedSd):
 * "conversions" (the adapter only fixes base errors: the smallest sd, optimistic) and
 * "independent" (the two are right independently: pessimistic, since two models of one task
 * usually err together). The truth usually lies between.
 *
 * P(PASS | true +5 pp) is simulated through the real gate (stats.simulatedOperatingCharacteristic
 * at each model's discordance; 10 000 draws, seed 0, MC SE <= 0.005). A split is said to "detect"
 * +5 pp only when that is >= 0.8 (and n >= the milestone's 200). PASS needs the estimate itself
 * >= +5 pp, so at a true +5 pp it is at most about a coin flip at any n (the normal approximation's
 * supremum is exactly 0.5): no n gets there, and the plan says so, with the n that gives the test
 * 80% power to reject 0 at +5 pp and the true delta at which P(PASS) reaches 0.8 at this n
 * (normal approximation, at the model's sd at +5 pp).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { baselinePath, readBaseline } from "../agent/eval/baseline-record.js";
import { skippedFeatures } from "../agent/core/task-format.js";
import { TASKS_RELATIVE_PATH, loadTaskFile, splitTasks } from "../agent/eval/tasks.js";
import { DOWNSTREAM_MIN_DELTA, DOWNSTREAM_MIN_DELTA_PP } from "../agent/verdict/milestone.js";
import { planLines, planMilestone } from "../agent/verdict/milestone-plan.js";
import { agentProgramHelp } from "./agent-task-help.js";
import { EVAL_FLAGS, GLOBAL_FLAGS, evalTargetFromFlags, hasAgentProgramFlag, type CommandHandler, type CommandHelp } from "./flags.js";
import { planMemory } from "../pipeline/plan-memory.js";
import { displayPath } from "../agent/workspace.js";
import { resolve } from "node:path";
import { create } from "@bufbuild/protobuf";
import { loadTrainRequest } from "../agent/train/run.js";
import { TrainRequestSchema } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { agentPreflight, preflightLines } from "../pipeline/agent-preflight.js";

export const help: CommandHelp = {
  summary: "before training: required n and MDE for the milestone's +5 pp at the available test size",
  usage:
    "agent plan [--tasks PATH] [--evals-dir DIR] [--base-accuracy P] | agent plan --config run.json | agent plan --agent-task FILE (or --agent-program FILE) [--config run.json] [--base-model M]",
  flags: [
    ["--tasks PATH", `task file (docs/tasks.md; default ${TASKS_RELATIVE_PATH})`],
    ["--evals-dir DIR", "where baseline.json lives (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)"],
    ["--base-accuracy P", "the base model's accuracy as a fraction, instead of baseline.json's"],
    ["--config FILE", "instead: the memory estimate of this TrainRequest on the sidecar's device (EstimateMemory); with --agent-task, the run's knobs"],
    [
      "--agent-task FILE",
      "instead: the preflight of an agent task (docs/agents.md): G episodes of the base on a few train tasks, the tool-call and well-formed rates, the scorers' means, the groups whose rewards are all equal",
    ],
    agentProgramHelp,
  ],
  examples: [
    "agent plan",
    "agent plan --base-accuracy 0.12",
    "agent plan --agent-task agent-evals/agent-tasks/calculator.agent.ts --base-model smollm2-135m-instruct",
  ],
  notes: "The sd of the differences is bracketed by two models of error overlap (conversions: optimistic; independent: pessimistic).",
};

export const command: CommandHandler = async (argv, _client) => {
  if (hasAgentProgramFlag(argv)) argv = await (await import("./agent-task.js")).agentProgramArgv(argv);
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...EVAL_FLAGS, "base-accuracy": { type: "string" }, config: { type: "string" }, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) {
    console.error(`usage: ${help.usage}`);
    return 2;
  }
  if (values["agent-task"] !== undefined) {
    // an agent task: the preflight, what GRPO's first groups would hold (pipeline/agent-preflight.ts)
    const config = values.config ? await loadTrainRequest(resolve(values.config)) : create(TrainRequestSchema);
    if (values["base-model"] !== undefined) config.baseModel = values["base-model"];
    const p = await agentPreflight(_client, values["agent-task"], config);
    for (const line of preflightLines(p)) console.log(line);
    return 0;
  }
  if (values.config !== undefined) return planMemory(_client, values.config);
  const target = evalTargetFromFlags(values);
  const file = loadTaskFile(target.tasksPath);
  let pBase: number;
  let source: string;
  if (values["base-accuracy"] !== undefined) {
    pBase = Number(values["base-accuracy"]);
    if (!(pBase >= 0 && pBase <= 1)) {
      console.error(`agent plan: --base-accuracy must be a fraction in [0, 1], got ${values["base-accuracy"]}`);
      return 2;
    }
    source = "--base-accuracy";
  } else {
    const b = readBaseline(target.evalsDir);
    if (!b?.accuracy) {
      console.error(`agent plan: no baseline at ${baselinePath(target.evalsDir)}: run \`agent baseline set\`, or pass --base-accuracy P`);
      return 1;
    }
    // a baseline of another task file says nothing about this one's base accuracy
    const sha = createHash("sha256").update(readFileSync(target.tasksPath)).digest("hex");
    if (b.taskSet.sha256 !== sha) {
      console.error(
        `agent plan: ${baselinePath(target.evalsDir)} was made on ${b.taskSet.path}, not ${displayPath(target.tasksPath)}: set a baseline for this task file (agent baseline set --tasks ... --evals-dir DIR), or pass --base-accuracy P`,
      );
      return 1;
    }
    pBase = b.accuracy.estimate;
    source = `baseline.json of ${b.date}, ${b.accuracy.n} tasks`;
  }
  if (pBase + DOWNSTREAM_MIN_DELTA > 1) {
    console.error(`agent plan: a base accuracy of ${pBase} leaves no room for +${DOWNSTREAM_MIN_DELTA_PP} pp`);
    return 1;
  }
  const splits = (["test", "test_heldout_template"] as const)
    .filter((split) => split === "test" || file.format.hasTemplates)
    .map((split) => ({ split, n: splitTasks(file.rows, split).length }));
  for (const line of planLines(planMilestone(pBase, splits, source))) console.log(line);
  for (const skipped of skippedFeatures(file.format)) console.log(`skipped for this task set: ${skipped}`);
  return 0;
};
