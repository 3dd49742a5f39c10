/**
 * The character classes of normalizeAnswer, written ONCE to a checked-in table that answer-text.ts and
 * answer_text.py both load (py_trainer/py_trainer/core/char_classes.json), instead of asking each runtime's
 * own Unicode tables: Node 20 ships Unicode 17, CPython 3.11 Unicode 14, so a character assigned
 * in between (e.g. U+1FAE8, a symbol since Unicode 15) was punctuation to the TS grader and a
 * letter to the Python one, and the reward used in training disagreed with the one in evaluation.
 *
 * The table holds, from the runtime that generated it (its Unicode version is recorded):
 * - punctuation_or_symbol: code point ranges [first, last] of general category P* or S*;
 * - lowercase: [code point, lower-case string] for every code point whose context-free
 *   String.prototype.toLowerCase differs from itself (so U+0130 maps to "i\u0307", and capital
 *   sigma always to small sigma: no final-sigma rule, in either language).
 * Regenerating it is a deliberate change of the graders (commit it with the vectors):
 *
 *   cd ts_agent && node_modules/.bin/tsx src/parity/char_classes.ts --write   # regenerate
 *   cd ts_agent && node_modules/.bin/tsx src/parity/char_classes.ts --check   # exit 1 if stale
 *
 * --check compares with what THIS runtime would write, so it reports a newer Node's Unicode
 * tables as "stale" too; that is the point: the table, not the runtime, decides.
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

import { CHAR_CLASSES_PATH } from "../agent/core/answer-text.js";

/** The table as this runtime's Unicode data defines it. */
export function buildCharClasses(): string {
  const punct = /^[\p{P}\p{S}]$/u;
  const ranges: Array<[number, number]> = [];
  const lower: Array<[number, string]> = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue; // surrogates are not characters
    const ch = String.fromCodePoint(cp);
    if (punct.test(ch)) {
      const last = ranges[ranges.length - 1];
      if (last && last[1] === cp - 1) last[1] = cp;
      else ranges.push([cp, cp]);
    }
    const l = ch.toLowerCase();
    if (l !== ch) lower.push([cp, l]);
  }
  const head = [
    "{",
    `  "about": "normalizeAnswer's character classes (ts_agent/src/parity/char_classes.ts); loaded by task-rewards.ts and task_rewards.py",`,
    `  "unicode_version": ${JSON.stringify(process.versions.unicode ?? "unknown")},`,
    `  "punctuation_or_symbol": [`,
    ...ranges.map((r, i) => `    [${r[0]}, ${r[1]}]${i < ranges.length - 1 ? "," : ""}`),
    "  ],",
    `  "lowercase": [`,
    ...lower.map((e, i) => `    [${e[0]}, ${JSON.stringify(e[1])}]${i < lower.length - 1 ? "," : ""}`),
    "  ]",
    "}",
    "",
  ];
  return head.join("\n");
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const mode = process.argv[2];
  const data = buildCharClasses();
  if (mode === "--write") {
    writeFileSync(`${CHAR_CLASSES_PATH}.tmp`, data);
    renameSync(`${CHAR_CLASSES_PATH}.tmp`, CHAR_CLASSES_PATH);
    console.log(`wrote ${CHAR_CLASSES_PATH} (Unicode ${process.versions.unicode})`);
  } else if (mode === "--check") {
    let current = "";
    try {
      current = readFileSync(CHAR_CLASSES_PATH, "utf8");
    } catch {
      // missing reads as stale
    }
    if (current !== data) {
      console.error(`${CHAR_CLASSES_PATH} differs from this runtime's Unicode ${process.versions.unicode} tables`);
      process.exitCode = 1;
    } else console.log(`${CHAR_CLASSES_PATH} matches Unicode ${process.versions.unicode}`);
  } else {
    console.error("usage: char_classes.ts (--write | --check)");
    process.exitCode = 2;
  }
}
