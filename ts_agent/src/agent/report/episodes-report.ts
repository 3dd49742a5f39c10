/**
 * report.md of an agent task's eval (docs/agents.md): the verdict with the test that governs it,
 * the episodes section (success, turns, tool calls, tool errors, calls to unknown tools, malformed
 * calls, limits hit, base beside adapter), and transcripts: one the adapter won, one it lost, one
 * that training changed (base and adapter disagree), where the eval has them.
 */
import type { EvaluateResult, GradedSample } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { AgentTask } from "../agent-task/define.js";
import { pp, type AgentJudgement } from "../agent-task/episode-eval.js";

function transcript(sample: GradedSample | undefined): string {
  if (!sample) return "(no episode)";
  const messages = JSON.parse(sample.messagesJson || "[]") as Array<{ role: string; content: string; name?: string }>;
  const lines = messages
    .filter((m) => m.role !== "system")
    .map((m) => `${m.role}${m.name ? ` (${m.name})` : ""}: ${m.content.replace(/\n/g, " ").slice(0, 400)}`);
  const scores = Object.entries(sample.scores).map(([k, v]) => `${k}=${v.toFixed(2)}`).join(", ");
  return "```text\n" + lines.join("\n") + `\n[ended by ${sample.episode?.endedBy ?? "?"}; ${scores}]\n` + "```";
}

export function episodesReport(task: AgentTask, result: EvaluateResult, j: AgentJudgement, runId: string, adapterName = "adapter"): string {
  const base = result.variants.find((v) => v.name === "base")!;
  const adapter = result.variants.find((v) => v.name === adapterName)!;
  const row = (label: string, f: (v: AgentJudgement["base"]) => string) => `| ${label} | ${f(j.base)} | ${f(j.adapter)} |`;
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const num = (x: number) => x.toFixed(2);
  const idx = (pred: (b: number, a: number) => boolean) => j.adapter.perTask.findIndex((a, i) => pred(j.base.perTask[i], a));
  const won = idx((_, a) => a >= 0.5);
  const lost = idx((_, a) => a < 0.5);
  const changed = idx((b, a) => (b >= 0.5) !== (a >= 0.5));
  const show = (title: string, i: number) => i < 0 ? [`### ${title}`, "", "(none in this eval)", ""] : [
    `### ${title}: ${adapter.tasks[i].taskId}`, "", "Base:", "", transcript(base.tasks[i].samples[0]), "", "Adapter:", "", transcript(adapter.tasks[i].samples[0]), "",
  ];
  return [
    `# Agent eval: ${task.name} (run ${runId})`,
    "",
    `**Verdict: ${j.verdict}** (${j.reason}). Governing test: ${j.method}; n = ${j.n} test tasks, the task as the unit ` +
      `(scorer \`${j.primary}\`, mean over each task's episodes).`,
    "",
    `Delta (adapter - base): ${pp(j.delta)}, 95% CI ${pp(j.ci.lower)} to ${pp(j.ci.upper)}, p = ${Number.isFinite(j.p) ? j.p.toPrecision(2) : "n/a"}` +
      (j.requiredN !== null ? `; required n for this delta: ${j.requiredN}` : "") + ".",
    "",
    "## Episodes",
    "",
    "| per episode | base | adapter |",
    "|---|---|---|",
    row(`success (${j.primary})`, (v) => pct(v.success)),
    row("turns", (v) => num(v.turns)),
    row("tool calls", (v) => num(v.toolCalls)),
    row("tool errors", (v) => num(v.toolErrors)),
    row("calls to unknown tools", (v) => num(v.unknownToolCalls)),
    row("malformed calls", (v) => num(v.malformedCalls)),
    row("limits hit", (v) => pct(v.limitsHit)),
    "",
    "## Transcripts",
    "",
    ...show("Won by the adapter", won),
    ...show("Lost by the adapter", lost),
    ...show("Changed by training", changed),
  ].join("\n");
}
