// agent demo's last advice names how THIS recipe replicates: the default request's 10-seed sweep is
// in docs/demo.md, but a --config / --tasks demo (make demo-real) has its own request and task file,
// and the advice must name them (it pointed at docs/demo.md's AML sweep for the real-model demo).
import assert from "node:assert/strict";
import { test } from "node:test";

import { replicateLine } from "../src/commands/demo.js";

test("the default demo points at docs/demo.md's sweep", () => {
  assert.equal(
    replicateLine(1n, {}),
    "[demo] this verdict is one draw of the training randomness (seed 1 on this machine); how the recipe replicates: agent sweep --seeds 10, or make bench-seeds (docs/demo.md has this recipe's 10-seed sweep)",
  );
});

test("a --config / --tasks demo names its own request and task file", () => {
  const line = replicateLine(1n, { config: "agent-evals/demo-real-request.json", tasks: "agent-evals/tasks/arithmetic_chat.jsonl" });
  assert.match(line, /agent sweep --config agent-evals\/demo-real-request\.json --tasks agent-evals\/tasks\/arithmetic_chat\.jsonl --seeds 5/);
  assert.match(line, /scripts\/bench_seeds\.py --config agent-evals\/demo-real-request\.json --tasks agent-evals\/tasks\/arithmetic_chat\.jsonl --seeds 5/);
  assert.doesNotMatch(line, /docs\/demo\.md/);
});
