// A task file names its graders (issue 27: the real-model recipe's arithmetic_chat.jsonl is graded by
// final_number_match, the answer after the last "=", since SmolLM2-135M-Instruct never writes the
// <answer> tag exact_match requires). The first grader the metadata names is the primary one: the
// per-task scores the verdict compares, the accuracy, pass@k, the fingerprint's grader.
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";

import { DEFAULT_EVAL_SETTINGS, checkSettings, settingsForTaskSet, type VariantScores } from "../src/agent/eval/evaluate.js";
import { buildFingerprint } from "../src/agent/eval/fingerprint.js";
import { summarizeVariant } from "../src/agent/eval/grading.js";
import { loadTaskSet, taskSetRef } from "../src/agent/eval/task-set.js";
import { UserError } from "../src/agent/workspace.js";
import { REPO } from "./helpers/sidecar.js";

const CHAT = join(REPO, "agent-evals", "tasks", "arithmetic_chat.jsonl");

test("arithmetic_chat.jsonl's metadata makes final_number_match the primary grader", () => {
  const ts = loadTaskSet(CHAT, "test");
  assert.equal(ts.rows.length, 200);
  assert.deepEqual(ts.format?.graders, ["final_number_match", "exact_match_lenient", "stops_after_answer", "exact_match"]);
  const s = settingsForTaskSet({ ...DEFAULT_EVAL_SETTINGS }, ts);
  assert.deepEqual(
    s.graders.map((g) => g.name),
    ["final_number_match", "exact_match_lenient", "stops_after_answer", "exact_match"],
  );
  checkSettings(s);
  const fp = buildFingerprint({
    settings: s,
    taskSet: taskSetRef(ts),
    taskIds: ts.rows.map((r) => r.id),
    model: { requested: "smollm2-135m-instruct", resolved: null },
  });
  assert.equal(fp.grader, 'final_number_match (tag="answer")');
});

test("a file without graders keeps the defaults; the lenient grader is added when a file omits it", () => {
  const aml = loadTaskSet(join(REPO, "agent-evals", "tasks", "arithmetic.jsonl"), "test");
  const d = { ...DEFAULT_EVAL_SETTINGS };
  assert.equal(settingsForTaskSet(d, aml), d);
  const own = settingsForTaskSet(d, { path: aml.path, format: { ...aml.format!, graders: ["final_number_match"] } });
  assert.deepEqual(
    own.graders.map((g) => g.name),
    ["final_number_match", "exact_match_lenient"],
  );
  assert.throws(
    () => settingsForTaskSet(d, { path: "tasks/x.jsonl", format: { ...aml.format!, graders: ["bleu"] } }),
    (e) => e instanceof UserError && /^tasks\/x\.meta\.json: field "graders": unknown grader "bleu" \(known: exact_match, /.test(e.message),
  );
});

test("the summary's per-task scores, accuracy and pass@k come from the first grader", () => {
  const v: VariantScores = {
    name: "base",
    tasks: [
      { taskId: "a", samples: [{ completion: "12 + 7 = 19", scores: { final_number_match: 1, exact_match: 0, exact_match_lenient: 1 } }] },
      { taskId: "b", samples: [{ completion: "3 + 4 = 8", scores: { final_number_match: 0, exact_match: 0, exact_match_lenient: 0 } }] },
    ],
  };
  const own = summarizeVariant(v, [{ name: "final_number_match" }, { name: "exact_match_lenient" }, { name: "exact_match" }]);
  assert.deepEqual(own.perTask, { a: 1, b: 0 });
  assert.equal(own.accuracy?.estimate, 0.5);
  const dflt = summarizeVariant(v, DEFAULT_EVAL_SETTINGS.graders);
  assert.deepEqual(dflt.perTask, { a: 0, b: 0 });
});

test("agent eval's summary line names the primary grader, not always exact_match", async () => {
  const { evalSummaryLines } = await import("../src/pipeline/evaluate-adapter.js");
  const log = {
    settings: { ...DEFAULT_EVAL_SETTINGS, graders: [{ name: "final_number_match" }, { name: "exact_match_lenient" }] },
    variants: [{ name: "base", accuracy: { estimate: 0.29, lower: 0.232, upper: 0.356, n: 200, method: "wilson" } }],
  } as unknown as Parameters<typeof evalSummaryLines>[0];
  const [line] = evalSummaryLines(log, { comparison: null, baselineMatch: { status: "missing" }, splits: [] } as unknown as Parameters<
    typeof evalSummaryLines
  >[1]);
  assert.equal(line, "base     final_number_match 29.0% (95% CI 23.2-35.6%) on 200 tasks");
});
