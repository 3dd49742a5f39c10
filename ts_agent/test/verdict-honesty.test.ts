/**
 * Issue 10's "Done when": each defect the report had at the edges, as a test. Every test here
 * failed before the fix (see the commit that added this file).
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { compareScores } from "../src/agent/core/base-vs-adapter.js";
import { attribute } from "../src/agent/report/attribution.js";
import { curveFeatures, type StepMetrics } from "../src/agent/report/curve-features.js";
import { judgeMilestone, judgeReward } from "../src/agent/verdict/milestone.js";
import { downstreamEvidence, downstreamSignal, type DownstreamSignal } from "../src/agent/verdict/verdict.js";
import { mulberry32 } from "../src/task-sets/task-rng.js";
import { reward } from "./helpers/verdict-fixtures.js";

function steps(n: number, f: (i: number, e: number) => Record<string, number>, seed = 7): StepMetrics[] {
  const rand = mulberry32(seed);
  return Array.from({ length: n }, (_, i) => ({ step: i + 1, metrics: f(i, 2 * rand() - 1) }));
}

/** A textbook healthy curve: steady rise, moderate KL, falling frac_reward_zero_std. */
const healthy = steps(60, (i, e) => ({
  reward: 0.2 + 0.4 * (i / 59) + 0.03 * e,
  kl: 0.005 + 0.02 * (i / 59),
  frac_reward_zero_std: 0.6 - 0.4 * (i / 59) + 0.02 * e,
  "completions/clipped_ratio": 0.1,
}));

const firedCauses = (s: StepMetrics[], d: DownstreamSignal) =>
  attribute(curveFeatures(s), d)
    .filter((r) => r.fired)
    .map((r) => r.row.likelyCause);

/** Binary per-task scores: base right on `baseRight` tasks; the adapter additionally wins `wins`
 *  and loses `losses` of them. */
function pairs(n: number, baseRight: number, wins: number, losses: number): [Map<string, number>, Map<string, number>] {
  const a = new Map<string, number>();
  const b = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const x = i < baseRight ? 1 : 0;
    let y = x;
    if (i < losses) y = 0; // among the base's right answers
    if (i >= baseRight && i < baseRight + wins) y = 1; // among the base's wrong answers
    a.set(`t${i}`, x);
    b.set(`t${i}`, y);
  }
  return [a, b];
}

test("a held-out set of ONE prompt never PASSes the reward criterion (nor two)", () => {
  const one = judgeReward(reward({ numPrompts: 1, relativeChange: 0.5, relativeChangeCiLow: 0.5, relativeChangeCiHigh: 0.5 }));
  assert.notEqual(one.verdict, "PASS");
  assert.notEqual(one.verdict, "CONFIRMED");
  assert.match(one.reason, /1 prompt/);
  const two = judgeReward(reward({ numPrompts: 2, relativeChange: 0.75, relativeChangeCiLow: 0.5, relativeChangeCiHigh: 1.0 }));
  assert.equal(two.verdict, "INCONCLUSIVE");
});

test("a significant -12 pp downstream regression is its own row, and the curve is not 'healthy'", () => {
  const d: DownstreamSignal = {
    heldOutRose: true,
    significant: true,
    text: "-12.0 pp (95% CI -18.0 to -6.0 pp), n=264",
    n: 264,
    meanDiff: -0.12,
    lower: -0.18,
    upper: -0.06,
    requiredN: 60,
  };
  const causes = firedCauses(healthy, d);
  assert.ok(!causes.includes("healthy"), `fired: ${causes.join(" / ")}`);
  assert.ok(
    causes.some((c) => /regression/.test(c)),
    `fired: ${causes.join(" / ")}`,
  );
});

test("n=29 with a CI that includes 0 is 'underpowered', not reward hacking", () => {
  const d: DownstreamSignal = {
    heldOutRose: true,
    significant: false,
    text: "+10.3 pp (95% CI -1.0 to +21.0 pp), n=29",
    n: 29,
    meanDiff: 0.103,
    lower: -0.01,
    upper: 0.21,
    requiredN: 71,
  };
  const causes = firedCauses(healthy, d);
  assert.ok(!causes.includes("reward hacking or loose grader"), `fired: ${causes.join(" / ")}`);
  assert.ok(
    causes.some((c) => /underpowered/.test(c)),
    `fired: ${causes.join(" / ")}`,
  );
});

test("a 6-step curve is 'undetermined': only the 'too short / too noisy' row fires", () => {
  const s = steps(6, (_i, e) => ({ reward: 0.3 + 0.05 * e, kl: 1e-4, frac_reward_zero_std: 0.2 }));
  const f = curveFeatures(s);
  assert.equal(f.reward!.shape, "undetermined");
  assert.match(f.reward!.undeterminedWhy, /too short: 6 logged step/);
  const causes = firedCauses(s, { heldOutRose: null, significant: null, text: "" });
  assert.deepEqual(causes, ["undetermined: the curve cannot carry a trend"]);
});

test("the seed's case (N=29, +10.3 pp): INCONCLUSIVE with required n about 70, and underpowered in attribution", () => {
  const [a, b] = pairs(29, 10, 3, 0);
  const c = compareScores(a, b);
  assert.equal(c.n, 29);
  assert.ok(Math.abs(c.paired!.meanDiff - 0.1034) < 1e-3);
  const ev = downstreamEvidence(c, "baseline.json");
  const v = judgeMilestone({ reward: reward(), downstream: ev, baseline: { status: "match" } });
  assert.equal(v.verdict, "INCONCLUSIVE");
  const m = /required n=(\d+)/.exec(v.downstream.reason);
  assert.ok(m, v.downstream.reason);
  assert.ok(Number(m[1]) >= 65 && Number(m[1]) <= 75, v.downstream.reason);
  const causes = firedCauses(healthy, downstreamSignal(c, reward()));
  assert.ok(
    causes.some((x) => /underpowered/.test(x)),
    `fired: ${causes.join(" / ")}`,
  );
  assert.ok(!causes.includes("reward hacking or loose grader"));
});

test("near the boundary (n=200, 8 losses vs 18 wins) the exact McNemar test governs: the verdict cannot flip with a bootstrap seed", () => {
  const [a, b] = pairs(200, 100, 18, 8);
  const c = compareScores(a, b);
  assert.deepEqual(c.paired!.discordant, { b: 8, c: 18 });
  assert.equal(c.decision!.test, "exact McNemar test");
  assert.ok(Math.abs(c.decision!.p! - 0.0755) < 1e-3);
  assert.equal(c.decision!.rejects, false);
  const ev = downstreamEvidence(c, "baseline.json")!;
  const v = judgeMilestone({ reward: reward(), downstream: ev, baseline: { status: "match" } });
  assert.equal(v.downstream.verdict, "INCONCLUSIVE");
  assert.match(v.downstream.reason, /exact McNemar test p=0\.076/);
  assert.match(v.downstream.reason, /P\(PASS \| true delta = \+5 pp\) = 0\.\d\d at n=200/);
});
