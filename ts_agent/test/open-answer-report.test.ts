/**
 * Issue 45 item 2: report.md on an open-answer task (test/fixtures/tasks/capitals.jsonl: "What is
 * the capital of X? Reply with just the city name.", no label, graded by exact_match_lenient, which
 * needs no <answer> tag) misread it in eight places. Each section must ask whether the task is
 * closed-label or open-answer and which graders exist.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { create, toJsonString } from "@bufbuild/protobuf";

import { RunEventSchema, RunSchema, RunState } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { DEFAULT_EVAL_SETTINGS, settingsForTaskSet } from "../src/agent/eval/evaluate.js";
import { loadTaskSet } from "../src/agent/eval/task-set.js";
import { writeEvalLog } from "../src/agent/core/eval-log.js";
import { buildEvalLog } from "../src/agent/eval/build-eval-log.js";
import { writeReport } from "../src/agent/report/run-report.js";
import { attribute } from "../src/agent/report/attribution.js";
import { curveFeatures } from "../src/agent/report/curve-features.js";
import { testLookWords } from "../src/agent/eval/test-evals.js";
import { gradedResult } from "./helpers/eval-fixtures.js";
import { stubConfusionPlot } from "./helpers/plot-stub.js";

process.env.PY_TRAINER_BIN = new URL("./helpers/fake-py-trainer.sh", import.meta.url).pathname;
stubConfusionPlot();

export const CAPITALS = new URL("./fixtures/tasks/capitals.jsonl", import.meta.url).pathname;

function writeRun(dir: string) {
  mkdirSync(join(dir, "adapter"), { recursive: true });
  writeFileSync(join(dir, "reward-vs-step.png"), "png");
  writeFileSync(join(dir, "adapter", "adapter_config.json"), "{}");
  const run = create(RunSchema, {
    runId: "cap1",
    state: RunState.SUCCEEDED,
    request: {
      baseModel: "smollm2-135m-instruct",
      dataset: { source: { case: "jsonlPath", value: "capitals.jsonl" }, split: "train" },
      rewards: [{ name: "exact_match_lenient", weight: 1 }],
      grpo: { beta: 0.04, numGenerations: 8, learningRate: 1e-5, maxCompletionLength: 16 },
      runtime: { device: "cpu", precision: "fp32" },
    },
    result: { stepsCompleted: 10n, trainSeconds: 83, totalParams: 134_000_000n, trainableParams: 460_000n },
  });
  writeFileSync(join(dir, "run.json"), toJsonString(RunSchema, run, { prettySpaces: 2 }));
  const events = Array.from({ length: 10 }, (_, i) =>
    toJsonString(
      RunEventSchema,
      create(RunEventSchema, {
        seq: BigInt(i + 1),
        runId: "cap1",
        kind: { case: "trainStep", value: { step: BigInt(i + 1), maxSteps: 10n, metrics: { reward: 0.3 + 0.02 * i, kl: 0.01 } } },
      }),
    ),
  );
  writeFileSync(join(dir, "events.jsonl"), events.join("\n") + "\n");
}

function report() {
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const taskSet = loadTaskSet(CAPITALS, "test");
  const settings = settingsForTaskSet({ ...DEFAULT_EVAL_SETTINGS }, taskSet);
  // the base names the city on 12 of 30 tasks, the adapter on 20; plain text, never a tag
  const say = (k: number) => Object.fromEntries(taskSet.rows.map((r, i) => [r.id, [i < k ? r.answers[0] : "London"]]));
  writeRun(join(evalsDir, "runs", "cap1"));
  writeEvalLog(evalsDir, buildEvalLog("cap1", settings, taskSet, gradedResult(taskSet.rows, { base: say(12), adapter: say(20) }, settings.graders)));
  const { path, analysis } = writeReport(evalsDir, "cap1", new Date("2026-12-06T12:00:00Z"));
  return { evalsDir, md: readFileSync(path, "utf8"), analysis, settings };
}

describe("report.md on an open-answer task (issue 45)", () => {
  const r = report();

  test("the task file is open-answer, graded by exact_match_lenient alone (plus nothing else)", () => {
    assert.deepEqual(
      r.settings.graders.map((g) => g.name),
      ["exact_match_lenient"],
    );
  });

  test("the answer table reads the answers the grader reads (no tag needed), not '(none)' for every task", () => {
    assert.doesNotMatch(r.md, /\| \(none\) \| 30 \(100%\)/);
    assert.match(r.md, /\| london \| 18 \(60%\) \| 10 \(33%\) \|/);
  });

  test("no 'format failure' for a grader that needs no <answer> tag", () => {
    const fired = r.analysis.attribution.filter((x) => x.fired).map((x) => x.row.likelyCause);
    assert.ok(!fired.some((c) => c.startsWith("format failure")), fired.join("; "));
    assert.match(r.md, /needs no <answer> tag/);
  });

  test("grader agreement never compares a grader with itself: there is no second grader, and it says so", () => {
    assert.doesNotMatch(r.md, /exact_match_lenient vs exact_match_lenient/);
    assert.match(r.md, /no second grader/i);
  });

  test("no confusion-matrix.png is embedded or listed when none was drawn", () => {
    assert.ok(!existsSync(join(r.evalsDir, "runs", "cap1", "confusion-matrix.png")));
    assert.doesNotMatch(r.md, /confusion-matrix\.png/);
    assert.doesNotMatch(r.md, /confusion-matrix\.json/);
  });

  test("the cost table names the run's own rewards", () => {
    assert.doesNotMatch(r.md, /exact_match \+ format/);
    assert.match(r.md, /verifiable programmatic rewards \(exact_match_lenient\)/);
  });

  test("Pending says 'without --limit' only when a limit was used", () => {
    assert.doesNotMatch(r.md, /without --limit/);
    assert.match(r.md, /the eval covers 30 test tasks, every test task of the file/);
  });
});

test("an attribution row says 'CI includes 0' only when it does (the governing test may not reject while the CI excludes 0)", () => {
  const features = curveFeatures([]);
  const d = {
    heldOutRose: true,
    significant: false,
    text: "+18.5 pp (95% CI +3.4 to +33.6 pp), n=30",
    n: 30,
    meanDiff: 0.185,
    lower: 0.034,
    upper: 0.336,
    requiredN: 20,
  };
  const evidence = attribute(features, d)
    .map((x) => x.evidence)
    .join("\n");
  assert.doesNotMatch(evidence, /CI includes 0/);
  assert.match(evidence, /the governing test does not reject 0/);
  const inc = attribute(features, { ...d, lower: -0.02, text: "+18.5 pp (95% CI -2.0 to +33.6 pp), n=30" })
    .map((x) => x.evidence)
    .join("\n");
  assert.match(inc, /CI includes 0/);
});

test("`agent select` says '(the only look at test)' only when no eval looked before", () => {
  assert.equal(testLookWords([]), "(the only look at test)");
  const earlier = [{ date: "2026-12-06T10:00:00Z", command: "eval", runId: "cap1", step: 10, tasks: 30, taskSet: "capitals.jsonl" }];
  assert.equal(testLookWords(earlier), "(look 2 at test for this run: agent eval looked before; see test-evals.jsonl)");
});
