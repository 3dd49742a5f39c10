/** test-evals.jsonl from `agent compare` (issue 23): one Evaluate of two runs on the test split is
 *  one look at test for each run, appended to each run's counter; against an in-process fake
 *  sidecar whose Evaluate answers every completion empty (scored 0 by every grader, as TS re-grades). */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { readTestEvals, recordTestEval } from "../src/agent/eval/test-evals.js";
import { agentAsync, startFakeSidecar } from "./helpers/fake-sidecar.js";

test("agent compare appends one test look to each compared run's test-evals.jsonl", { timeout: 120_000 }, async () => {
  const fake = await startFakeSidecar({
    async *evaluate(req) {
      const rows = req.tasks?.source.case === "inline" ? req.tasks.source.value.rows : [];
      const names = ["base", ...req.adapters.map((a) => a.name)];
      yield {
        kind: {
          case: "result",
          value: {
            baseModel: "/x/tiny-aml-qwen2",
            variants: names.map((name) => ({
              name,
              tasks: rows.map((r) => ({ taskId: r.id, samples: [{ completion: "", scores: { exact_match: 0, exact_match_lenient: 0, format: 0 } }] })),
            })),
            adapters: req.adapters.map((a) => ({ name: a.name, runId: a.source.case === "runId" ? a.source.value : "", sha256: "ab", step: 2n })),
          },
        },
      };
    },
  });
  try {
    const dir = mkdtempSync(join(tmpdir(), "evals-count-"));
    for (const id of ["a", "b"]) {
      // the runs' own records (AML rows on the default base): compare takes task file and base from them
      mkdirSync(join(dir, "runs", id), { recursive: true });
      writeFileSync(join(dir, "runs", id, "run.json"), JSON.stringify({ runId: id, state: "RUN_STATE_SUCCEEDED", request: { runId: id } }));
    }
    recordTestEval(dir, { command: "eval", runId: "a", step: 2, tasks: 4, taskSet: "t.jsonl" });
    const r = await agentAsync(["compare", "a", "b", "--limit", "4", "--id", "c1", "--evals-dir", dir, "--address", fake.address]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.deepEqual(fake.calls, ["evaluate"]);
    assert.deepEqual(
      readTestEvals(dir, "a").map((x) => [x.command, x.step, x.tasks]),
      [
        ["eval", 2, 4],
        ["compare", 2, 4],
      ],
    );
    assert.deepEqual(
      readTestEvals(dir, "b").map((x) => [x.command, x.step, x.tasks]),
      [["compare", 2, 4]],
    );
  } finally {
    await fake.close();
  }
});
