/**
 * Issue 29, item 1: "no spread" is decided with a tolerance tied to the data's scale and float
 * precision (noSpread), not by sd === 0. Per-task means over 5 samples (0.2, 0.4, ...) give
 * differences that are equal in exact arithmetic but differ in the last bits (0.2 vs
 * 0.19999999999999996); before, the t test then ran with t ~ 1e15 (p = 0, a "95% CI" of width 1e-16),
 * and p could come out as -2.2e-16. The reference here is exact integer arithmetic: per-task means
 * k / K whose numerators differ by the same integer have, exactly, no spread.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { NO_SPREAD_ULPS, mcnemarExactP, noSpread, pairedComparison } from "../src/agent/core/stats/index.js";
import { NO_VARIANCE_TEST, UNDEFINED_TEST, compareScores, sliceBreakdown } from "../src/agent/core/base-vs-adapter.js";
import { heldOutTest } from "../src/agent/verdict/held-out-reward.js";

describe("no spread, with a tolerance (issue 29, item 1)", () => {
  test("noSpread: equal up to rounding is no spread; a real difference of 1e-12 at scale 1 is spread", () => {
    assert.equal(noSpread([0.2, 0.19999999999999996, 0.20000000000000007]), true);
    assert.equal(noSpread([0.3]), true);
    assert.equal(noSpread([0.2, 0.2 + 1e-12]), false);
    // the scale is the data's: 1e-17 beside -1e-17 is rounding at scale 1, a real spread at its own scale
    assert.equal(noSpread([1e-17, -1e-17], { scale: 1 }), true);
    assert.equal(noSpread([1e-17, -1e-17]), false);
    // the threshold: NO_SPREAD_ULPS * EPSILON * scale
    const tol = NO_SPREAD_ULPS * Number.EPSILON;
    assert.equal(noSpread([0, tol * 0.99], { scale: 1 }), true);
    assert.equal(noSpread([0, tol * 1.01], { scale: 1 }), false);
  });

  test("pairedComparison: per-task means k/K shifted by the same integer have sd 0 (exact integers as reference)", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(3, 5, 6, 7, 10),
        fc.integer({ min: 1, max: 3 }),
        fc.array(fc.nat({ max: 7 }), { minLength: 2, maxLength: 40 }),
        (K, shift, ks) => {
          const a = ks.map((k) => Math.min(k, K - shift) / K);
          const b = ks.map((k) => (Math.min(k, K - shift) + shift) / K);
          const pc = pairedComparison(a, b);
          assert.equal(pc.sdDiff, 0);
          assert.equal(pc.seDiff, 0);
          assert.deepEqual(pc.ciT, { lower: pc.meanDiff, upper: pc.meanDiff });
          assert.ok(pc.tTestP >= 0 && pc.tTestP <= 1);
        },
      ),
      { numRuns: 200 },
    );
  });

  test("pairedComparison: differences that are 0 up to rounding have mean 0 and p 1", () => {
    const a = [0.1 + 0.2, 0.3, 0.7, 0.1 + 0.7];
    const b = [0.3, 0.3, 0.1 + 0.6, 0.8];
    const pc = pairedComparison(a, b);
    assert.equal(pc.sdDiff, 0);
    assert.equal(pc.meanDiff, 0);
    assert.equal(pc.tTestP, 1);
  });

  test("p-values are clamped to [0, 1] (264 differences 0.2 +- 0.00325 gave p = -2.2e-16)", () => {
    const a = new Array<number>(264).fill(0.5);
    const b = a.map((x, i) => x + 0.2 + (i % 2 ? 0.00325 : -0.00325));
    const p = pairedComparison(a, b).tTestP;
    assert.ok(p >= 0 && p <= 1, String(p));
  });

  test("compareScores and the slice rows: 5 samples per task, one more correct on every task, read as no spread", () => {
    const ks = [3, 4, 2, 1, 0, 3];
    const base = new Map(ks.map((k, i) => [`t${i}`, k / 5]));
    const cand = new Map(ks.map((k, i) => [`t${i}`, (k + 1) / 5]));
    const c = compareScores(base, cand);
    assert.equal(c.decision?.test, NO_VARIANCE_TEST);
    assert.equal(c.decision?.p, mcnemarExactP(0, ks.length)); // the exact sign test: 6 rises of 6
    assert.equal(c.mde, null);
    const rows = ks.map((_, i) => ({ id: `t${i}`, slice: i < 3 ? "x" : "y" }));
    for (const s of sliceBreakdown(base, cand, rows)) {
      assert.equal(s.test, NO_VARIANCE_TEST, s.slice);
      assert.equal(s.lower, null);
      assert.equal(s.upper, null);
      assert.ok(s.p !== null && s.p > 0.05, `${s.slice}: p ${s.p}`); // 3 rises of 3: p 0.25, never 0
    }
    // all equal up to rounding: nothing to test
    const same = compareScores(
      new Map([
        ["a", 0.1 + 0.2],
        ["b", 0.7],
      ]),
      new Map([
        ["a", 0.3],
        ["b", 0.1 + 0.6],
      ]),
    );
    assert.equal(same.decision?.test, UNDEFINED_TEST);
  });

  test("the reward's held-out test: ends equal up to rounding are no change (p 1), not a t test reading certainty", () => {
    const at = (perPrompt: number[]) => ({ perPrompt }) as never;
    // 0.1 + 0.2 and 0.2 + 0.4 round up: six 'rises' by rounding alone (a sign test would say p 0.03)
    const start = [0.3, 0.6, 0.3, 0.6, 0.3, 0.6];
    const same = heldOutTest({ startReward: at(start), endReward: at(start.map((x) => (x === 0.3 ? 0.1 + 0.2 : 0.2 + 0.4))) });
    assert.equal(same?.test, "exact sign test");
    assert.equal(same?.p, 1);
    assert.equal(same?.rejects, false);
    // one more correct sample of 5 on each of 6 prompts: the exact sign test, 6 rises of 6
    const ks = [3, 4, 2, 1, 0, 3];
    const up = heldOutTest({ startReward: at(ks.map((k) => k / 5)), endReward: at(ks.map((k) => (k + 1) / 5)) });
    assert.equal(up?.test, "exact sign test");
    assert.equal(up?.p, mcnemarExactP(0, 6));
  });
});
