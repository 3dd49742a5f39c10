/**
 * A shipped agent task (docs/agents.md): multiply two numbers with a calculator tool the model
 * must call (two-digit products are beyond a small model's mental arithmetic). Train with
 * `agent train --agent-task agent-evals/agent-tasks/calculator.agent.ts`, judge with
 * `agent eval --agent-task agent-evals/agent-tasks/calculator.agent.ts --run <id>`.
 */
import {
  defineAgentTask,
  type AgentTaskRow,
} from "../../ts_agent/src/agent/agent-task/index.js";

/** mulberry32 in 32-bit integer arithmetic: a fixed stream, the same tasks every time. */
function stream(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
}

function rows(): AgentTaskRow[] {
  const out: AgentTaskRow[] = [];
  const draw = stream(7);
  const next = () => draw(90) + 10;
  for (let i = 0; i < 240; i++) {
    const a = next();
    const b = next();
    out.push({
      id: `mul-${i}`,
      prompt: `What is ${a} * ${b}?`,
      answer: String(a * b),
      split: i < 192 ? "train" : "test",
    });
  }
  return out;
}

export default defineAgentTask({
  name: "calculator",
  tasks: rows(),
  systemPrompt: "Use the calculator, then reply with the number only.",
  tools: {
    multiply: {
      description: "Multiply two integers.",
      parameters: {
        type: "object",
        properties: { a: { type: "integer" }, b: { type: "integer" } },
        required: ["a", "b"],
      },
      run: ({ a, b }) => {
        if (!Number.isInteger(a) || !Number.isInteger(b))
          throw new Error("a and b must be integers");
        return String((a as number) * (b as number));
      },
    },
  },
  scorers: {
    // the final answer is the product
    correct: {
      score: (ep) => (ep.finalAnswer.trim() === ep.task.answer ? 1 : 0),
    },
    // the product came from the tool (a scorer that reads only the final text can be gamed by skipping the tool)
    used_tool: {
      weight: 0.2,
      score: (ep) => (ep.toolCalls.some((c) => c.name === "multiply") ? 1 : 0),
    },
  },
  limits: { maxTurns: 3, maxToolCalls: 2, toolTimeoutMs: 2000 },
  // the calls that solve a task: what the demo's embedded agent model is shown (docs/agents.md)
  reference: (t) => {
    const [a, b] = (t.prompt.match(/\d+/g) ?? []).map(Number);
    return [{ name: "multiply", arguments: { a, b } }];
  },
});
