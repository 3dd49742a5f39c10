/**
 * An agent program (docs/agent-programs.md) written with the Vercel AI SDK: `generateText` with a
 * tool and `stopWhen`, its OpenAI-compatible provider pointed at the sidecar's endpoint for each
 * rollout. The same orders task as orders-openai.ts; `cancelOrderAgent` is the user's agent, unchanged.
 *
 *   agent eval --agent-program agent-evals/agent-programs/orders-ai-sdk.ts --run RUN
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, tool, type LanguageModel } from "ai";
import { z } from "zod";

import { defineAgentProgram } from "../../ts_agent/src/agent/agent-task/index.js";
import orders from "../agent-tasks/orders.agent.js";

// ---------------------------------------------------------------------------
// The user's agent, as it runs in production

export interface CancelResult {
  answer: string;
  cancelled: boolean;
}

export async function cancelOrderAgent(
  model: LanguageModel,
  question: string,
  abortSignal?: AbortSignal,
): Promise<CancelResult> {
  let cancelled = false;
  const result = await generateText({
    model,
    system:
      "You handle order requests. Use the tools to act; then confirm in one sentence.",
    prompt: question,
    tools: {
      cancel_order: tool({
        description: "Cancel the order in question.",
        inputSchema: z.object({}),
        execute: async () => {
          cancelled = true;
          return "Done: the order is cancelled.";
        },
      }),
    },
    stopWhen: stepCountIs(4),
    maxOutputTokens: 64,
    maxRetries: 0,
    abortSignal,
  });
  return { answer: result.text, cancelled };
}

// ---------------------------------------------------------------------------
// The agent program: the same agent, its provider pointed at the sidecar for each rollout

export default defineAgentProgram({
  name: "orders-ai-sdk",
  tasks: orders.tasks,
  run: (task, { baseURL, apiKey, model, signal }) =>
    cancelOrderAgent(
      createOpenAICompatible({ name: "sidecar", baseURL, apiKey }).chatModel(
        model,
      ),
      task.prompt,
      signal,
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
