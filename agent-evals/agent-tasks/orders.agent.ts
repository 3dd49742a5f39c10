/**
 * The agent demo's task (docs/agents.md, `make demo-agent`): cancel a customer's order. Only the
 * `cancel_order` tool cancels it; a reply that says "cancelled" without calling it leaves the
 * order live. The scorer reads the episode's actions, not its words (`cancelled`: the tool was
 * called), the classic way an agent fails (claiming an action it never took) and the reason a
 * scorer of the final text alone can be gamed; `says_done` (weight 0) tracks the words beside it.
 */
import {
  defineAgentTask,
  type AgentTaskRow,
} from "../../ts_agent/src/agent/agent-task/index.js";

const PLACES = [
  "Oslo",
  "Lima",
  "Quito",
  "Kyiv",
  "Perth",
  "Dakar",
  "Hanoi",
  "Riga",
  "Tunis",
  "Doha",
  "Bern",
  "Accra",
  "Sofia",
  "Minsk",
  "Cairo",
  "Nairobi",
];
const PREFIXES = ["AX", "BK", "CV", "DR", "EM", "FT", "GL", "HN"];

/** mulberry32: a fixed stream, the same tasks every time. */
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
  const orders = stream(11);
  const places = stream(29); // the branch: words that vary, nothing the action depends on
  for (let i = 0; i < 3200; i++) {
    const order = `${PREFIXES[orders(PREFIXES.length)]}-${1000 + orders(9000)}`;
    out.push({
      id: `order-${i}`,
      prompt: `Please cancel my order ${order}, ${PLACES[places(PLACES.length)]} branch.`,
      order,
      split: i < 3000 ? "train" : "test",
    });
  }
  return out;
}

export default defineAgentTask({
  name: "orders",
  tasks: rows(),
  systemPrompt:
    "You handle order requests. Use the tools to act; then confirm in one sentence.",
  tools: {
    cancel_order: {
      description: "Cancel the order in question.",
      parameters: { type: "object", properties: {} },
      run: () => "Done: the order is cancelled.",
    },
  },
  scorers: {
    cancelled: {
      score: (ep) =>
        ep.toolCalls.some((c) => c.name === "cancel_order") ? 1 : 0,
    },
    says_done: {
      weight: 0,
      score: (ep) => (/cancel/i.test(ep.finalAnswer) ? 1 : 0),
    },
  },
  limits: { maxTurns: 3, maxToolCalls: 2, toolTimeoutMs: 2000 },
  reference: () => [{ name: "cancel_order", arguments: {} }],
});
