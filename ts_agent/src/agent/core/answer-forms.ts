/**
 * Answers as a chat model writes them (issue 27): the forms task-rewards.ts's final_number_match
 * and stops_after_answer read. A base like SmolLM2-135M-Instruct, asked "What is 23 + 45? Reply
 * with just the number.", answers "23 + 45 = 68", and sometimes runs on past it; a grader that
 * takes the first number scores the echo of the question, so the answer is read at the end.
 * Character classes as in task-rewards.ts (ASCII digits, its whitespace set); the Python port is
 * in py_trainer/py_trainer/core/task_rewards.py (final_number, stops_after_answer_reward).
 */

const WS = "[ \\t\\n\\r\\f\\v\\u00a0]";
const NUMBER = "-?[0-9]+(?:\\.[0-9]+)?";
const EDGE_WHITESPACE = new RegExp(`^${WS}+|${WS}+$`, "g");
const AFTER_LAST_EQUALS = new RegExp(`^${WS}*(${NUMBER})(?![0-9]|\\.[0-9])`);
const BARE_NUMBER = new RegExp(`^${NUMBER}\\.?$`);
const EQUATION = new RegExp(`^[0-9 +\\-*/x\\u00d7().]*[0-9)]${WS}*=${WS}*${NUMBER}\\.?$`);

function trim(s: string): string {
  return s.replace(EDGE_WHITESPACE, "");
}

/**
 * The answer a completion gives, never the echoed question: `tagged` (the last <tag>...</tag>'s
 * content, from extractAnswer), trimmed, when there is one; else the number right after the last
 * "=" (a decimal stays whole: "= 6.8" is "6.8"); else the whole trimmed completion when it is one
 * number with at most a final "."; else null.
 */
export function finalNumberOf(completion: string, tagged: string | null): string | null {
  if (tagged !== null) return trim(tagged);
  const i = completion.lastIndexOf("=");
  if (i !== -1) {
    const m = AFTER_LAST_EQUALS.exec(completion.slice(i + 1));
    return m ? m[1] : null;
  }
  const bare = trim(completion);
  if (!BARE_NUMBER.test(bare)) return null;
  return bare.endsWith(".") ? bare.slice(0, -1) : bare;
}

/**
 * Whether the trimmed completion is just an answer and ends there: one number (a final "."
 * allowed), one <tag>number</tag>, or one equation ending in its result ("23 + 45 = 68", a final
 * "." allowed). `tag` must already be a valid tag name.
 */
export function isJustAnAnswer(completion: string, tag: string): boolean {
  const c = trim(completion);
  const tagged = new RegExp(`^<${tag}>${WS}*${NUMBER}${WS}*</${tag}>$`);
  return tagged.test(c) || BARE_NUMBER.test(c) || EQUATION.test(c);
}

/** Gold answers trimmed, blank ones dropped. */
export function trimmedGolds(answers: ReadonlyArray<string>): string[] {
  return answers.map(trim).filter((g) => g !== "");
}
