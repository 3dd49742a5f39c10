/**
 * `agent try <run_id> --prompt TEXT`: flags and refusals only; the request and what is printed are
 * pipeline/try-prompt.ts.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { tryPrompt } from "../pipeline/try-prompt.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, evalTargetFromFlags, numberFlag, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

/** As EvaluateRequest.max_new_tokens: its default is agent eval's, its range the contract's. */
const MAX_NEW_TOKENS = { default: 32, min: 1, max: 32768 };

export const help: CommandHelp = {
  summary: "One prompt through a run's base model and its adapter, greedy (an Evaluate of one task), the completions one after the other.",
  usage: "agent try <run_id> --prompt TEXT [--answer A] [--max-new-tokens N] [--base-only] [--evals-dir DIR]",
  flags: [
    [
      "--prompt TEXT",
      "the prompt, as a task file's prompt field holds it (- reads it from stdin); formatted as agent eval formats prompts (the chat template when the tokenizer has one)",
    ],
    ["--answer A", "an expected answer: each completion is graded against it by the graders of the run's task file (default: no grading)"],
    ["--max-new-tokens N", `tokens generated per completion, ${MAX_NEW_TOKENS.min}-${MAX_NEW_TOKENS.max} (default ${MAX_NEW_TOKENS.default}, as agent eval)`],
    ["--base-only", "the base model only, without the adapter"],
    [
      "--evals-dir DIR",
      "where runs/<run_id>/run.json is looked for first (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)",
    ],
  ],
  notes: "The run's own base model is loaded (its adapter must be a SUCCEEDED run's, or a CANCELLED run's kept one).",
  examples: [
    'agent try run-20261201-101500-ab12cd --prompt "What is the capital of France? Reply with just the city name."',
    "agent try demo-1 --answer layering --prompt - < case.txt",
  ],
};

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      prompt: { type: "string" },
      answer: { type: "string" },
      "max-new-tokens": { type: "string" },
      "base-only": { type: "boolean" },
      ...EVALS_DIR_FLAG,
      ...GLOBAL_FLAGS,
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw usageError("try", help, positionals.length ? "one run id, please" : "which run? give its id");
  if (values.prompt === undefined) throw usageError("try", help, "--prompt TEXT is required");
  const prompt = values.prompt === "-" ? readFileSync(0, "utf8") : values.prompt;
  if (prompt.trim() === "") throw usageError("try", help, `--prompt${values.prompt === "-" ? " - (stdin)" : ""} is empty`);
  if (values.answer !== undefined && values.answer.trim() === "") throw usageError("try", help, "--answer is empty (leave it out for no grading)");
  const maxNewTokens =
    values["max-new-tokens"] === undefined
      ? MAX_NEW_TOKENS.default
      : numberFlag("--max-new-tokens", values["max-new-tokens"], { ...MAX_NEW_TOKENS, integer: true });
  await tryPrompt(client, positionals[0], evalTargetFromFlags(values), { prompt, answer: values.answer, maxNewTokens, baseOnly: values["base-only"] === true });
  return 0;
};
