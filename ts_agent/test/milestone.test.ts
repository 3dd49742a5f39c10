import assert from "node:assert/strict";
import { test } from "node:test";

import { judgeMilestone, type DownstreamEvidence } from "../src/agent/verdict/milestone.js";
import { reward } from "./helpers/verdict-fixtures.js";

const downstream = (over: Partial<DownstreamEvidence> = {}): DownstreamEvidence => ({
  n: 264,
  meanDiff: 0.1,
  lower: 0.06,
  upper: 0.14,
  method: "paired percentile bootstrap",
  requiredN: 120,
  mde: 0.05,
  baseSource: "baseline.json",
  ...over,
});

test("confirmed: both CIs' lower bounds clear the thresholds themselves (reward +30%, downstream +6 pp)", () => {
  const v = judgeMilestone({ reward: reward(), downstream: downstream(), baseline: { status: "match" } });
  assert.equal(v.verdict, "CONFIRMED");
  assert.equal(v.gated, false);
  assert.equal(v.reward.verdict, "CONFIRMED");
  assert.equal(v.downstream.verdict, "CONFIRMED");
  assert.match(v.reason, /\+10\.0 pp/);
  assert.match(v.reason, /\+50\.0%/);
});

test("clear pass: the estimates clear the thresholds, the CIs exclude 0 but not the thresholds", () => {
  const v = judgeMilestone({
    reward: reward({ relativeChangeCiLow: 0.1 }),
    downstream: downstream({ lower: 0.04, test: "exact McNemar test", p: 0.001, rejects: true, pPassAtThreshold: 0.5 }),
    baseline: { status: "match" },
  });
  assert.equal(v.verdict, "PASS");
  assert.equal(v.reward.verdict, "PASS");
  assert.equal(v.downstream.verdict, "PASS");
  assert.match(v.downstream.reason, /point-estimate gate/);
  assert.match(v.downstream.reason, /P\(PASS \| true delta = \+5 pp\) = 0\.50 at n=264/);
  assert.match(v.downstream.reason, /exact McNemar test p=0\.0010/);
  assert.match(v.reason, /\+10\.0 pp/);
  assert.match(v.reason, /\+50\.0%/);
});

test("tiny N is INCONCLUSIVE, with n and the required n in the reason, even with a big delta", () => {
  const v = judgeMilestone({
    reward: reward(),
    downstream: downstream({ n: 12, meanDiff: 0.083, lower: -0.041, upper: 0.207, requiredN: 310 }),
    baseline: { status: "match" },
  });
  assert.equal(v.verdict, "INCONCLUSIVE");
  assert.equal(v.downstream.verdict, "INCONCLUSIVE");
  assert.match(v.reason, /n=12 < 200 test tasks/);
  assert.match(v.reason, /required n=310 for the observed delta/);
  // A tiny N with a CI far below the bar is still not a FAIL: too few tasks to judge.
  const w = judgeMilestone({
    reward: reward(),
    downstream: downstream({ n: 3, meanDiff: 0, lower: 0, upper: 0, requiredN: null }),
    baseline: { status: "match" },
  });
  assert.equal(w.verdict, "INCONCLUSIVE");
});

test("enough tasks but the CI includes 0: INCONCLUSIVE naming the required n", () => {
  const v = judgeMilestone({
    reward: reward(),
    downstream: downstream({ n: 264, meanDiff: 0.06, lower: -0.01, upper: 0.13, requiredN: 410, mde: 0.078 }),
    baseline: { status: "match" },
  });
  assert.equal(v.verdict, "INCONCLUSIVE");
  assert.match(v.downstream.reason, /n=264 < required n=410 for the observed delta/);
});

test("clear fail: the downstream CI upper bound is below +5 pp", () => {
  const v = judgeMilestone({ reward: reward(), downstream: downstream({ meanDiff: 0.01, lower: -0.02, upper: 0.04 }), baseline: { status: "match" } });
  assert.equal(v.verdict, "FAIL");
  assert.equal(v.downstream.verdict, "FAIL");
  assert.match(v.reason, /CI upper bound \+4\.0 pp < \+5 pp/);
});

test("clear fail: the reward CI upper bound is below +20%", () => {
  const v = judgeMilestone({
    reward: reward({ relativeChange: 0.05, relativeChangeCiLow: -0.05, relativeChangeCiHigh: 0.15 }),
    downstream: downstream(),
    baseline: { status: "match" },
  });
  assert.equal(v.verdict, "FAIL");
  assert.equal(v.reward.verdict, "FAIL");
  assert.match(v.reason, /CI upper bound \+15\.0% < \+20%/);
});

test("reward >= +20% but its CI includes 0 is INCONCLUSIVE; a zero start is INCONCLUSIVE", () => {
  const a = judgeMilestone({
    reward: reward({ relativeChange: 0.3, relativeChangeCiLow: -0.1, relativeChangeCiHigh: 0.8 }),
    downstream: downstream(),
    baseline: { status: "match" },
  });
  assert.equal(a.verdict, "INCONCLUSIVE");
  assert.match(a.reward.reason, /the CI does not exclude 0/);
  const b = judgeMilestone({
    reward: reward({ startMean: 0, relativeChange: NaN, relativeChangeCiLow: NaN, relativeChangeCiHigh: NaN }),
    downstream: downstream(),
    baseline: { status: "match" },
  });
  assert.equal(b.reward.verdict, "INCONCLUSIVE");
  assert.match(b.reward.reason, /relative change is undefined/);
});

test("a missing baseline gates the verdict even when both criteria pass", () => {
  const v = judgeMilestone({ reward: reward(), downstream: downstream({ baseSource: "the eval's own base variant" }), baseline: { status: "missing" } });
  assert.equal(v.verdict, "INCONCLUSIVE");
  assert.equal(v.gated, true);
  assert.match(v.reason, /^GATED on baseline\.json: .*missing/);
  assert.equal(v.downstream.verdict, "CONFIRMED"); // what it would be, still shown
});

test("a mismatching baseline gates the verdict, with the reasons", () => {
  const v = judgeMilestone({
    reward: reward(),
    downstream: downstream(),
    baseline: { status: "mismatch", reasons: ['task-set sha256: baseline "aa", eval "bb"'] },
  });
  assert.equal(v.verdict, "INCONCLUSIVE");
  assert.equal(v.gated, true);
  assert.match(v.reason, /GATED on baseline\.json: .*does not match this eval \(task-set sha256/);
});

test("no eval and no held-out result: INCONCLUSIVE with both reasons", () => {
  const v = judgeMilestone({ reward: null, downstream: null, baseline: { status: "match" } });
  assert.equal(v.verdict, "INCONCLUSIVE");
  assert.match(v.reason, /no held-out start\/end reward/);
  assert.match(v.reason, /agent eval <run_id>/);
});

test("the governing test and the interval disagree near the boundary: INCONCLUSIVE naming both", () => {
  // n=200, 8 vs 18 discordant: the McNemar p is 0.076, so a CI that happens to exclude 0 does not decide
  const v = judgeMilestone({
    reward: reward(),
    downstream: downstream({ n: 200, meanDiff: 0.05, lower: 0.001, upper: 0.1, test: "exact McNemar test", p: 0.076, rejects: false }),
    baseline: { status: "match" },
  });
  assert.equal(v.downstream.verdict, "INCONCLUSIVE");
  assert.match(v.downstream.reason, /exact McNemar test \(which governs\) does not reject/);
});

test("an unbounded reward CI is printed as unbounded and still judged", () => {
  const v = judgeMilestone({
    reward: reward({ startMean: 0.02, endMean: 0.2, relativeChange: 9, relativeChangeCiLow: 1.5, relativeChangeCiHigh: Infinity }),
    downstream: downstream(),
    baseline: { status: "match" },
  });
  assert.equal(v.reward.verdict, "CONFIRMED");
  assert.match(v.reward.reason, /\+unbounded/);
  assert.match(v.reward.reason, /absolute \+0\.180/);
});
