// The real-model rewards (issue 27): final_number_match reads the ANSWER where a chat model puts it
// (the <answer> tag, else the number after the last "=", else a bare number), never the echoed
// question; stops_after_answer pays a completion that is just an answer and ends there. The same
// cases as tests/test_answer_rewards.py; exact equality with Python is the parity vectors' job.
import { test } from "node:test";
import assert from "node:assert/strict";

import { RewardInputError } from "../src/agent/core/answer-text.js";
import { buildReward, finalNumberMatchReward, rewardNames, stopsAfterAnswerReward } from "../src/agent/core/task-rewards.js";

const GOLD = ["68"];

test("final_number_match reads the answer, not the echo", () => {
  const cases: Array<[string, number]> = [
    ["23 + 45 = 68", 1], // the echoed equation: its result is the answer
    ["23 + 45 = 68.", 1],
    ["68", 1], // a bare number
    [" 68.\n", 1],
    ["<answer>68</answer>", 1],
    ["<answer> 68 </answer> because 23 + 45 = 70", 1], // the tag wins over any "="
    ["<answer>70</answer> 23 + 45 = 68", 0],
    ["23 + 45 = 78", 0], // wrong result
    ["23 + 45 = 68\n\n10 + 3 = 13", 0], // ran on: the last "=" is another sum's
    ["What is 23 + 45? 68 is it", 0], // neither a tag, an "=" nor a bare number
    ["23 + 68", 0], // the first number (echo) never counts
    ["= 6.8", 0], // a decimal is not the integer 6
    ["x = 680", 0],
    ["23 + 45 = -68", 0],
    ["", 0],
  ];
  for (const [c, want] of cases) assert.equal(finalNumberMatchReward(c, GOLD), want, JSON.stringify(c));
});

test("final_number_match: negatives, gold trimming, no gold answer", () => {
  assert.equal(finalNumberMatchReward("19 - 20 = -1", ["-1"]), 1);
  assert.equal(finalNumberMatchReward("19 - 20 = 1", ["-1"]), 0);
  assert.equal(finalNumberMatchReward("-1", [" -1 "]), 1);
  assert.throws(
    () => finalNumberMatchReward("1", ["", "  "]),
    (e) => e instanceof RewardInputError && e.kind === "empty",
  );
});

test("stops_after_answer pays only a completion that is just an answer", () => {
  const cases: Array<[string, number]> = [
    ["68", 1],
    ["68.", 1],
    ["  -3\n", 1],
    ["<answer>68</answer>", 1],
    ["23 + 45 = 68", 1],
    ["23 + 45 = 78", 1], // stopping is paid whether or not it is right
    ["(2 + 3) * 4 = 20.", 1],
    ["23 + 45 = 68\n\n10 + 3 = 13", 0], // ran on
    ["23 + 45 = 68. The answer is 68.", 0],
    ["The answer is 68", 0],
    ["23 + 45 =", 0], // cut before the result
    ["", 0],
    ["<answer>68</answer> done", 0],
  ];
  for (const [c, want] of cases) assert.equal(stopsAfterAnswerReward(c), want, JSON.stringify(c));
});

test("the registry has both, with their params", () => {
  for (const name of ["final_number_match", "stops_after_answer"]) assert.ok(rewardNames().includes(name), name);
  const b = buildReward({ name: "final_number_match" });
  assert.deepEqual(b.params, { tag: "answer" });
  assert.equal(b.score("23 + 45 = 68", ["68"]), 1);
  assert.equal(b.score("23 + 45 = 68", [""]), null); // no usable gold answer: unscorable
  const s = buildReward({ name: "stops_after_answer", weight: 0.5 });
  assert.deepEqual(s.params, { tag: "answer" });
  assert.equal(s.weight, 0.5);
  assert.equal(s.score("23 + 45 = 68", ["1"]), 1);
  assert.equal(buildReward({ name: "final_number_match", params: { tag: "final" } }).score("<final>68</final>", ["68"]), 1);
  assert.throws(
    () => buildReward({ name: "stops_after_answer", params: { match: "exact" } }),
    (e) => e instanceof RewardInputError && e.kind === "unknown_param",
  );
});
