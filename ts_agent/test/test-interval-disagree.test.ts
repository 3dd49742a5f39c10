/**
 * Issue 29, item 5: one rule when the governing test and the printed interval disagree about 0,
 * shared by the reward and the downstream criteria (docs/verdict.md, milestone.ts
 * governedExcludesZero): the test governs "excludes 0" (it is deterministic; the reward's CI is a
 * seeded bootstrap, issue 21), the verdict follows it, and the reason names both. Before, the
 * reward PASSed when its test rejected (p = 0.047) while its CI reached 0, and the downstream
 * criterion called the same disagreement INCONCLUSIVE; and a reward CI whose lower bound cleared
 * +20% was CONFIRMED although its test did not reject.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { downstreamCriterion, governedExcludesZero, judgeReward, type DownstreamEvidence, type RewardEvidence } from "../src/agent/verdict/milestone.js";

const reward = (over: Partial<RewardEvidence>): RewardEvidence => ({
  startMean: 0.3,
  endMean: 0.375,
  relativeChange: 0.25,
  relativeChangeCiLow: 0.05,
  relativeChangeCiHigh: 0.45,
  numPrompts: 64,
  scorablePrompts: 64,
  samplesPerPrompt: 4,
  test: "paired t test",
  p: 0.01,
  rejects: true,
  ...over,
});

const downstream = (over: Partial<DownstreamEvidence>): DownstreamEvidence => ({
  n: 264,
  meanDiff: 0.06,
  lower: 0.01,
  upper: 0.11,
  method: "Tango score interval",
  test: "exact McNemar test",
  p: 0.01,
  rejects: true,
  requiredN: 200,
  mde: 0.05,
  baseSource: "baseline.json",
  ...over,
});

describe("the governing test and its interval disagree about 0: one rule for both criteria", () => {
  test("the test rejects (p = 0.047) but the interval reaches 0: the test decides (PASS) for both, the reason names both", () => {
    const r = judgeReward(reward({ relativeChangeCiLow: -0.004, p: 0.047, rejects: true }));
    const d = downstreamCriterion(downstream({ lower: -0.001, p: 0.047, rejects: true }));
    for (const c of [r, d]) {
      assert.equal(c.verdict, "PASS", c.reason);
      assert.match(c.reason, /includes 0 but the (paired t test|exact McNemar test) \(which governs\) rejects it/);
    }
  });

  test("the interval excludes 0 but the test does not reject (p = 0.06): INCONCLUSIVE for both, naming both", () => {
    const cases = [
      judgeReward(reward({ relativeChangeCiLow: 0.01, p: 0.06, rejects: false })),
      downstreamCriterion(downstream({ lower: 0.001, p: 0.06, rejects: false })),
      // even where the interval's lower bound clears the threshold itself (the reward said CONFIRMED)
      judgeReward(reward({ relativeChange: 0.4, relativeChangeCiLow: 0.21, relativeChangeCiHigh: 0.6, p: 0.06, rejects: false })),
      downstreamCriterion(downstream({ meanDiff: 0.1, lower: 0.051, upper: 0.15, p: 0.06, rejects: false })),
    ];
    for (const c of cases) {
      assert.equal(c.verdict, "INCONCLUSIVE", c.reason);
      assert.match(c.reason, /excludes 0 but the (paired t test|exact McNemar test) \(which governs\) does not reject it/);
    }
  });

  test("they agree: PASS for both, with no disagreement named", () => {
    for (const c of [judgeReward(reward({})), downstreamCriterion(downstream({}))]) {
      assert.equal(c.verdict, "PASS", c.reason);
      assert.doesNotMatch(c.reason, /which governs\) (rejects|does not reject) it/);
    }
  });

  test("the rule itself: the test decides; no test, the interval decides", () => {
    const names = { interval: "CI", test: "t test" };
    assert.deepEqual(governedExcludesZero({ lower: 0.1, upper: 0.2 }, true, names), { excludes: true, disagreement: "" });
    assert.deepEqual(governedExcludesZero({ lower: -0.3, upper: -0.1 }, true, names), { excludes: true, disagreement: "" }); // below 0 excludes 0 too
    assert.deepEqual(governedExcludesZero({ lower: 0.1, upper: 0.2 }, null, names), { excludes: true, disagreement: "" });
    assert.deepEqual(governedExcludesZero({ lower: 0, upper: 0.2 }, undefined, names), { excludes: false, disagreement: "" });
    assert.deepEqual(governedExcludesZero({ lower: 0, upper: 0.2 }, true, names), {
      excludes: true,
      disagreement: "the CI includes 0 but the t test (which governs) rejects it",
    });
    assert.deepEqual(governedExcludesZero({ lower: 0.1, upper: 0.2 }, false, names), {
      excludes: false,
      disagreement: "the CI excludes 0 but the t test (which governs) does not reject it",
    });
  });
});
