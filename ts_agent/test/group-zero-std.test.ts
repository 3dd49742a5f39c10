/**
 * Issue 29, item 2, the report's half: the attribution reads the sidecar's per-group share of
 * groups with no within-group reward variance (frac_reward_zero_std_group, py_trainer
 * train_grpo.GroupZeroStd) when a step logged it, not TRL's batch-wide reward_std: groups that are
 * each constant at different levels carry no signal though the batch std is large, and a per-group
 * sd of 2e-5 is real variance the batch tolerance (1e-4 x the reward) called zero.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { effectiveZeroStd } from "../src/agent/report/thresholds.js";

test("effectiveZeroStd prefers the sidecar's per-group share", () => {
  // TRL's batch figures say variance; 15 of 16 groups are constant
  assert.equal(effectiveZeroStd({ reward: 0.45, reward_std: 0.25, frac_reward_zero_std: 0, frac_reward_zero_std_group: 15 / 16 }), 15 / 16);
  // real small variance inside groups: not zero std, whatever the batch tolerance says
  assert.equal(effectiveZeroStd({ reward: 0.5, reward_std: 2e-5, frac_reward_zero_std: 0, frac_reward_zero_std_group: 0 }), 0);
  // a step logged without it (older runs): the batch-wide fallback as before
  assert.equal(effectiveZeroStd({ reward: 0.2, reward_std: 1.5e-8, frac_reward_zero_std: 0 }), 1);
});

test("a run whose every step had only flat groups says so at the top of its report, whatever its state (issue 53 item 1)", async () => {
  const { noSignalWarning } = await import("../src/agent/report/sections/overview-section.js");
  const flat = [1, 2, 3].map((step) => ({ step, metrics: { reward: 0, reward_std: 0, frac_reward_zero_std: 1 } }));
  assert.match(noSignalWarning(flat), /^\*\*No signal: in every one of the 3 logged steps every group's rewards were equal/);
  // one step with a spread, or nothing logged: no warning
  assert.equal(noSignalWarning([...flat, { step: 4, metrics: { reward: 0.5, reward_std: 0.3, frac_reward_zero_std: 0.5 } }]), "");
  assert.equal(noSignalWarning([]), "");
});
