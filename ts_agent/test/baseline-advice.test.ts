/** Issue 32, items 1 and 6: a verdict GATED on a missing baseline.json advised `agent baseline
 *  set`, which evaluates the AML file on the AML model, for a run of another task file (a
 *  ranked-preference run on its own groups too). The advice names the run's own task file and,
 *  when it is not that file's embedded model, its base. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { baselineSetCommand, judgeMilestone } from "../src/agent/verdict/milestone.js";

test("the gated reason's command is the run's own baseline", () => {
  const v = judgeMilestone({
    reward: null,
    rewardNotApplicable: "preference",
    downstream: null,
    baseline: { status: "missing" },
    baselineCommand: baselineSetCommand("mytasks/animals.jsonl", "embedded:mytasks/animals.jsonl"),
  });
  assert.match(v.reason, /run `agent baseline set --tasks mytasks\/animals\.jsonl`/);
  assert.equal(baselineSetCommand("mytasks/animals.jsonl", "org/model"), "agent baseline set --tasks mytasks/animals.jsonl --base-model org/model");
  assert.equal(baselineSetCommand("agent-evals/tasks/aml_typology.jsonl", ""), "agent baseline set");
});
