/**
 * Before an agent run trains (and `agent plan --agent-task FILE`): does GRPO have anything to learn
 * from? GRPO's advantage is an episode's reward minus its group's mean, so a group whose G
 * episodes all got the same reward contributes nothing, and a run where every group is flat
 * changes nothing however long it trains (verifiers: "if your model gets 0% reward after 10+
 * attempts, the task is too hard"). The preflight samples what training would sample first: G
 * episodes of the base on each of a few train tasks at the run's temperature, through the same
 * Evaluate and scorers as every eval, and reports the tool-call rate, the well-formed call rate,
 * each scorer's mean and the share of groups whose rewards (the scorers' weighted sum, as TRL
 * composes them) are all equal. When no group has a spread it says so in one paragraph (what that
 * means for GRPO, what would help) and `agent train` refuses to start unless --force.
 */
import { AGENT_MAX_NEW_TOKENS, loadAgentTaskSet } from "../agent/eval/agent-task-set.js";
import { DEFAULT_EVAL_SETTINGS, evaluateRequest, progressPrinter, runEvaluate, settingsForTaskSet } from "../agent/eval/evaluate.js";
import { buildEvalLog } from "../agent/eval/build-eval-log.js";
import { noSpread } from "../agent/core/stats/index.js";
import type { EvalSettings, LoggedEpisode } from "../agent/core/eval-log.js";
import type { TaskSet } from "../agent/eval/task-set.js";
import { WARM_START_VARIANT } from "../agent/core/base-vs-adapter.js";
import { episodeMeans, episodesByTask } from "../agent/report/sections/episodes-section.js";
import type { TrainRequest } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../sidecar/client.js";

/** Train tasks the preflight samples (the first ones, in the file's order). */
export const PREFLIGHT_TASKS = 8;
/** GRPO's group size when the request does not set grpo.num_generations (the sidecar's default). */
export const DEFAULT_GROUP_SIZE = 8;

export interface Preflight {
  baseModel: string;
  /** what was sampled: "the base", or "the warm start RUN" (GRPO from a warm start) */
  policy: string;
  tasks: number;
  groupSize: number;
  temperature: number;
  episodes: number;
  /** share of episodes with at least one well-formed call to a known tool */
  toolCallRate: number;
  /** of the episodes' tool-call attempts, the share that were well-formed (NaN: no attempt) */
  wellFormedRate: number;
  /** each scorer's mean over the episodes (fraction), the primary first */
  scorerMeans: Array<{ name: string; weight: number; mean: number }>;
  /** groups whose G rewards are all equal (no spread, core/stats noSpread), and all groups */
  flatGroups: number;
  groups: number;
}

/** Sample the base as training would at step 1 and measure the signal GRPO would get. */
export async function agentPreflight(
  client: SidecarClient,
  file: string,
  request: TrainRequest,
  opts: { tasks?: number; seed?: number } = {},
): Promise<Preflight> {
  const taskSet = await loadAgentTaskSet(file, "train", opts.tasks ?? PREFLIGHT_TASKS);
  const groupSize = request.grpo?.numGenerations || DEFAULT_GROUP_SIZE;
  const temperature = request.grpo?.temperature ?? 1;
  const settings = settingsForTaskSet(
    {
      ...DEFAULT_EVAL_SETTINGS,
      baseModel: request.baseModel,
      split: "train",
      samplesPerTask: groupSize,
      temperature,
      seed: opts.seed ?? Number(request.grpo?.seed ?? 0n),
    },
    taskSet,
  );
  settings.maxNewTokens = request.grpo?.maxCompletionLength || AGENT_MAX_NEW_TOKENS;
  // GRPO from a warm start samples the warm-started adapter, not the base
  const init = request.initAdapter?.source.case === "runId" ? request.initAdapter.source.value : "";
  const episodes = await sampleEpisodes(client, taskSet, settings, "preflight", init ? { name: WARM_START_VARIANT, runId: init } : null);
  const scorers = taskSet.agent!.ref.scorers;
  const m = episodeMeans(episodes.values());
  let flat = 0;
  let withCall = 0;
  const sums = scorers.map(() => 0);
  for (const group of episodes.values()) {
    const rewards = group.map((e) => scorers.reduce((acc, s) => acc + s.weight * (Number.isNaN(e.scores[s.name]) ? 0 : (e.scores[s.name] ?? 0)), 0));
    if (rewards.length > 0 && noSpread(rewards, { scale: 1 })) flat++;
    for (const e of group) {
      if (e.toolCallCount > 0) withCall++;
      scorers.forEach((s, i) => (sums[i] += e.scores[s.name] ?? 0));
    }
  }
  const attempts = m.toolCalls + m.unknownToolCalls + m.malformedCalls;
  return {
    baseModel: request.baseModel,
    policy: init ? `the warm start ${init}` : "the base",
    tasks: episodes.size,
    groupSize,
    temperature,
    episodes: m.episodes,
    toolCallRate: m.episodes ? withCall / m.episodes : NaN,
    wellFormedRate: attempts > 0 ? (m.toolCalls + m.unknownToolCalls) / attempts : NaN,
    scorerMeans: scorers.map((s, i) => ({ name: s.name, weight: s.weight, mean: m.episodes ? sums[i] / m.episodes : NaN })),
    flatGroups: flat,
    groups: episodes.size,
  };
}

/** Sample one policy's episodes on an agent task set through the one Evaluate (the base, or
 *  `adapter` alone: the base is then skipped, it would cost as much again), by task id. Shared by
 *  the preflight and the warm start's rejection sampling. */
export async function sampleEpisodes(
  client: SidecarClient,
  taskSet: TaskSet,
  settings: EvalSettings,
  label: string,
  adapter: { name: string; runId: string } | null = null,
): Promise<Map<string, LoggedEpisode[]>> {
  const req = evaluateRequest(settings, taskSet, adapter ? [adapter] : []);
  req.skipBase = adapter !== null;
  const result = await runEvaluate(client, req, progressPrinter(label), taskSet.agent);
  return episodesByTask(buildEvalLog(label, settings, taskSet, result)).get(adapter?.name ?? "base") ?? new Map<string, LoggedEpisode[]>();
}

/** No group of the sampled episodes had a spread: GRPO has nothing to learn from. */
export function noSignal(p: Preflight): boolean {
  return p.groups > 0 && p.flatGroups === p.groups;
}

/** The one line (stderr) of a command the preflight did not let start. */
export function notStartedLine(command: string): string {
  return `agent ${command}: not started: no group of the base's episodes has a spread, so GRPO has nothing to learn from (the paragraph above); --force ${command}s anyway`;
}

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(0)}%` : "-");

/** The preflight's lines: the numbers, then (no group with a spread) the paragraph. */
export function preflightLines(p: Preflight): string[] {
  const lines = [
    `preflight: ${p.policy} (${p.baseModel || "the embedded default model"}) on ${p.tasks} train tasks x G=${p.groupSize} episodes at temperature ${p.temperature}: ` +
      `tool calls in ${pct(p.toolCallRate)} of episodes, well-formed calls ${Number.isFinite(p.wellFormedRate) ? pct(p.wellFormedRate) : "- (no call attempted)"}, ` +
      `scorers ${p.scorerMeans.map((s) => `${s.name} ${s.mean.toFixed(2)}`).join(", ")}; groups with all rewards equal: ${p.flatGroups}/${p.groups}`,
  ];
  if (noSignal(p)) lines.push(noSignalParagraph(p));
  return lines;
}

/** What a base with no spread in any group means for GRPO, and what would help. */
export function noSignalParagraph(p: Preflight): string {
  if (p.scorerMeans[0]?.mean === 1) {
    return (
      `Nothing left for GRPO: in all ${p.groups} groups of ${p.groupSize} episodes every episode already succeeded (${p.scorerMeans[0].name} 1.00), ` +
      "so every advantage is 0 and RL cannot add to it. A harder task (more tools, an argument or a tool result to copy), a warm start on fewer " +
      "demonstrations, or a higher temperature would leave GRPO something to sharpen."
    );
  }
  const same = p.scorerMeans.every((s) => s.mean === 0) ? "every episode scored 0" : "every episode of a group scored the same";
  return (
    `No signal for GRPO: in all ${p.groups} groups of ${p.groupSize} episodes ${same}. GRPO learns from the differences within a group ` +
    "(an episode's advantage is its reward minus its group's mean), so with no difference every advantage is 0 and training " +
    "changes nothing however long it runs. What would give it one: a warm start (SFT on demonstrations: the task's reference() " +
    "calls run through its tools, as `agent demo --agent-task` builds its embedded agent model), more episodes per group " +
    "(grpo.num_generations) or a higher temperature, a reward with partial credit (a scorer for a well-formed call or the right " +
    "tool, beside the one for the answer), or a base that already acts sometimes (a larger instruct model with tool-calling training)."
  );
}
