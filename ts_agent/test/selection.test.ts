/** Checkpoint selection without a sidecar: the rules (verdict/checkpoint-selection-rule.ts chooseCheckpoint), the
 *  validation rows a run did not train on, and the report: the selection section from
 *  selection.json, and the warning once the test split was looked at twice for a run. */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { accuracy } from "../src/agent/eval/grading.js";
import { readTestEvals, recordTestEval } from "../src/agent/eval/test-evals.js";
import { writeReport } from "../src/agent/report/run-report.js";
import { candidateSteps } from "../src/agent/checkpoint-selection/checkpoint-selection.js";
import { SELECTION_SVG, selectionSvg } from "../src/agent/report/checkpoint-selection-curve.js";
import { SELECTION_FILE, SELECTION_SCHEMA, chooseCheckpoint, trainedPrompts, validationRows } from "../src/agent/verdict/checkpoint-selection-rule.js";
import { RunResultSchema, RunState, TrainRequestSchema } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { runFolder } from "./helpers/run-folders.js";

/** n tasks, the first `ones` scored 1. */
function scores(n: number, ones: number): Map<string, number> {
  return new Map(Array.from({ length: n }, (_, i) => [`t${i}`, i < ones ? 1 : 0]));
}
const point = (step: number, s: Map<string, number>) => ({ step, scores: s, accuracy: accuracy(s.values()) });

test("last-unless-better keeps the last unless an earlier checkpoint beats it beyond its interval; best takes the highest mean", () => {
  // step 1 solves 30 of 40, the last (3) 10 of the same 40: McNemar rejects, step 1 is chosen
  const clear = [point(1, scores(40, 30)), point(2, scores(40, 12)), point(3, scores(40, 10))];
  const c = chooseCheckpoint("last-unless-better", clear);
  assert.equal(c.chosenStep, 1);
  assert.deepEqual(
    c.curve.map((p) => p.betterThanLast),
    [true, false, false],
  );
  assert.ok(c.curve[0].vsLast!.decision!.lower > 0);
  // one task apart: not beyond the interval, the last is kept, though step 1's mean is higher
  const close = [point(1, scores(40, 11)), point(2, scores(40, 10)), point(3, scores(40, 10))];
  const k = chooseCheckpoint("last-unless-better", close);
  assert.equal(k.chosenStep, 3);
  assert.match(k.why, /no earlier checkpoint is better than the last \(step 3\)/);
  assert.equal(chooseCheckpoint("best", close).chosenStep, 1);
  // a tie under best goes to the later step
  assert.equal(chooseCheckpoint("best", [point(1, scores(40, 10)), point(2, scores(40, 10))]).chosenStep, 2);
});

test("validation rows: train-split rows the run did not train on (the dataset's limit, less the held-out tail)", () => {
  const rows = Array.from({ length: 10 }, (_, i) => ({ id: `r${i}`, prompt: `p${i}`, answers: ["a"], split: "train" as const }));
  const inline = (n: number, extra: object) =>
    create(TrainRequestSchema, { dataset: { source: { case: "inline", value: { rows: rows.slice(0, n) } } }, ...extra });
  // 6 rows sent, the last 2 held out (not trained on): trained on p0..p3
  const a = trainedPrompts(inline(6, { heldOut: { numPrompts: 2 } }), null);
  assert.deepEqual([...a.trained].sort(), ["p0", "p1", "p2", "p3"]);
  assert.deepEqual(
    validationRows(rows, a.trained).map((r) => r.id),
    ["r4", "r5", "r6", "r7", "r8", "r9"],
  );
  // a dataset limit applies before the held-out tail
  const b = trainedPrompts(
    create(TrainRequestSchema, { dataset: { source: { case: "inline", value: { rows } }, limit: 5 }, heldOut: { numPrompts: 1 } }),
    null,
  );
  assert.equal(b.trained.size, 4);
  // held-out prompts from their own dataset: every dataset row is trained on
  const c = trainedPrompts(inline(10, { heldOut: { dataset: { source: { case: "inline", value: { rows: [] } } }, numPrompts: 2 } }), null);
  assert.equal(validationRows(rows, c.trained).length, 0);
  // a jsonl_path dataset: its split filter, then its limit
  const d = trainedPrompts(
    create(TrainRequestSchema, { dataset: { source: { case: "jsonlPath", value: "x.jsonl" }, split: "train", limit: 3 }, heldOut: { numPrompts: 1 } }),
    [{ prompt: "q", split: "test" }, ...rows],
  );
  assert.deepEqual([...d.trained].sort(), ["p0", "p1"]);
});

test("report: two evaluations of the same run on test produce the warning; one does not", () => {
  const { dir, run } = runFolder();
  recordTestEval(dir, { command: "eval", runId: "r1", step: 3, tasks: 8, taskSet: "tasks.jsonl" });
  writeReport(dir, "r1");
  assert.doesNotMatch(readFileSync(join(run, "report.md"), "utf8"), /looked at/);
  recordTestEval(dir, { command: "compare", runId: "r1", step: 3, tasks: 8, taskSet: "tasks.jsonl" });
  assert.deepEqual(
    readTestEvals(dir, "r1").map((r) => r.command),
    ["eval", "compare"],
  );
  writeReport(dir, "r1");
  const md = readFileSync(join(run, "report.md"), "utf8");
  assert.match(md, /## Checkpoint selection/);
  assert.match(md, /the test split was looked at 2 times for this run: a number chosen after looking is optimistic/);
  assert.match(md, /agent eval \(step 3\) on \d{4}-\d\d-\d\d, agent compare \(step 3\)/);
});

test("report: the selection section shows the validation curve, the rule, the chosen step and that test is untouched", () => {
  const { dir, run } = runFolder();
  const pts = [point(1, scores(40, 30)), point(2, scores(40, 12)), point(3, scores(40, 10))];
  const choice = chooseCheckpoint("last-unless-better", pts);
  const acc = (n: number, k: number) => accuracy(scores(n, k).values());
  writeFileSync(
    join(run, SELECTION_FILE),
    JSON.stringify({
      schema: SELECTION_SCHEMA,
      runId: "r1",
      date: "2026-12-02T00:00:00.000Z",
      rule: "last-unless-better",
      ruleText: "the last checkpoint, unless ...",
      validation: { taskSet: "tasks.jsonl", split: "train", n: 40, excluded: "the 20 train-split prompts the run trained on are excluded", base: acc(40, 5) },
      curve: choice.curve,
      chosenStep: choice.chosenStep,
      why: choice.why,
      test: { taskSet: "tasks.jsonl", n: 8, base: acc(8, 2), chosen: acc(8, 5), meanDiff: 0.375, decision: null },
    }),
  );
  writeReport(dir, "r1");
  assert.doesNotMatch(readFileSync(join(run, "report.md"), "utf8"), /selection-curve\.svg/);
  const svg = selectionSvg(JSON.parse(readFileSync(join(run, SELECTION_FILE), "utf8")));
  assert.equal(svg.match(/<circle /g)?.length, 4); // the base and 3 checkpoints
  assert.match(svg, /r="5" fill="#d62728"/);
  assert.match(svg, /chosen: step 1/);
  writeFileSync(join(run, SELECTION_SVG), svg);
  writeReport(dir, "r1");
  const md = readFileSync(join(run, "report.md"), "utf8");
  const sec = md.slice(md.indexOf("## Checkpoint selection"));
  assert.match(sec, /!\[validation exact match per checkpoint, the chosen one in red\]\(selection-curve\.svg\)/);
  assert.match(sec, /Rule: \*\*last-unless-better\*\*/);
  assert.match(sec, /\| 1 \| 75\.0% \(95% CI [\d.]+-[\d.]+%\) \| \+50\.0 pp \| .* \| yes \| \*\*chosen\*\* \|/);
  assert.match(sec, /\| 3 \| 25\.0% .* \| - \| - \| - \|/);
  assert.match(sec, /Chosen: \*\*step 1\*\*/);
  assert.match(sec, /base 25\.0% .*step 1 62\.5%/);
  assert.match(sec, /The test number is untouched by the choice: .*test was evaluated once, after selection\./);
  assert.doesNotMatch(sec, /looked at/);
});

test("the candidates: the checkpoints, plus a SUCCEEDED run's final adapter when it came after the last checkpoint", () => {
  const done = (state: RunState, steps: number) => ({ state, result: create(RunResultSchema, { stepsCompleted: BigInt(steps) }) });
  assert.deepEqual(candidateSteps([2, 3], done(RunState.SUCCEEDED, 3)), { steps: [2, 3], finalStep: null });
  assert.deepEqual(candidateSteps([2, 4], done(RunState.SUCCEEDED, 5)), { steps: [2, 4, 5], finalStep: 5 });
  assert.deepEqual(candidateSteps([2, 4], done(RunState.CANCELLED, 5)), { steps: [2, 4], finalStep: null });
});
