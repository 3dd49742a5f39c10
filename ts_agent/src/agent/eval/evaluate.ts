/**
 * Running the sidecar's Evaluate: the settings an evaluation runs with (baseline and eval must
 * agree on all of them to be comparable), the request, the stream to its one result, and the
 * progress line. Tasks go to the sidecar INLINE from the TS loader, so the ids, prompts and
 * answers graded afterwards (grading.ts) are exactly the ones generated from.
 */
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";

import { ADAPTER_VARIANT, WARM_START_VARIANT } from "../core/base-vs-adapter.js";
import type { EvalSettings } from "../core/eval-log.js";
import type { EvaluateRequestSchema, EvaluateProgress, EvaluateResult } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../../sidecar/client.js";
import { buildReward, rewardNames, type RewardSpec } from "../core/task-rewards.js";
import { UserError } from "../workspace.js";
import { metaPathFor } from "./tasks.js";
import { agentSpec } from "../agent-task/agent-spec.js";
import { startToolHost } from "../agent-task/tool-host.js";
import { agentEvalSettings } from "./agent-task-set.js";
import type { TaskSet } from "./task-set.js";
import type { Split } from "../core/task-format.js";

// ---------------------------------------------------------------------------------------------
// Settings

/** The default strict grader (answer tag, exact label match), first in the default settings: the
 *  milestone's downstream metric unless a task file's metadata names its own graders. */
export const PRIMARY_GRADER = "exact_match";
/** The lenient grader compared with the strict one by Cohen's kappa. */
export const LENIENT_GRADER = "exact_match_lenient";

export const DEFAULT_EVAL_SETTINGS: Readonly<EvalSettings> = {
  baseModel: "",
  split: "test",
  limit: 0,
  graders: [{ name: PRIMARY_GRADER }, { name: LENIENT_GRADER }, { name: "format" }],
  samplesPerTask: 1,
  temperature: 0,
  maxNewTokens: 32,
  seed: 0,
  batchSize: 64,
};

/** The primary grader: the first of the settings' graders (the milestone's downstream metric). */
export function primaryGrader(settings: Pick<EvalSettings, "graders">): RewardSpec {
  if (settings.graders.length === 0) throw new Error("eval settings: no graders");
  return settings.graders[0];
}

/**
 * The settings a task set is evaluated with: the graders its metadata names (`graders`, the first
 * the primary one; exact_match_lenient added when missing, for the strict-vs-lenient agreement),
 * else the settings' own (the defaults: exact_match first).
 */
export function settingsForTaskSet(settings: EvalSettings, taskSet: Pick<TaskSet, "format" | "path" | "agent">): EvalSettings {
  if (taskSet.agent) return agentEvalSettings(settings, taskSet);
  const names = taskSet.format?.graders;
  if (!names || names.length === 0) return settings;
  const unknown = names.find((g) => !rewardNames().includes(g));
  if (unknown !== undefined) {
    throw new UserError(`${metaPathFor(taskSet.path)}: field "graders": unknown grader ${JSON.stringify(unknown)} (known: ${rewardNames().join(", ")})`);
  }
  const graders: RewardSpec[] = names.map((name) => ({ name }));
  if (!names.includes(LENIENT_GRADER)) graders.push({ name: LENIENT_GRADER });
  return { ...settings, graders };
}

/** Checks that the graders the harness relies on are present: a primary one, and the lenient one
 *  (an agent task's graders are its own scorers, checked when its file was loaded). */
export function checkSettings(settings: EvalSettings, taskSet?: Pick<TaskSet, "agent">): void {
  primaryGrader(settings);
  if (taskSet?.agent) return;
  if (!settings.graders.some((g) => g.name === LENIENT_GRADER)) throw new Error(`eval settings: graders must include ${LENIENT_GRADER}`);
  for (const g of settings.graders) buildReward(g); // fail here, not after minutes of generation
}

/** Identity of a resolved model for comparability: a local folder's name (the embedded model's
 *  name carries a content hash), or the hub id itself. */
export function modelIdentity(resolved: string): string {
  return resolved.startsWith("/") ? resolved.replace(/\/+$/, "").split("/").pop()! : resolved;
}

// ---------------------------------------------------------------------------------------------
// What Evaluate returns

/** One completion and the scores the sidecar gave it (structurally a proto GradedSample). */
export interface SampleScores {
  completion: string;
  scores: { readonly [grader: string]: number };
}
export interface TaskScores {
  taskId: string;
  samples: ReadonlyArray<SampleScores>;
}
/** One variant's per-task results (structurally a proto VariantResult). */
export interface VariantScores {
  name: string;
  tasks: ReadonlyArray<TaskScores>;
}

// ---------------------------------------------------------------------------------------------
// Running

/** The Evaluate request for these settings: base (unless skipBase) and the named adapters. */
export function evaluateRequest(
  settings: EvalSettings,
  taskSet: TaskSet,
  adapters: ReadonlyArray<{ name: string; runId: string }> = [],
): MessageInitShape<typeof EvaluateRequestSchema> {
  return {
    baseModel: settings.baseModel,
    adapters: adapters.map((a) => ({ name: a.name, source: { case: "runId" as const, value: a.runId } })),
    tasks: {
      source: {
        case: "inline" as const,
        value: { rows: taskSet.rows.map((r) => ({ id: r.id, prompt: r.prompt, answers: r.answers })) },
      },
    },
    // an agent task's scores come from its scorers (the AgentSpec runEvaluate adds), not graders
    graders: taskSet.agent ? [] : settings.graders.map((g) => ({ name: g.name, weight: g.weight, params: g.params as JsonObject | undefined })),
    samplesPerTask: settings.samplesPerTask,
    temperature: settings.temperature,
    maxNewTokens: settings.maxNewTokens,
    seed: BigInt(settings.seed),
    batchSize: settings.batchSize,
  };
}

/** Stream Evaluate to its one result; progress goes to `onProgress`; a warning (the one-time GGUF
 *  conversion before a minute's wait: issue 45) is printed as one line when it comes. */
export async function runEvaluate(
  client: SidecarClient,
  request: MessageInitShape<typeof EvaluateRequestSchema>,
  onProgress: (p: EvaluateProgress) => void = () => undefined,
  /** an agent task set's agent: its tools and scorers are served here while the Evaluate runs */
  agent?: TaskSet["agent"],
): Promise<EvaluateResult> {
  if (agent) {
    const host = await startToolHost(agent.task);
    try {
      const withAgent = { ...request, agent: agentSpec(agent.task, host.address, agent.ref) } as MessageInitShape<typeof EvaluateRequestSchema>;
      return await runEvaluate(client, withAgent, onProgress);
    } finally {
      await host.close();
    }
  }
  let result: EvaluateResult | undefined;
  for await (const res of client.evaluate(request)) {
    if (res.kind.case === "progress") onProgress(res.kind.value);
    else if (res.kind.case === "warning") console.log(`warning [${res.kind.value.code}]: ${res.kind.value.message}`);
    else if (res.kind.case === "result") result = res.kind.value;
  }
  if (!result) throw new Error("Evaluate ended without a result");
  return result;
}

/** An Evaluate result restricted to some task ids (the variants keep their order). */
export function restrictResult(result: EvaluateResult, ids: ReadonlySet<string>): EvaluateResult {
  return { ...result, variants: result.variants.map((v) => ({ ...v, tasks: v.tasks.filter((t) => ids.has(t.taskId)) })) };
}

/**
 * Evaluate base and the run's adapter on the task set and, when given, its held-out-template
 * companion in the SAME request (one model load); the result comes back split in two.
 */
export async function evaluateRunSplits(
  client: SidecarClient,
  runId: string,
  settings: EvalSettings,
  taskSet: TaskSet,
  heldOut: TaskSet | null,
  onProgress?: (p: EvaluateProgress) => void,
  /** the adapter the run started from (TrainRequest.init_adapter), scored beside it as WARM_START_VARIANT */
  warmStart: { runId: string } | null = null,
): Promise<{ main: EvaluateResult; heldOut: EvaluateResult | null }> {
  checkSettings(settings, taskSet);
  const combined = heldOut ? { ...taskSet, rows: [...taskSet.rows, ...heldOut.rows] } : taskSet;
  const adapters = [...(warmStart ? [{ name: WARM_START_VARIANT, runId: warmStart.runId }] : []), { name: ADAPTER_VARIANT, runId }];
  const full = await runEvaluate(client, evaluateRequest(settings, combined, adapters), onProgress, taskSet.agent);
  return {
    main: restrictResult(full, new Set(taskSet.rows.map((r) => r.id))),
    heldOut: heldOut ? restrictResult(full, new Set(heldOut.rows.map((r) => r.id))) : null,
  };
}

/** A progress printer shared by the eval, baseline and demo commands. */
export function progressPrinter(
  prefix: string,
  opts: { tty?: boolean; now?: () => number; write?: (line: string) => void; everySeconds?: number } = {},
): (p: EvaluateProgress) => void {
  const tty = opts.tty ?? process.stdout.isTTY;
  const now = opts.now ?? Date.now;
  const write = opts.write ?? ((line: string) => console.log(line));
  const every = (opts.everySeconds ?? 10) * 1000;
  // off a TTY (a log file, CI): plain lines, a variant's first progress, at most one per `every`, and its end
  let last: { variant: string; t: number } | null = null;
  return (p) => {
    const line = `${prefix}: ${p.variant} ${p.tasksDone}/${p.tasksTotal} tasks`;
    const end = p.tasksDone === p.tasksTotal;
    if (tty) {
      process.stdout.write(`\r${line.padEnd(60)}${end ? "\n" : ""}`);
      return;
    }
    const t = now();
    if (end || last === null || last.variant !== p.variant || t - last.t >= every) {
      write(line);
      last = { variant: p.variant, t };
    }
  };
}
