/**
 * The episodes of an agent task's eval (docs/agents.md), base beside adapter: success (the
 * primary scorer), turns, tool calls, tool errors, calls to unknown tools, malformed calls and
 * limits hit per episode; then transcripts picked by the base-vs-adapter PAIR on each task (the
 * per-task primary score): tasks the adapter won (base < adapter), lost (base > adapter), and one
 * whose grade stayed but whose episode training changed (other tool calls, or another ending);
 * the largest change first, then the eval's order; for a base-only eval, one episode the base
 * solved and one it did not. Nothing for a single-turn eval.
 */
import { ADAPTER_VARIANT } from "../../core/base-vs-adapter.js";
import { loggedEpisode, type EvalLog, type LoggedEpisode } from "../../core/eval-log.js";
import type { ReportSection } from "../analysis.js";
import { fenced, pct1, table } from "../markdown.js";

/** How many transcripts of each kind are shown. */
export const SHOWN_EPISODES = { won: 1, lost: 1, changed: 1 } as const;
/** One message's text longer than this (characters) is cut, the cut said. */
export const MAX_MESSAGE_CHARS = 400;

type Sample = Parameters<typeof loggedEpisode>[0];
interface ResultJson {
  variants?: Array<{ name: string; tasks?: Array<{ taskId: string; samples?: Sample[] }> }>;
}

/** Every variant's episodes by task id, from the log's `result`. */
export function episodesByTask(log: EvalLog): Map<string, Map<string, LoggedEpisode[]>> {
  const out = new Map<string, Map<string, LoggedEpisode[]>>();
  for (const v of (log.result as ResultJson).variants ?? []) {
    out.set(v.name, new Map((v.tasks ?? []).map((t) => [t.taskId, (t.samples ?? []).map(loggedEpisode).filter((e): e is LoggedEpisode => e !== null)])));
  }
  return out;
}

/** Per-episode means of one variant's episodes. */
export function episodeMeans(episodes: Iterable<LoggedEpisode[]>): {
  episodes: number;
  turns: number;
  toolCalls: number;
  toolErrors: number;
  unknownToolCalls: number;
  malformedCalls: number;
  limitsHit: number;
} {
  const all = [...episodes].flat();
  const mean = (f: (e: LoggedEpisode) => number) => (all.length ? all.reduce((s, e) => s + f(e), 0) / all.length : NaN);
  return {
    episodes: all.length,
    turns: mean((e) => e.turns),
    toolCalls: mean((e) => e.toolCallCount),
    toolErrors: mean((e) => e.toolErrors),
    unknownToolCalls: mean((e) => e.unknownToolCalls),
    malformedCalls: mean((e) => e.malformedCalls),
    limitsHit: mean((e) => (e.endedBy === "answer" ? 0 : 1)),
  };
}

function transcript(e: LoggedEpisode | undefined): string[] {
  if (!e) return ["(no episode)"];
  const lines = e.messages
    .filter((m) => m.role !== "system")
    .map((m) => {
      const calls = (m.tool_calls ?? []).map((c) => ` -> ${c.function.name}(${JSON.stringify(c.function.arguments)})`).join("");
      const text = Array.from(m.content.replace(/\n/g, " "));
      const shown =
        text.length > MAX_MESSAGE_CHARS
          ? `${text.slice(0, MAX_MESSAGE_CHARS).join("")} [cut at ${MAX_MESSAGE_CHARS} of ${text.length} characters]`
          : text.join("");
      return `${m.role}${m.name ? ` (${m.name})` : ""}: ${shown}${calls}`;
    });
  const scores = Object.entries(e.scores)
    .map(([k, v]) => `${k}=${Number.isInteger(v) ? v : v.toFixed(2)}`)
    .join(", ");
  return fenced(`${lines.join("\n")}\n[ended by ${e.endedBy || "?"}; ${scores}]`, 100_000);
}

/** A base-only eval (`agent eval --agent-task FILE`, no run): the first task the base solved and
 *  the first it did not, in the eval's order. */
function baseTranscripts(log: EvalLog, base: Map<string, LoggedEpisode[]>, primary: string): string[] {
  const scores = log.variants.find((v) => v.name === "base")?.perTask ?? {};
  const ids = [...base.keys()].filter((id) => typeof scores[id] === "number");
  const out = [
    "## Transcripts",
    "",
    `The base alone: the first task it solved and the first it did not (\`${primary}\`'s per-task score, ${ids.length} tasks); every episode is in eval.json (\`result\`).`,
    "",
  ];
  for (const [title, id] of [
    ["Solved", ids.find((i) => (scores[i] as number) >= 0.5)],
    ["Not solved", ids.find((i) => (scores[i] as number) < 0.5)],
  ] as const) {
    out.push(`### ${title}${id ? `: ${id}` : ""}`, "", ...(id ? transcript(base.get(id)?.[0]) : ["(none in this eval)"]), "");
  }
  return out;
}

const signature = (e: LoggedEpisode | undefined) => (e ? JSON.stringify([e.endedBy, e.toolCalls]) : "");

export const episodes: ReportSection = (input) => {
  const log = input.evalLog;
  if (!log?.agentTask) return [];
  const byVariant = episodesByTask(log);
  const base = byVariant.get("base");
  const adapter = byVariant.get(ADAPTER_VARIANT);
  const primary = log.settings.graders[0]?.name ?? "";
  const variants = [...byVariant.keys()];
  const means = variants.map((v) => episodeMeans(byVariant.get(v)!.values()));
  const success = variants.map((v) => log.variants.find((s) => s.name === v)?.accuracy?.estimate ?? NaN);
  const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "-");
  const p = (x: number) => (Number.isFinite(x) ? pct1(x) : "-");
  const row = (label: string, f: (i: number) => string) => [label, ...variants.map((_, i) => f(i))];
  const l = log.agentTask.limits;
  // an agent program (docs/agent-programs.md) runs its own tools: its limits are per rollout
  const program = l.rolloutTimeoutMs !== undefined;
  const what = program ? "Agent program" : "Agent task";
  const limits = program
    ? `its own loop and tools; limits: ${l.maxTurns} model calls, ${l.rolloutTimeoutMs} ms per rollout`
    : `tools ${log.agentTask.tools.join(", ") || "(none)"}; limits: ${l.maxTurns} turns, ${l.maxToolCalls} tool calls, ${l.toolTimeoutMs} ms per call, ` +
      `${l.maxToolOutputChars} characters of tool output`;
  const out = [
    "## Episodes",
    "",
    `${what} \`${log.agentTask.name}\` (${log.agentTask.path}, sha256 ${log.agentTask.sha256.slice(0, 12)}): ${limits}. Success is the primary scorer \`${primary}\` (per-task mean over ${log.settings.samplesPerTask} episode(s)); the rest are means per episode.`,
    "",
    table(
      ["per episode", ...variants],
      [
        row(`success (${primary})`, (i) => p(success[i])),
        row("turns", (i) => f2(means[i].turns)),
        row("tool calls", (i) => f2(means[i].toolCalls)),
        row("tool errors", (i) => f2(means[i].toolErrors)),
        row("calls to unknown tools", (i) => f2(means[i].unknownToolCalls)),
        row("malformed calls", (i) => f2(means[i].malformedCalls)),
        row("limits hit", (i) => p(means[i].limitsHit)),
        row("episodes", (i) => String(means[i].episodes)),
      ],
    ),
    "",
  ];
  if (base && !adapter) return [...out, ...baseTranscripts(log, base, primary)];
  if (!base || !adapter) return out;
  const b = log.variants.find((v) => v.name === "base")?.perTask ?? {};
  const a = log.variants.find((v) => v.name === ADAPTER_VARIANT)?.perTask ?? {};
  const ids = [...adapter.keys()].filter((id) => typeof b[id] === "number" && typeof a[id] === "number");
  const change = (id: string) => (a[id] as number) - (b[id] as number);
  // Array.prototype.sort is stable: equal changes keep the eval's order
  const won = ids.filter((id) => change(id) > 0).sort((x, y) => change(y) - change(x));
  const lost = ids.filter((id) => change(id) < 0).sort((x, y) => change(x) - change(y));
  const changed = ids.filter((id) => change(id) === 0 && signature(base.get(id)?.[0]) !== signature(adapter.get(id)?.[0]));
  out.push(
    "## Transcripts",
    "",
    `Picked by the base-vs-adapter pair on each task (\`${primary}\`'s per-task score): of ${ids.length} tasks, the adapter won ${won.length}, lost ${lost.length}, ` +
      `and ${changed.length} kept their grade with another episode (other tool calls or another ending). The largest change first; the first episode of each; every episode is in eval.json (\`result\`).`,
    "",
  );
  const show = (title: string, none: string, picked: string[], n: number) => {
    if (picked.length === 0) out.push(`### ${title}`, "", `(none: ${none})`, "");
    for (const id of picked.slice(0, n)) {
      out.push(
        `### ${title}: ${id}`,
        "",
        `Base (${primary} ${b[id]}):`,
        "",
        ...transcript(base.get(id)?.[0]),
        "",
        `Adapter (${primary} ${a[id]}):`,
        "",
        ...transcript(adapter.get(id)?.[0]),
        "",
      );
    }
  };
  show("Won by the adapter", "the adapter won no task", won, SHOWN_EPISODES.won);
  show("Lost by the adapter", "the adapter lost no task", lost, SHOWN_EPISODES.lost);
  show("Changed by training", "no task kept its grade with another episode", changed, SHOWN_EPISODES.changed);
  return out;
};
