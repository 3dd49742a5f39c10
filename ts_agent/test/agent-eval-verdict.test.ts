/**
 * Issue 52, item 2: one verdict for every eval. K > 1 samples per task whose per-task gains are all
 * equal give a zero-width paired t interval; the agent eval's own copy of the decision called that
 * CONFIRMED (p = 0). The shared decision must not: an interval of width 0 bounds nothing.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { compareScores } from "../src/agent/core/base-vs-adapter.js";
import { downstreamCriterion } from "../src/agent/verdict/milestone.js";
import { downstreamEvidence } from "../src/agent/verdict/verdict.js";

test("K = 2 samples, every task 0/2 -> 1/2: a zero-width interval is never CONFIRMED", () => {
  const n = 240;
  const base = new Map(Array.from({ length: n }, (_, i) => [`t${i}`, 0] as [string, number]));
  const adapter = new Map(Array.from({ length: n }, (_, i) => [`t${i}`, 0.5] as [string, number]));
  const c = compareScores(base, adapter);
  assert.equal(c.decision?.lower, c.decision?.upper, "the paired t interval has no width here");
  const verdict = downstreamCriterion(downstreamEvidence(c, "the eval's own base variant"));
  assert.notEqual(verdict.verdict, "CONFIRMED", verdict.reason);
  assert.match(verdict.reason, /zero width|no spread/);
});
