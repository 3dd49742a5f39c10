/**
 * A shipped agent task with arguments (docs/agents.md, issue 53): a shop assistant. "How much do
 * 3 notebooks cost?" needs two tool calls whose arguments must be copied: `lookup_price` with the
 * product named in the prompt, then `compute_total` with the unit price copied from the first
 * tool's result and the quantity copied from the prompt; the answer is the second tool's result.
 * The prices are the shop's (a table only the tool knows), so the answer cannot be guessed; the
 * scorers read the episode's actions and its final answer: `correct` (the total, as the tool gave
 * it), `right_calls` (both tools called with the right arguments: partial credit for GRPO).
 */
import {
  defineAgentTask,
  type AgentTaskRow,
} from "../../ts_agent/src/agent/agent-task/index.js";

const PRODUCTS = [
  "notebook",
  "pencil",
  "stapler",
  "folder",
  "marker",
  "eraser",
  "ruler",
  "sticker",
  "label",
  "crayon",
  "envelope",
  "binder",
  "calculator",
  "highlighter",
  "sharpener",
  "clipboard",
];

/** The shop's unit prices in cents (fixed; only lookup_price tells them). */
const CENTS: Record<string, number> = Object.fromEntries(
  PRODUCTS.map((p, i) => [p, 75 + ((i * 137) % 900)]),
);

const dollars = (cents: number) => `$${(cents / 100).toFixed(2)}`;

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
  const next = stream(11);
  for (let i = 0; i < 640; i++) {
    const product = PRODUCTS[next(PRODUCTS.length)];
    const quantity = 2 + next(8);
    out.push({
      id: `shop-${i}`,
      prompt: `How much do ${quantity} ${product}s cost in total?`,
      product,
      quantity,
      answer: dollars(CENTS[product] * quantity),
      split: i < 400 ? "train" : "test",
    });
  }
  return out;
}

export default defineAgentTask({
  name: "shop",
  tasks: rows(),
  systemPrompt:
    "You are a shop assistant. Look up the unit price, compute the total with the tool, then reply with the total only.",
  tools: {
    lookup_price: {
      description: "The unit price of a product.",
      parameters: {
        type: "object",
        properties: { product: { type: "string" } },
        required: ["product"],
      },
      run: ({ product }) => {
        const name = String(product).toLowerCase();
        const cents = CENTS[name] ?? CENTS[name.replace(/s$/, "")]; // "notebooks" too
        if (cents === undefined)
          throw new Error(`no product ${JSON.stringify(product)}`);
        return dollars(cents);
      },
    },
    compute_total: {
      description: "The total of a unit price times a quantity.",
      parameters: {
        type: "object",
        properties: {
          unit_price: { type: "string" },
          quantity: { type: "integer" },
        },
        required: ["unit_price", "quantity"],
      },
      run: ({ unit_price, quantity }) => {
        const cents = Math.round(
          Number(String(unit_price).replace(/^\$/, "")) * 100,
        );
        if (!Number.isFinite(cents) || !Number.isInteger(quantity))
          throw new Error(
            "unit_price must be like $1.25 and quantity an integer",
          );
        return dollars(cents * (quantity as number));
      },
    },
  },
  scorers: {
    // the total, as the tools give it
    correct: {
      score: (ep) => (ep.finalAnswer.trim() === ep.task.answer ? 1 : 0),
    },
    // both calls with the right copied arguments (partial credit: GRPO gets a signal before the answer is right)
    right_calls: {
      weight: 0.3,
      score: (ep) => {
        const look = ep.toolCalls.some(
          (c) =>
            c.name === "lookup_price" &&
            String(c.arguments.product) === ep.task.product,
        );
        const total = ep.toolCalls.some(
          (c) =>
            c.name === "compute_total" &&
            c.arguments.quantity === ep.task.quantity &&
            String(c.arguments.unit_price) ===
              dollars(CENTS[ep.task.product as string]),
        );
        return (Number(look) + Number(total)) / 2;
      },
    },
  },
  limits: { maxTurns: 4, maxToolCalls: 3, toolTimeoutMs: 2000 },
  reference: (t) => [
    { name: "lookup_price", arguments: { product: t.product } },
    {
      name: "compute_total",
      arguments: {
        unit_price: dollars(CENTS[t.product as string]),
        quantity: t.quantity,
      },
    },
  ],
});
