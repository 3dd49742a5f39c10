/**
 * docs/attribution.md is the table users read; attribution.ts's ATTRIBUTION_TABLE is the table the
 * report applies. Same rows, same order, same words: a row changed on one side only fails here.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { ATTRIBUTION_TABLE } from "../src/agent/report/attribution.js";
import { REPO } from "./helpers/sidecar.js";

const DOC = join(REPO, "docs", "attribution.md");
const HEADER = ["reward curve", "KL", "frac_reward_zero_std", "likely cause", "next change", "fires when"];

function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, "")
    .replace(/\|$/, "")
    .split("|")
    .map((c) => c.trim());
}

/** The first markdown table whose header is HEADER: its body rows as cell lists. */
function docTable(markdown: string): string[][] {
  const lines = markdown.split("\n");
  const start = lines.findIndex((l) => l.trim().startsWith("|") && cells(l).join("|") === HEADER.join("|"));
  assert.ok(start >= 0, `no table with the header | ${HEADER.join(" | ")} | in ${DOC}`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.trim().startsWith("|")) break;
    rows.push(cells(line));
  }
  return rows;
}

test("docs/attribution.md's table is the table attribution.ts applies", () => {
  const doc = docTable(readFileSync(DOC, "utf8"));
  assert.deepEqual(
    doc.map((r) => r.slice(0, 5)),
    ATTRIBUTION_TABLE.map((r) => [r.curve, r.kl, r.fracZeroStd, r.likelyCause, r.nextChange]),
  );
  for (const r of doc) {
    assert.equal(r.length, HEADER.length, `row "${r[3]}" has ${r.length} cells`);
    assert.ok(r[5].length > 0, `row "${r[3]}" does not say when it fires`);
  }
});

test("the check can fail: a changed word or a missing row is seen", () => {
  const md = readFileSync(DOC, "utf8");
  const expected = ATTRIBUTION_TABLE.map((r) => [r.curve, r.kl, r.fracZeroStd, r.likelyCause, r.nextChange]);
  const reworded = docTable(md.replace("| lower lr, epsilon |", "| lower lr |")).map((r) => r.slice(0, 5));
  assert.notDeepEqual(reworded, expected);
  const dropped = docTable(
    md
      .split("\n")
      .filter((l) => !l.includes("| completions truncated |"))
      .join("\n"),
  );
  assert.equal(dropped.length, expected.length - 1);
});
