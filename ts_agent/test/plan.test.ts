import assert from "node:assert/strict";
import { test } from "node:test";

import { planLines, planMilestone } from "../src/commands/plan.js";

test("agent plan: required n and MDE for +5 pp under both error-overlap models, per split", () => {
  const p = planMilestone(0.117, [{ split: "test", n: 264 }, { split: "test_heldout_template", n: 240 }], "baseline.json");
  const [conv, ind] = p.scenarios;
  assert.equal(conv.model, "conversions");
  assert.ok(Math.abs(conv.sdDiff - Math.sqrt(0.05 - 0.0025)) < 1e-12);
  assert.equal(conv.requiredN, 150); // ((1.96 + 0.8416) * 0.2179 / 0.05)^2 = 149.1
  assert.ok(ind.requiredN > 700 && ind.requiredN < 800);
  assert.equal(conv.bySplit[0].detectable, true);
  assert.equal(ind.bySplit[0].detectable, false);
  assert.ok(Math.abs(ind.bySplit[0].mde - 0.085) < 0.001);
  const lines = planLines(p).join("\n");
  assert.match(lines, /required n = 150 \(the milestone's floor is 200\)/);
  assert.match(lines, /verdict: the test split can detect \+5 pp only if/);
  assert.match(lines, /P\(PASS \| true \+5 pp\) = 0\.50/);
});

test("agent plan: a split below the milestone's 200 tasks is never called able to detect it", () => {
  const p = planMilestone(0.3, [{ split: "test", n: 150 }], "x");
  assert.ok(p.scenarios.every((s) => !s.bySplit[0].detectable));
  assert.match(planLines(p).join("\n"), /too small to detect/);
});
