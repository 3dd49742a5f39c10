/**
 * Issue 21, "small slices": a slice without variance prints no certainty (per-typology p undefined
 * or from the exact sign test), P(PASS) / P(CONFIRMED) come from simulating the real gate, and
 * `agent plan` says "can detect" only when P(PASS | +5 pp) >= 0.8.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { typologyBreakdown } from "../src/agent/verdict/compare.js";

describe("per typology with K > 1 samples", () => {
  // per-task means: "a" 2 tasks both 0/2 -> 1/2 (+0.5 each: no spread), "b" 2 tasks unchanged,
  // "c" 6 tasks with spread
  const base = new Map<string, number>();
  const cand = new Map<string, number>();
  const rows: Array<{ id: string; typology: string }> = [];
  const add = (id: string, typology: string, x: number, y: number) => {
    rows.push({ id, typology });
    base.set(id, x);
    cand.set(id, y);
  };
  add("a1", "a", 0, 0.5);
  add("a2", "a", 0, 0.5);
  add("b1", "b", 0.5, 0.5);
  add("b2", "b", 0, 0);
  [0, 0.5, 0.5, 1, 0, 0.5].forEach((y, i) => add(`c${i}`, "c", 0, y));
  const out = typologyBreakdown(base, cand, rows);
  const by = (t: string) => out.find((r) => r.typology === t)!;

  test("two tasks that both go 0/2 -> 1/2: the exact sign test (p = 0.5), not paired t's p = 0", () => {
    const a = by("a");
    assert.equal(a.test, "exact sign test");
    assert.equal(a.p, 0.5); // 2 rises, 0 falls: 2 * (1/2)^2
    assert.equal(a.lower, null); // a zero-width t interval would read certainty
    assert.equal(a.upper, null);
  });

  test("no difference at all: p undefined, not 1 read from a zero SE", () => {
    const b = by("b");
    assert.equal(b.p, null);
    assert.equal(b.pHolm, null);
    assert.equal(b.test, "undefined (no variance)");
  });

  test("Holm runs over the defined p's only", () => {
    const a = by("a");
    const c = by("c");
    assert.equal(c.test, "paired t test");
    assert.ok(c.p !== null && c.p > 0);
    const [lo, hi] = [Math.min(a.p!, c.p!), Math.max(a.p!, c.p!)];
    const holmLo = Math.min(1, 2 * lo);
    const holmHi = Math.min(1, Math.max(holmLo, hi));
    assert.equal(Math.min(a.pHolm!, c.pHolm!), holmLo);
    assert.equal(Math.max(a.pHolm!, c.pHolm!), holmHi);
  });
});
