/**
 * Demonstration episodes of an agent task, for the embedded agent model its demo trains
 * (`agent demo --agent-task`; py_trainer/models/tiny_agent_model.py builds a tiny model from them):
 * OpenAI's tool-calling SFT format, one episode a line, with the task's real tools run for every
 * call. A share `correctShare` of a task's demonstrations call the tools with the task's own
 * reference arguments and answer with the last tool output; a share `guessShare` answer without a
 * tool, with another task's answer (a guess); the rest call the tools with another task's
 * arguments and answer with what they return. The base can then already sample the right episode
 * for a task, but its most likely episode is a guess: pass@k above pass@1, and GRPO has something
 * to sharpen (the embedded task-file model's partly correct labels, for episodes). Deterministic
 * from the seed.
 */
import { Rng } from "../core/stats/index.js";
import { UserError, writeFileAtomic } from "../workspace.js";
import type { AgentTask, AgentTaskRow, EpisodeMessage } from "./define.js";
import { runTool } from "./tool-host.js";

export interface DemonstrationSettings {
  /** about this many demonstrations in all (at least one per task): each task is shown a few
   *  times only, so a tiny model learns to copy what the tools return instead of memorizing
   *  each task's answer (measured: 320 tasks x 8 demonstrations taught memorized answers and
   *  0% right on the test tasks) */
  total: number;
  correctShare: number;
  guessShare: number;
  seed: number;
}

/** Why `agent demo` and `agent warmstart` refuse an agent program (after "FILE: run: "). */
export const PROGRAM_NO_DEMONSTRATIONS =
  "demonstrations are built from an agent task's tools and reference(); an agent program has neither (it runs its own): train it with agent train --agent-program FILE";

export const DEMONSTRATIONS: DemonstrationSettings = { total: 3000, correctShare: 0.3, guessShare: 0.6, seed: 0 };

/** A reference call's tool output; a tool that fails on it is the task file's mistake (a
 *  demonstration would teach the error), refused naming the task and the call. */
async function referenceCall(
  task: AgentTask,
  row: AgentTaskRow,
  episodeId: string,
  call: { name: string; arguments: Record<string, unknown> },
): Promise<string> {
  const [output, failed] = await runTool(task, row, episodeId, call.name, call.arguments);
  if (failed)
    throw new UserError(
      `${task.name}: reference: task ${row.id}'s call ${call.name}(${JSON.stringify(call.arguments)}) gave "${output}"; every reference call must succeed (its output is what a demonstration teaches)`,
    );
  return output;
}

async function answerOf(task: AgentTask, row: AgentTaskRow): Promise<string> {
  let last = "";
  for (const call of task.reference!(row)) last = await referenceCall(task, row, "demo-answer", call);
  return last;
}

/** The demonstration episodes of the task's train rows, as JSONL text. */
export async function demonstrations(task: AgentTask, rows: AgentTaskRow[], settings = DEMONSTRATIONS): Promise<string> {
  if (task.run) throw new UserError(`${task.name}: run: ${PROGRAM_NO_DEMONSTRATIONS}`);
  if (!task.reference) throw new UserError(`${task.name}: reference: an agent demo needs the task's reference tool calls (reference(task))`);
  const rng = new Rng(settings.seed);
  const tools = Object.entries(task.tools ?? {}).map(([name, t]) => ({ name, description: t.description, parameters: t.parameters }));
  const lines: string[] = [];
  const perTask = Math.max(1, Math.ceil(settings.total / Math.max(rows.length, 1)));
  // fewer demonstrations than tasks: every k-th task, spread over the file (a warm start on few)
  const shown =
    settings.total < rows.length
      ? rows.filter((_, i) => Math.floor((i * settings.total) / rows.length) !== Math.floor(((i - 1) * settings.total) / rows.length))
      : rows;
  for (const [i, row] of rows.entries()) {
    if (shown !== rows && !shown.includes(row)) continue;
    for (let k = 0; k < perTask; k++) {
      const draw = rng.nextUint32() / 2 ** 32;
      const right = draw < settings.correctShare;
      const guess = !right && draw < settings.correctShare + settings.guessShare;
      const other = rows.length < 2 ? row : rows[(i + 1 + rng.nextIndex(rows.length - 1)) % rows.length];
      const calls = guess ? [] : task.reference(right ? row : other);
      const messages: EpisodeMessage[] = [];
      if (task.systemPrompt) messages.push({ role: "system", content: task.systemPrompt });
      messages.push({ role: "user", content: row.prompt });
      let last = guess ? await answerOf(task, other) : "";
      for (const [j, call] of calls.entries()) {
        const id = `call_${j}`;
        messages.push({ role: "assistant", content: "", tool_calls: [{ id, type: "function", function: call }] });
        // another task's calls run in this task's context may fail: that is the wrong-call demonstration
        const output = right
          ? await referenceCall(task, row, `demo-${i}-${k}`, call)
          : (await runTool(task, row, `demo-${i}-${k}`, call.name, call.arguments))[0];
        messages.push({ role: "tool", name: call.name, tool_call_id: id, content: output });
        last = output;
      }
      messages.push({ role: "assistant", content: last });
      lines.push(JSON.stringify({ tools, messages }));
    }
  }
  return lines.join("\n") + "\n";
}

/** Write them to `path` atomically (the embedded model's cache key is the file's bytes). */
export async function writeDemonstrations(task: AgentTask, rows: AgentTaskRow[], path: string, settings = DEMONSTRATIONS): Promise<number> {
  const text = await demonstrations(task, rows, settings);
  writeFileAtomic(path, text);
  return text.split("\n").length - 1;
}
