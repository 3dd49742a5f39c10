/**
 * The reward criterion's "excludes 0" is decided by a deterministic test on the per-prompt
 * end - start (verdict/held-out-reward.ts heldOutTest), not by the seeded bootstrap CI of the relative
 * change, which only describes it (issue 21).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { RunSchema, RunState } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { judgeReward } from "../src/agent/verdict/milestone.js";
import { heldOutTest, rewardEvidence } from "../src/agent/verdict/held-out-reward.js";

// 64 prompts x 4 samples, correct samples per prompt at step 0 and at the end: +28.1%. With the
// bootstrap deciding, grpo.seed 0-19 gave PASS 8 times and INCONCLUSIVE 12 times (the lower bound
// lands on 0 on discrete data).
const START = "2100022221100000210221000130330001100001122031101100103011002102";
const END = "0321020312100200312130001112320032000002222222001110102001113203";
const scores = (s: string) => [...s].map((c) => Number(c) / 4);

function run(seed: number, start = scores(START), end = scores(END)) {
  const mean = (xs: number[]) => xs.filter(Number.isFinite).reduce((a, b) => a + b, 0) / xs.filter(Number.isFinite).length;
  return create(RunSchema, {
    runId: `seed${seed}`,
    state: RunState.SUCCEEDED,
    request: { grpo: { seed: BigInt(seed) } },
    result: {
      startReward: { mean: mean(start), perPrompt: start, numPrompts: start.length, samplesPerPrompt: 4 },
      endReward: { mean: mean(end), perPrompt: end, numPrompts: end.length, samplesPerPrompt: 4 },
    },
  });
}

describe("the reward criterion's test", () => {
  test("one fixed set of 64 x 4 scores at +28%: one verdict for every training seed 0-19", () => {
    const verdicts = new Set<string>();
    const bootstrapSaysExcludes = new Set<boolean>();
    for (let seed = 0; seed < 20; seed++) {
      const e = rewardEvidence(run(seed))!;
      verdicts.add(judgeReward(e).verdict);
      bootstrapSaysExcludes.add(e.relativeChangeCiLow > 0);
    }
    assert.deepEqual([...bootstrapSaysExcludes].sort(), [false, true], "the bootstrap CI still moves with the seed (it describes)");
    assert.equal(verdicts.size, 1, [...verdicts].join(", "));
    const t = heldOutTest(run(0).result!)!;
    assert.equal(t.test, "paired t test");
    assert.equal(t.n, 64);
    assert.match(judgeReward(rewardEvidence(run(0))!).reason, /paired t test on the per-prompt end - start p=/);
  });

  test("differences with no spread: the exact sign test, not a t test's p = 0", () => {
    const start = Array(20).fill(0.25);
    const t = heldOutTest(
      run(
        0,
        start,
        start.map((x) => x + 0.25),
      ).result!,
    )!;
    assert.equal(t.test, "exact sign test");
    assert.equal(t.p, 2 / 2 ** 20);
    const two = heldOutTest(run(0, [0, 0], [0.5, 0.5]).result!)!;
    assert.equal(two.p, 0.5);
    assert.equal(two.rejects, false);
  });

  test("the minimum held-out size counts scorable prompts (a score at both ends)", () => {
    const start = scores(START).map((x, i) => (i < 50 ? NaN : x));
    const e = rewardEvidence(run(0, start, scores(END)))!;
    assert.equal(e.scorablePrompts, 14);
    const r = judgeReward(e);
    assert.equal(r.verdict, "INCONCLUSIVE");
    assert.match(r.reason, /64 prompts \(14 scorable\) x 4: too few scorable prompts/);
  });
});
