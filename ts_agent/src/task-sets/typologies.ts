/**
 * The AML typology task set's vocabulary: the eight typologies with their accepted answers and the
 * prompt format (aml-tasks.ts generates the rows; narratives.ts writes the case text).
 *
 * The prompt is PROMPT_INSTRUCTION + "\n\nCase: " + narrative + "\n"; it ends with a newline so
 * a completion starts cleanly with "<answer>". The Python side reads prompts from the file and
 * never rebuilds them, but PROMPT_INSTRUCTION is exported for any code that needs the format.
 */
// ---------------------------------------------------------------------------------------------
// Labels

export interface Typology {
  /** Canonical answer label: lowercase, letters and underscores only. */
  label: string;
  /** Accepted answers, canonical label first. All lowercase. */
  answers: string[];
  /** One line for readers; not shown to the model. */
  description: string;
}

// one typology a line: label, accepted answers, description
export const TYPOLOGIES: readonly Typology[] = [
  {
    label: "structuring",
    answers: ["structuring", "cash structuring", "structured deposits"],
    description: "one person splits cash into deposits just below the reporting threshold",
  },
  {
    label: "smurfing",
    answers: ["smurfing", "smurfs", "use of smurfs"],
    description: "many individuals make small deposits or purchases on behalf of one organiser",
  },
  {
    label: "layering",
    answers: ["layering", "wire layering", "layering through wires", "wire_layering"],
    description: "rapid chains of wire transfers across accounts and jurisdictions hide the source",
  },
  {
    label: "trade_based",
    answers: ["trade_based", "trade-based", "trade based", "tbml", "trade-based money laundering", "trade_based_money_laundering"],
    description: "value moved by over/under-invoicing or misdescribing goods",
  },
  {
    label: "shell_company",
    answers: ["shell_company", "shell company", "shell companies", "shell"],
    description: "an entity with no real operations, nominee officers, hidden beneficial owner",
  },
  {
    label: "funnel_account",
    answers: ["funnel_account", "funnel account", "funnel"],
    description: "deposits in many distant places, quickly withdrawn in one other place",
  },
  {
    label: "money_mule",
    answers: ["money_mule", "money mule", "mule", "money mules"],
    description: "a recruited person receives third-party funds and forwards them on instruction",
  },
  {
    label: "round_tripping",
    answers: ["round_tripping", "round-tripping", "round tripping"],
    description: "money leaves to an offshore entity and returns to the same owner as investment or loan",
  },
];

export const LABELS: readonly string[] = TYPOLOGIES.map((t) => t.label);

/** The fixed instruction at the top of every prompt; it lists the allowed labels. */
export const PROMPT_INSTRUCTION =
  "You are an anti-money-laundering analyst. Read the case and name its money-laundering typology.\n" +
  `Allowed labels: ${LABELS.join(", ")}.\n` +
  "Reply with exactly one label in the form <answer>label</answer>.";

/** The prompt for one narrative. Ends with "\n" so the completion starts cleanly. */
export function formatPrompt(narrative: string): string {
  return `${PROMPT_INSTRUCTION}\n\nCase: ${narrative}\n`;
}

// The row schema and answer format are the task format's (core/task-format.ts), re-exported here for
// the modules that import them with the AML vocabulary.
export { SPLITS, formatAnswer, type Split, type TaskRow } from "../agent/core/task-format.js";
