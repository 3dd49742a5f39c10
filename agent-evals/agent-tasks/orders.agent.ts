/**
 * The agent demo's task (docs/agents.md, `make demo-agent`): where an order is now, which only the
 * tracking tool knows. A model that guesses is right one time in sixteen; one that calls
 * `track_order` and answers with what it returns is right. The reward is the answer's
 * correctness alone (`correct`); `used_tool` is tracked beside it with weight 0, so the curve
 * shows whether the model learned to use the tool rather than being paid for calling it.
 */
import { defineAgentTask, type AgentTaskRow } from "../../ts_agent/src/agent/agent-task/define.js";

const PLACES = ["Oslo", "Lima", "Quito", "Kyiv", "Perth", "Dakar", "Hanoi", "Riga", "Tunis", "Doha", "Bern", "Accra",
  "Sofia", "Minsk", "Cairo", "Nairobi"];
const PREFIXES = ["AX", "BK", "CV", "DR", "EM", "FT", "GL", "HN"];

/** mulberry32: a fixed stream, the same tasks every time. */
function stream(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (((t ^ (t >>> 14)) >>> 0) % n);
  };
}

function rows(): AgentTaskRow[] {
  const out: AgentTaskRow[] = [];
  const orders = stream(11);
  const places = stream(29); // a stream of its own: nothing in the prompt tells where an order is
  for (let i = 0; i < 3200; i++) {
    const order = `${PREFIXES[orders(PREFIXES.length)]}-${1000 + orders(9000)}`;
    out.push({ id: `order-${i}`, prompt: `Where is order ${order} now?`, place: PLACES[places(PLACES.length)],
      split: i < 3000 ? "train" : "test" });
  }
  return out;
}

export default defineAgentTask({
  name: "orders",
  tasks: rows(),
  systemPrompt: "Orders move every day: track the order, then reply with the city only.",
  tools: {
    track_order: {
      description: "Where the order in question is now.",
      parameters: { type: "object", properties: {} },
      run: (_args, { task }) => String(task.place),
    },
  },
  scorers: {
    correct: { score: (ep) => (ep.finalAnswer.trim() === ep.task.place ? 1 : 0) },
    used_tool: { weight: 0, score: (ep) => (ep.toolCalls.some((c) => c.name === "track_order") ? 1 : 0) },
  },
  limits: { maxTurns: 3, maxToolCalls: 2, toolTimeoutMs: 2000 },
  reference: () => [{ name: "track_order", arguments: {} }],
});
