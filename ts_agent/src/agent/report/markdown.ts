/** Markdown helpers shared by the report's sections: tables and the number formats they print. */

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

/** A Markdown table; `|` in a cell is escaped, a newline becomes a space. */
export function table(head: string[], rows: string[][]): string {
  return [
    `| ${head.map(cell).join(" | ")} |`,
    `|${head.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`),
  ].join("\n");
}

/** A fraction as a percentage with one decimal, e.g. 0.123 -> "12.3%". */
export const pct1 = (x: number) => `${(x * 100).toFixed(1)}%`;
/** Three decimals; a non-finite value as JavaScript writes it. */
export const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : String(x));
