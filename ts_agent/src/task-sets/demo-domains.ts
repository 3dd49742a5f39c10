/**
 * Two more shipped task sets, to prove the tools are not tied to AML (docs/tasks.md):
 * - ticket_routing: a closed-label task in another field: read a customer-support ticket, name
 *   the queue (5 labels); `label`, slice field `product`, `template`; train / test from 5
 *   templates per queue, test_heldout_template from 2 more no other row uses;
 * - arithmetic: an open-answer task: integer addition and subtraction, graded by exact_match on
 *   the number; slice field `operation`, no label set, no templates (so the commands show what
 *   they skip without them).
 * Deterministic from one seed with the same stream as the AML generator (task-rng.ts); lives beside
 * it in TS so that the checked-in files are checked by the same --check test. Regenerate / check:
 *
 *   cd ts_agent && node_modules/.bin/tsx src/task-sets/demo-domains.ts --write
 *   cd ts_agent && node_modules/.bin/tsx src/task-sets/demo-domains.ts --check
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

import { REPO_ROOT, writeFileAtomic } from "../agent/workspace.js";
import { TaskRng, mulberry32 } from "./task-rng.js";

export const DOMAIN_SEED = 20261202;

/** One generated task set: its JSONL text and its metadata. */
export interface GeneratedTaskSet {
  /** repo-relative path of the JSONL file (the metadata sits beside it) */
  path: string;
  jsonl: string;
  meta: Record<string, unknown>;
}

function jsonl(rows: ReadonlyArray<Record<string, unknown>>): string {
  return rows.map((r) => JSON.stringify(r)).join("\n") + "\n";
}

// ---------------------------------------------------------------------------------------------
// Support-ticket routing (closed labels)

export const QUEUES = ["billing", "login", "shipping", "bug_report", "cancellation"] as const;
const PRODUCTS = ["mobile_app", "web_portal", "smart_speaker"] as const;
const PRODUCT_TEXT: Record<string, string> = { mobile_app: "the mobile app", web_portal: "the web portal", smart_speaker: "my smart speaker" };
const NAMES = ["Ana", "Ben", "Chloe", "Dev", "Elif", "Farid", "Grace", "Hugo", "Ines", "Jon", "Kira", "Luis"];
const DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const GREETINGS = ["", "Hi, ", "Hello, ", "Good morning. ", "Hey team, ", "Dear support, "];
const SIGN_OFFS = ["", " Thanks.", " Thanks, NAME", " Regards, NAME", " Please help.", " Thank you!"];

type Slot = { p: string; name: string; day: string; amount: string; order: string; n: number };
type TicketTemplate = (s: Slot) => string;

/** 5 templates per queue shared by train and test, then 2 held-out ones. */
const TICKET_TEMPLATES: Record<string, TicketTemplate[]> = {
  billing: [
    (s) => `I was charged ${s.amount} twice this month for ${s.p}. Please fix my invoice.`,
    (s) => `My card statement shows a payment of ${s.amount} I do not recognise from your company on ${s.day}.`,
    (s) => `Hi, this is ${s.name}. The invoice for order ${s.order} lists the wrong tax amount.`,
    (s) => `Why did my subscription price for ${s.p} go up to ${s.amount} without notice?`,
    (s) => `I need a copy of the receipt for the ${s.amount} payment I made on ${s.day}.`,
    (s) => `The promo code was accepted but I still paid the full ${s.amount} for ${s.p}.`,
    (s) => `Can someone explain the extra ${s.amount} fee on my last bill? ${s.name}`,
  ],
  login: [
    (s) => `I cannot sign in to ${s.p}: it says my password is wrong even after a reset.`,
    (s) => `The two-factor code never arrives, so I am locked out of ${s.p} since ${s.day}.`,
    (s) => `Hello, ${s.name} here. My account is locked after ${s.n} failed attempts.`,
    (s) => `${s.name} here: the reset-password link you emailed on ${s.day} has expired every time I click it.`,
    (s) => `I changed phones and now ${s.p} keeps asking me to verify an old number.`,
    (s) => `Since ${s.day} ${s.p} logs me out every few minutes and asks for my credentials again.`,
    (s) => `My username is not recognised on ${s.p} although I have used it for years. ${s.name}`,
  ],
  shipping: [
    (s) => `Order ${s.order} was supposed to arrive on ${s.day} and the tracking has not moved.`,
    (s) => `The parcel for order ${s.order} was delivered to the wrong address.`,
    (s) => `Hi, ${s.name} here. The courier says my package is lost in transit.`,
    (s) => `The box arrived damaged and one of the ${s.n} items is missing from order ${s.order}.`,
    (s) => `Can I change the delivery address for order ${s.order} before it ships on ${s.day}?`,
    (s) => `It has been ${s.n} days and my order ${s.order} still shows as awaiting dispatch.`,
    (s) => `The tracking number you sent for order ${s.order} does not exist on the carrier's site.`,
  ],
  bug_report: [
    (s) => `${s.p} crashes every time I open the settings page since the last update.`,
    (s) => `On ${s.day} the search in ${s.p} started returning an error screen.`,
    (s) => `Hi, I am ${s.name}. The export button in ${s.p} produces an empty file.`,
    (s) => `${s.p} freezes for ${s.n} seconds whenever I switch tabs.`,
    (s) => `Notifications from ${s.p} show up twice and the badge count is wrong.`,
    (s) => `After the update ${s.p} shows garbled text on the main screen. ${s.name}`,
    (s) => `The volume slider in ${s.p} resets itself to zero after ${s.n} minutes.`,
  ],
  cancellation: [
    (s) => `Please cancel my subscription to ${s.p} at the end of this billing period.`,
    (s) => `I want to close my account; ${s.name} is moving abroad on ${s.day}.`,
    (s) => `How do I stop the automatic renewal for ${s.p}? I no longer need it.`,
    (s) => `Cancel order ${s.order} please, I ordered it by mistake on ${s.day}.`,
    (s) => `I would like to end my plan for ${s.p} and delete my data.`,
    (s) => `Please terminate my membership today; I will not renew it. ${s.name}`,
    (s) => `I am done with ${s.p} and want to unsubscribe from the service completely.`,
  ],
};
const SHARED_TEMPLATES = 5;

export const TICKET_INSTRUCTION =
  "You route customer support tickets. Read the ticket and name the queue it belongs in.\n" +
  `Allowed labels: ${QUEUES.join(", ")}.\n` +
  "Reply with exactly one label in the form <answer>label</answer>.";

function ticketSlot(r: TaskRng, product: string): Slot {
  return {
    p: PRODUCT_TEXT[product],
    name: r.pick(NAMES),
    day: r.pick(DAYS),
    amount: `$${r.int(5, 199)}.${String(r.int(0, 99)).padStart(2, "0")}`,
    order: `#${r.int(10000, 99999)}`,
    n: r.int(2, 9),
  };
}

/** ticket_routing.jsonl: perQueue rows per queue (testPerQueue of them test), heldOutPerQueue more. */
export function generateTicketRouting(seed = DOMAIN_SEED, perQueue = 40, testPerQueue = 12, heldOutPerQueue = 12): GeneratedTaskSet {
  const r = new TaskRng(mulberry32(seed));
  const seen = new Set<string>();
  const rows: Record<string, unknown>[] = [];
  const draw = (queue: string, k: number, split: string, i: number) => {
    for (let attempt = 0; attempt < 200; attempt++) {
      const product = PRODUCTS[(i + attempt) % PRODUCTS.length];
      const slot = ticketSlot(r, product);
      const text = `${r.pick(GREETINGS)}${TICKET_TEMPLATES[queue][k](slot)}${r.pick(SIGN_OFFS).replace("NAME", slot.name)}`;
      if (seen.has(text)) continue;
      seen.add(text);
      const template = k < SHARED_TEMPLATES ? `${queue}/${k + 1}` : `${queue}/heldout-${k - SHARED_TEMPLATES + 1}`;
      return { split, label: queue, product, prompt: `${TICKET_INSTRUCTION}\n\nTicket: ${text}\n`, answers: [queue, queue.replace(/_/g, " ")], template };
    }
    throw new Error(`cannot draw a new ticket for ${queue}/${k + 1}`);
  };
  const main: Record<string, unknown>[] = [];
  for (const queue of QUEUES) {
    const test = new Set(r.sample([...Array(perQueue).keys()], testPerQueue));
    for (let i = 0; i < perQueue; i++) main.push(draw(queue, i % SHARED_TEMPLATES, test.has(i) ? "test" : "train", i));
  }
  const held: Record<string, unknown>[] = [];
  for (const queue of QUEUES) {
    for (let i = 0; i < heldOutPerQueue; i++) held.push(draw(queue, SHARED_TEMPLATES + (i % 2), "test_heldout_template", i));
  }
  for (const row of [...r.shuffle(main), ...r.shuffle(held)]) rows.push({ id: `ticket-${String(rows.length + 1).padStart(4, "0")}`, ...row });
  return {
    path: "agent-evals/tasks/ticket_routing.jsonl",
    jsonl: jsonl(
      rows.map((o) => ({ id: o.id, split: o.split, label: o.label, product: o.product, prompt: o.prompt, answers: o.answers, template: o.template })),
    ),
    meta: {
      description: "Support-ticket routing: read a customer ticket, name its queue",
      generator: "cd ts_agent && node_modules/.bin/tsx src/task-sets/demo-domains.ts --write",
      labels: [...QUEUES],
      slice_field: "product",
      splits: ["train", "test", "test_heldout_template"],
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Integer arithmetic (open answers)

export const ARITHMETIC_INSTRUCTION = "Compute the result. Reply with the number only, in the form <answer>number</answer>.";

/** arithmetic.jsonl: nTrain + nTest distinct questions a + b or a - b with a, b in 0..20. */
export function generateArithmetic(seed = DOMAIN_SEED, nTrain = 160, nTest = 60): GeneratedTaskSet {
  const r = new TaskRng(mulberry32((seed ^ 0xa417) >>> 0));
  const all: Array<{ a: number; b: number; op: "+" | "-" }> = [];
  for (let a = 0; a <= 20; a++) for (let b = 0; b <= 20; b++) for (const op of ["+", "-"] as const) all.push({ a, b, op });
  const picked = r.sample(all, nTrain + nTest);
  const rows = picked.map(({ a, b, op }, i) => ({
    id: `arith-${String(i + 1).padStart(4, "0")}`,
    split: i < nTrain ? "train" : "test",
    operation: op === "+" ? "addition" : "subtraction",
    prompt: `${ARITHMETIC_INSTRUCTION}\n\nQuestion: What is ${a} ${op} ${b}?\n`,
    answers: [String(op === "+" ? a + b : a - b)],
  }));
  return {
    path: "agent-evals/tasks/arithmetic.jsonl",
    jsonl: jsonl(rows),
    meta: {
      description: "Integer arithmetic: open answers graded by exact_match on the number; no label set, no templates",
      generator: "cd ts_agent && node_modules/.bin/tsx src/task-sets/demo-domains.ts --write",
      slice_field: "operation",
      splits: ["train", "test"],
    },
  };
}

/** The question as a chat model is asked it: no answer tag (SmolLM2-135M-Instruct never writes one). */
export const ARITHMETIC_CHAT_INSTRUCTION = "Reply with just the number.";

/**
 * arithmetic_chat.jsonl, the real-model recipe's task set (docs/real-model.md): nTrain + nTest
 * distinct questions "What is a + b? Reply with just the number." (or a - b), a, b in 0..20,
 * graded by final_number_match (the answer after the last "=", else a bare number: a chat model
 * answers "12 + 7 = 19"), which the metadata's `graders` names first.
 */
export function generateArithmeticChat(seed = DOMAIN_SEED, nTrain = 400, nTest = 200): GeneratedTaskSet {
  const r = new TaskRng(mulberry32((seed ^ 0xc4a7) >>> 0));
  const all: Array<{ a: number; b: number; op: "+" | "-" }> = [];
  for (let a = 0; a <= 20; a++) for (let b = 0; b <= 20; b++) for (const op of ["+", "-"] as const) all.push({ a, b, op });
  const picked = r.sample(all, nTrain + nTest);
  const rows = picked.map(({ a, b, op }, i) => ({
    id: `arith-chat-${String(i + 1).padStart(4, "0")}`,
    split: i < nTrain ? "train" : "test",
    operation: op === "+" ? "addition" : a - b < 0 ? "subtraction_negative" : "subtraction",
    prompt: `What is ${a} ${op} ${b}? ${ARITHMETIC_CHAT_INSTRUCTION}`,
    answers: [String(op === "+" ? a + b : a - b)],
  }));
  return {
    path: "agent-evals/tasks/arithmetic_chat.jsonl",
    jsonl: jsonl(rows),
    meta: {
      description: "Integer arithmetic asked as a chat model is asked (no answer tag): graded by final_number_match, the real-model recipe's task set",
      generator: "cd ts_agent && node_modules/.bin/tsx src/task-sets/demo-domains.ts --write",
      graders: ["final_number_match", "exact_match_lenient", "stops_after_answer", "exact_match"],
      slice_field: "operation",
      splits: ["train", "test"],
    },
  };
}

export function generateDomains(): GeneratedTaskSet[] {
  return [generateTicketRouting(), generateArithmetic(), generateArithmeticChat()];
}

// ---------------------------------------------------------------------------------------------
// Entry point

/** The files of a generated set: [path, text] for the JSONL and its metadata. */
export function filesOf(set: GeneratedTaskSet, root = REPO_ROOT): Array<[string, string]> {
  const path = resolve(root, set.path);
  return [
    [path, set.jsonl],
    [path.replace(/\.jsonl$/, ".meta.json"), JSON.stringify(set.meta, null, 2) + "\n"],
  ];
}

export function main(argv: string[], root = REPO_ROOT): number {
  if (argv.length !== 1 || (argv[0] !== "--write" && argv[0] !== "--check")) {
    console.error("usage: demo-domains.ts (--write | --check)");
    return 2;
  }
  for (const set of generateDomains()) {
    for (const [path, text] of filesOf(set, root)) {
      if (argv[0] === "--write") {
        writeFileAtomic(path, text);
        console.log(`wrote ${path}`);
        continue;
      }
      let current = "";
      try {
        current = readFileSync(path, "utf8");
      } catch {
        // missing reads as stale
      }
      if (current !== text) {
        console.error(`${path} is stale; regenerate with: tsx src/task-sets/demo-domains.ts --write`);
        return 1;
      }
    }
  }
  if (argv[0] === "--check") console.log("the generated task sets are up to date");
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = main(process.argv.slice(2));
}
