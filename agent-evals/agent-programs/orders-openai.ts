/**
 * An agent program (docs/agent-programs.md): the orders task of `make demo-agent`
 * (agent-tasks/orders.agent.ts), solved by an agent written with the `openai`
 * npm package that owns its loop and runs its own tool. `cancelOrderAgent` is
 * the user's agent, unchanged: training and evaluation only give it a client
 * whose base URL is the sidecar's endpoint for one rollout.
 *
 *   agent train --agent-program agent-evals/agent-programs/orders-openai.ts --config run.json
 *   agent eval --agent-program agent-evals/agent-programs/orders-openai.ts --run RUN
 *
 * The prompt, the tool and its result are the agent task's, word for word, so
 * the embedded agent model `make demo-agent` builds knows this format.
 */
import OpenAI from "openai";

import { defineAgentProgram } from "../../ts_agent/src/agent/agent-task/index.js";
import orders from "../agent-tasks/orders.agent.js";

// ---------------------------------------------------------------------------
// The user's agent, as it runs in production

const SYSTEM =
  "You handle order requests. Use the tools to act; then confirm in one sentence.";

const TOOLS: OpenAI.Chat.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "cancel_order",
      description: "Cancel the order in question.",
      parameters: { type: "object", properties: {} },
    },
  },
];

export interface CancelResult {
  answer: string;
  cancelled: boolean;
}

export async function cancelOrderAgent(
  client: OpenAI,
  model: string,
  question: string,
): Promise<CancelResult> {
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
    { role: "system", content: SYSTEM },
    { role: "user", content: question },
  ];
  let cancelled = false;
  for (let turn = 0; turn < 4; turn++) {
    const completion = await client.chat.completions.create({
      model,
      messages,
      tools: TOOLS,
      max_tokens: 64,
    });
    const reply = completion.choices[0].message;
    if (!reply.tool_calls?.length)
      return { answer: reply.content ?? "", cancelled };
    messages.push(reply);
    for (const call of reply.tool_calls) {
      cancelled = true; // cancel_order is the one tool
      messages.push({
        role: "tool",
        tool_call_id: call.id,
        content: "Done: the order is cancelled.",
      });
    }
  }
  return { answer: "", cancelled };
}

// ---------------------------------------------------------------------------
// The agent program: the same agent, pointed at the sidecar for each rollout

export default defineAgentProgram({
  name: "orders-openai",
  tasks: orders.tasks,
  run: (task, { baseURL, apiKey, model }) =>
    cancelOrderAgent(
      new OpenAI({ baseURL, apiKey, maxRetries: 0 }),
      model,
      task.prompt,
    ),
  scorers: {
    // the model's actions, not its words: did it ask for cancel_order?
    cancelled: {
      score: (ep) =>
        ep.toolCalls.some((c) => c.name === "cancel_order") ? 1 : 0,
    },
    says_done: {
      weight: 0,
      score: (ep) =>
        /cancel/i.test((ep.final as CancelResult | undefined)?.answer ?? "")
          ? 1
          : 0,
    },
  },
  limits: { maxTurns: 4 },
});
