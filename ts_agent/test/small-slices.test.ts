/**
 * Issue 21, "small slices": a slice without variance prints no certainty (per-typology p undefined
 * or from the exact sign test), P(PASS) / P(CONFIRMED) come from simulating the real gate, and
 * `agent plan` says "can detect" only when P(PASS | +5 pp) >= 0.8.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { operatingCharacteristic, pairedComparison, pairedProportionGate } from "../src/agent/core/stats/index.js";
import { compareScores, decisionFor, sliceBreakdown } from "../src/agent/core/base-vs-adapter.js";
import { DOWNSTREAM_MIN_DELTA, downstreamCriterion } from "../src/agent/verdict/milestone.js";
import { downstreamEvidence } from "../src/agent/verdict/verdict.js";

describe("per typology with K > 1 samples", () => {
  // per-task means: "a" 2 tasks both 0/2 -> 1/2 (+0.5 each: no spread), "b" 2 tasks unchanged,
  // "c" 6 tasks with spread
  const base = new Map<string, number>();
  const cand = new Map<string, number>();
  const rows: Array<{ id: string; slice: string }> = [];
  const add = (id: string, typology: string, x: number, y: number) => {
    rows.push({ id, slice: typology });
    base.set(id, x);
    cand.set(id, y);
  };
  add("a1", "a", 0, 0.5);
  add("a2", "a", 0, 0.5);
  add("b1", "b", 0.5, 0.5);
  add("b2", "b", 0, 0);
  [0, 0.5, 0.5, 1, 0, 0.5].forEach((y, i) => add(`c${i}`, "c", 0, y));
  const out = sliceBreakdown(base, cand, rows);
  const by = (t: string) => out.find((r) => r.slice === t)!;

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

describe("P(PASS) / P(CONFIRMED) from the real gate", () => {
  /** n 0/1 pairs with b base-only and c adapter-only right answers (plus `both` right on both). */
  function scores(n: number, b: number, c: number, both = 30): { base: Map<string, number>; cand: Map<string, number> } {
    const base = new Map<string, number>();
    const cand = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      const id = `t${String(i).padStart(4, "0")}`;
      base.set(id, i < b || (i >= b + c && i < b + c + both) ? 1 : 0);
      cand.set(id, (i >= b && i < b + c) || (i >= b + c && i < b + c + both) ? 1 : 0);
    }
    return { base, cand };
  }

  test("n = 264, discordance 0.25: simulated about 0.33, not the normal approximation's 0.37", () => {
    const { base, cand } = scores(264, 26, 40); // (26 + 40) / 264 = 0.25
    const c = compareScores(base, cand);
    const ev = downstreamEvidence(c, "this eval")!;
    assert.equal(ev.powerMethod, "simulated");
    const normal = operatingCharacteristic(DOWNSTREAM_MIN_DELTA, Math.sqrt(0.25 - 0.05 ** 2), 264, { threshold: DOWNSTREAM_MIN_DELTA }).pPass;
    assert.ok(Math.abs(normal - 0.372) < 0.001);
    // the exact sum over tables is 0.327 (tests/test_stats_references.py); 10 000 draws: SE <= 0.005
    assert.ok(Math.abs(ev.pPassAtThreshold! - 0.327) < 0.015, String(ev.pPassAtThreshold));
    assert.ok(Math.abs(ev.pConfirmAtThreshold! - 0.025) < 0.015, String(ev.pConfirmAtThreshold));
    assert.match(downstreamCriterion(ev).reason, /P\(PASS \| true delta = \+5 pp\) = 0\.3\d at n=264 \(simulated\)/);
  });

  test("the simulated gate is downstreamCriterion's rule on every table", () => {
    const n = 200;
    for (let b = 0; b <= 30; b += 3) {
      for (let c = 0; c <= 45; c++) {
        const p = pairedComparison(...pairs(n, b, c));
        const d = decisionFor(p);
        const ev = {
          n,
          meanDiff: p.meanDiff,
          lower: d.lower,
          upper: d.upper,
          method: d.method,
          test: d.test,
          p: d.p,
          rejects: d.rejects,
          requiredN: null,
          mde: null,
          baseSource: "x",
        };
        const v = downstreamCriterion(ev).verdict;
        const g = pairedProportionGate(b, c, n, { threshold: DOWNSTREAM_MIN_DELTA });
        assert.equal(g.passes, v === "PASS" || v === "CONFIRMED", `b=${b} c=${c}: ${v}`);
        assert.equal(g.confirm, v === "CONFIRMED", `b=${b} c=${c}: ${v}`);
      }
    }
  });

  test("per-task means (K > 1) keep the normal approximation, and say so", () => {
    const base = new Map([...Array(210).keys()].map((i) => [`m${i}`, (i % 4) / 4]));
    const cand = new Map([...Array(210).keys()].map((i) => [`m${i}`, ((i + 1) % 4) / 4]));
    assert.equal(downstreamEvidence(compareScores(base, cand), "x")!.powerMethod, "normal approximation");
  });
});

function pairs(n: number, b: number, c: number): [number[], number[]] {
  const a: number[] = [];
  const y: number[] = [];
  for (let i = 0; i < n; i++) {
    a.push(i < b ? 1 : 0);
    y.push(i >= b && i < b + c ? 1 : 0);
  }
  return [a, y];
}
