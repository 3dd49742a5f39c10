/**
 * Issue 45 item 6: report.md shows sample completions base -> adapter (what TRL's completions table
 * and lm-eval's --log_samples give): for a few test tasks chosen deterministically (won, lost, same
 * grade), the prompt, the expected answer, each variant's completion verbatim (fenced, cut at a
 * sane length with the cut said) and its grades. True for an open-answer task file (capitals: no
 * tag, no label) and a closed-label one (the AML file: <answer>label</answer>) alike.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { create, toJsonString } from "@bufbuild/protobuf";

import { RunSchema, RunState } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { DEFAULT_EVAL_SETTINGS, settingsForTaskSet } from "../src/agent/eval/evaluate.js";
import { loadTaskSet, type TaskSet } from "../src/agent/eval/task-set.js";
import { writeEvalLog, type EvalSettings } from "../src/agent/core/eval-log.js";
import { buildEvalLog } from "../src/agent/eval/build-eval-log.js";
import { REPO_ROOT } from "../src/agent/workspace.js";
import { writeReport } from "../src/agent/report/run-report.js";
import { writeEvalReport } from "../src/agent/report/eval-report.js";
import { gradedResult } from "./helpers/eval-fixtures.js";
import { stubConfusionPlot } from "./helpers/plot-stub.js";

process.env.PY_TRAINER_BIN = new URL("./helpers/fake-py-trainer.sh", import.meta.url).pathname;
stubConfusionPlot();

const CAPITALS = new URL("./fixtures/tasks/capitals.jsonl", import.meta.url).pathname;
const AML = join(REPO_ROOT, "agent-evals", "tasks", "aml_typology.jsonl");

/** The eval's result: each variant's one completion per task, `say(task index)`, graded by the TS graders. */
function graded(taskSet: TaskSet, settings: EvalSettings, completions: Record<string, (i: number) => string>) {
  const byTask = (say: (i: number) => string) => Object.fromEntries(taskSet.rows.map((r, i) => [r.id, [say(i)]]));
  return gradedResult(taskSet.rows, Object.fromEntries(Object.entries(completions).map(([name, say]) => [name, byTask(say)])), settings.graders);
}

function writeRun(dir: string, runId: string) {
  mkdirSync(join(dir, "adapter"), { recursive: true });
  writeFileSync(join(dir, "adapter", "adapter_config.json"), "{}");
  const run = create(RunSchema, {
    runId,
    state: RunState.SUCCEEDED,
    request: {
      baseModel: "",
      grpo: { beta: 0.04, numGenerations: 8, learningRate: 1e-5, maxCompletionLength: 16 },
      runtime: { device: "cpu", precision: "fp32" },
    },
    result: { stepsCompleted: 10n, trainSeconds: 8, totalParams: 1_000_000n, trainableParams: 5_000n },
  });
  writeFileSync(join(dir, "run.json"), toJsonString(RunSchema, run, { prettySpaces: 2 }));
}

function reportOn(taskSet: TaskSet, completions: Record<string, (i: number) => string>, runId = "r1") {
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const settings = settingsForTaskSet({ ...DEFAULT_EVAL_SETTINGS }, taskSet);
  writeRun(join(evalsDir, "runs", runId), runId);
  writeEvalLog(evalsDir, buildEvalLog(runId, settings, taskSet, graded(taskSet, settings, completions)));
  const { path } = writeReport(evalsDir, runId, new Date("2026-12-06T12:00:00Z"));
  return { evalsDir, md: readFileSync(path, "utf8"), settings };
}

/** The report's section, from its heading to the next "## ". */
function section(md: string): string {
  const start = md.indexOf("## Sample completions");
  assert.ok(start >= 0, "no '## Sample completions' section in report.md");
  const end = md.indexOf("\n## ", start + 3);
  return md.slice(start, end < 0 ? undefined : end);
}

describe("sample completions on an open-answer task (capitals: no tag, no label)", () => {
  const taskSet = loadTaskSet(CAPITALS, "test");
  const right = (i: number) => taskSet.rows[i].answers[0];
  // base right on tasks 0-11, the adapter on 5-19: won 12-19, lost 0-4; 25-29 both wrong in other words
  const r = reportOn(taskSet, {
    base: (i) => (i < 12 ? right(i) : "London"),
    adapter: (i) => (i >= 5 && i < 20 ? right(i) : i >= 25 ? "Madrid, I think" : "London"),
  });
  const s = section(r.md);

  test("two tasks the adapter won, two it lost, one whose grade stayed: the biggest changes first, then file order", () => {
    const heads = [...s.matchAll(/^### (.+)$/gm)].map((m) => m[1]);
    assert.deepEqual(heads, [
      `Won by the adapter: ${taskSet.rows[12].id}`,
      `Won by the adapter: ${taskSet.rows[13].id}`,
      `Lost by the adapter: ${taskSet.rows[0].id}`,
      `Lost by the adapter: ${taskSet.rows[1].id}`,
      // among same-grade tasks, one whose text training changed comes first
      `Same grade, different text: ${taskSet.rows[25].id}`,
    ]);
  });

  test("each shows the prompt, the expected answer, both completions verbatim and each grade", () => {
    const won = s.slice(s.indexOf(`### Won by the adapter: ${taskSet.rows[12].id}`), s.indexOf(`### Won by the adapter: ${taskSet.rows[13].id}`));
    assert.ok(won.includes("```text\n" + taskSet.rows[12].prompt + "\n```"), won);
    assert.match(won, new RegExp(`Expected: \`${right(12)}\``));
    assert.ok(won.includes("Base — exact_match_lenient 0:\n\n```text\nLondon\n```"), won);
    assert.ok(won.includes(`Adapter — exact_match_lenient 1:\n\n\`\`\`text\n${right(12)}\n\`\`\``), won);
    assert.doesNotMatch(s, /<answer>/);
  });

  test("the choice is deterministic: the same eval gives the same section", () => {
    const again = reportOn(taskSet, {
      base: (i) => (i < 12 ? right(i) : "London"),
      adapter: (i) => (i >= 5 && i < 20 ? right(i) : i >= 25 ? "Madrid, I think" : "London"),
    });
    assert.equal(section(again.md), s);
  });

  test("the section says how the tasks were chosen and which grader decides", () => {
    assert.match(s, /8 won, 5 lost, 17 with the same grade/);
    assert.match(s, /primary grader `exact_match_lenient`/);
  });
});

describe("sample completions on a closed-label task (the AML file: <answer>label</answer>)", () => {
  const taskSet = loadTaskSet(AML, "test", 40);
  const label = (i: number) => taskSet.rows[i].label!;
  const other = (i: number) => (label(i) === "layering" ? "smurfing" : "layering");
  const long = "I think ``` this is\n" + "x".repeat(2000) + "\n<answer>layering</answer>";
  const r = reportOn(taskSet, {
    base: (i) => (i % 2 === 0 ? `<answer>${label(i)}</answer>` : `<answer>${other(i)}</answer>`),
    adapter: (i) => (i === 1 ? long : `<answer>${label(i)}</answer>`),
  });
  const s = section(r.md);

  test("the tagged completion is shown verbatim, the label as expected answer, every grader's grade", () => {
    assert.match(s, new RegExp(`### Won by the adapter: ${taskSet.rows[3].id}`));
    assert.match(s, new RegExp(`Expected: \`${label(3)}\` \\(label`));
    assert.ok(s.includes("```text\n<answer>" + label(3) + "</answer>\n```"), s);
    assert.match(s, /Adapter — exact_match 1, exact_match_lenient 1, format 1:/);
    // a prompt of several lines stays whole inside its fence
    assert.ok(s.includes("```text\n" + taskSet.rows[3].prompt + "\n```"));
  });

  test("a long completion holding a backtick fence is fenced by a longer fence and cut, the cut said", () => {
    assert.match(s, new RegExp(`### Won by the adapter: ${taskSet.rows[1].id}`));
    assert.ok(s.includes("````text\nI think ``` this is\n"), s);
    assert.match(s, /\n````\n_cut at 800 of 2046 characters_/);
    assert.ok(!s.includes("x".repeat(900)));
  });

  test("no task lost: the section says so instead of inventing one", () => {
    assert.match(s, /### Lost by the adapter\n\n\(none: the adapter lost no task\)/);
  });
});

test("a task file that changed since the eval: the prompt is not shown, and the section says why", () => {
  const tmp = mkdtempSync(join(tmpdir(), "tasks-"));
  const file = join(tmp, "capitals.jsonl");
  writeFileSync(file, readFileSync(CAPITALS, "utf8"));
  writeFileSync(file.replace(/\.jsonl$/, ".meta.json"), readFileSync(CAPITALS.replace(/\.jsonl$/, ".meta.json"), "utf8"));
  const taskSet = loadTaskSet(file, "test");
  const right = (i: number) => taskSet.rows[i].answers[0];
  const completions = { base: (i: number) => (i < 3 ? right(i) : "London"), adapter: (i: number) => (i < 6 ? right(i) : "London") };
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const settings = settingsForTaskSet({ ...DEFAULT_EVAL_SETTINGS }, taskSet);
  writeRun(join(evalsDir, "runs", "r1"), "r1");
  writeEvalLog(evalsDir, buildEvalLog("r1", settings, taskSet, graded(taskSet, settings, completions)));
  writeFileSync(file, readFileSync(CAPITALS, "utf8").replace("France", "Frankreich"));
  const md = readFileSync(writeReport(evalsDir, "r1").path, "utf8");
  const s = section(md);
  assert.match(s, /prompts not shown: .*capitals\.jsonl changed since the eval \(sha256 [0-9a-f]{12}, the eval's [0-9a-f]{12}\)/);
  assert.match(s, new RegExp(`### Won by the adapter: ${taskSet.rows[3].id}`));
});

test("an adapter given by path (agent eval --adapter): its report.md has the section too", () => {
  const taskSet = loadTaskSet(CAPITALS, "test");
  const right = (i: number) => taskSet.rows[i].answers[0];
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const settings = settingsForTaskSet({ ...DEFAULT_EVAL_SETTINGS }, taskSet);
  const evalPath = writeEvalLog(
    evalsDir,
    buildEvalLog("my-adapter", settings, taskSet, graded(taskSet, settings, { base: () => "London", adapter: (i) => right(i) })),
  );
  const md = readFileSync(writeEvalReport(evalsDir, evalPath).path, "utf8");
  assert.match(section(md), new RegExp(`### Won by the adapter: ${taskSet.rows[0].id}`));
});
