/** Markdown helpers shared by the report's sections: tables and the number formats they print. */

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

/** A Markdown table; `|` in a cell is escaped, a newline becomes a space. */
export function table(head: string[], rows: string[][]): string {
  return [`| ${head.map(cell).join(" | ")} |`, `|${head.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`)].join("\n");
}

/** A fraction as a percentage with one decimal, e.g. 0.123 -> "12.3%". */
export const pct1 = (x: number) => `${(x * 100).toFixed(1)}%`;
/** Three decimals; a non-finite value as JavaScript writes it. */
export const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : String(x));

/**
 * Text shown verbatim in a fenced code block: the fence is one backtick longer than the longest
 * run of backticks in the text (CommonMark: nothing inside can close it), and a text longer than
 * `maxChars` characters (code points, so no pair is split) is cut there, the cut said below it.
 */
export function fenced(text: string, maxChars: number, info = "text"): string[] {
  const chars = Array.from(text);
  const shown = chars.length > maxChars ? chars.slice(0, maxChars).join("") : text;
  const longest = Math.max(0, ...(shown.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(Math.max(3, longest + 1));
  const out = [fence + info, shown, fence];
  if (chars.length > maxChars) out.push(`_cut at ${maxChars} of ${chars.length} characters_`);
  return out;
}
