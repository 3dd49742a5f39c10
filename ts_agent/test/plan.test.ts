import assert from "node:assert/strict";
import { test } from "node:test";

import { planLines, planMilestone } from "../src/agent/verdict/milestone-plan.js";

test("agent plan: required n and MDE for +5 pp under both error-overlap models, per split", () => {
  const p = planMilestone(
    0.117,
    [
      { split: "test", n: 264 },
      { split: "test_heldout_template", n: 240 },
    ],
    "baseline.json",
  );
  const [conv, ind] = p.scenarios;
  assert.equal(conv.model, "conversions");
  assert.ok(Math.abs(conv.sdDiff - Math.sqrt(0.05 - 0.0025)) < 1e-12);
  assert.equal(conv.requiredN, 150); // ((1.96 + 0.8416) * 0.2179 / 0.05)^2 = 149.1
  assert.ok(ind.requiredN > 700 && ind.requiredN < 800);
  // P(PASS | true +5 pp) is simulated through the real gate, and is below 0.8 at any n: never "can detect it"
  assert.ok(conv.bySplit[0].pPass > 0.3 && conv.bySplit[0].pPass < 0.6, String(conv.bySplit[0].pPass));
  assert.equal(conv.bySplit[0].detectable, false);
  assert.equal(ind.bySplit[0].detectable, false);
  assert.ok(Math.abs(ind.bySplit[0].mde - 0.085) < 0.001);
  const lines = planLines(p).join("\n");
  assert.match(lines, /required n = 150 \(the milestone's floor is 200\)/);
  assert.match(lines, /P\(PASS \| true \+5 pp\) = 0\.\d\d, P\(CONFIRMED\) = 0\.\d\d \(simulated\)/);
  assert.match(lines, /verdict: no n gets P\(PASS \| true \+5 pp\) to 0\.8/);
  assert.match(lines, /P\(PASS\) reaches 0\.8 from a true \+\d+\.\d pp at this n \(normal approximation\)/);
});

test("agent plan: 'can detect it' only where P(PASS | true +5 pp) >= 0.8 (was: 'P(PASS) = 0.50: can detect it')", () => {
  const p = planMilestone(
    0.117,
    [
      { split: "test", n: 264 },
      { split: "test_heldout_template", n: 240 },
    ],
    "baseline.json",
  );
  for (const line of planLines(p)) {
    const m = /P\(PASS \| true \+5 pp\) = (\d\.\d\d)/.exec(line);
    if (m && Number(m[1]) < 0.8) assert.doesNotMatch(line, /can detect it/, line);
  }
});

test("agent plan: a split below the milestone's 200 tasks is never called able to detect it", () => {
  const p = planMilestone(0.3, [{ split: "test", n: 150 }], "x");
  assert.ok(p.scenarios.every((s) => !s.bySplit[0].detectable));
  assert.match(planLines(p).join("\n"), /too small for the milestone/);
});
