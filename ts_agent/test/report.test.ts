import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { create, toJsonString } from "@bufbuild/protobuf";

import { RunEventSchema, RunSchema, RunState } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { buildBaseline, writeBaseline } from "../src/agent/eval/baseline-record.js";
import { DEFAULT_EVAL_SETTINGS } from "../src/agent/eval/evaluate.js";
import { summarizeVariant } from "../src/agent/eval/grading.js";
import { type TaskSet } from "../src/agent/eval/task-set.js";
import { writeEvalLog } from "../src/agent/core/eval-log.js";
import { buildEvalLog } from "../src/agent/eval/build-eval-log.js";
import { mulberry32 } from "../src/task-sets/task-rng.js";
import type { TaskRow } from "../src/agent/core/task-format.js";
import { writeReport } from "../src/agent/report/run-report.js";
import { RESOLVED_MODEL, gradedResult, row } from "./helpers/eval-fixtures.js";
import { stubConfusionPlot } from "./helpers/plot-stub.js";

// Reports here are not about the confusion-matrix figure: an in-process stand-in draws it (the
// real `py-trainer plot confusion` is tested in tests/test_plot_confusion.py and report-e2e.test.ts).
process.env.PY_TRAINER_BIN = new URL("./helpers/fake-py-trainer.sh", import.meta.url).pathname;
stubConfusionPlot();

const LABELS = ["structuring", "smurfing", "layering", "money_mule"];
const settings = { ...DEFAULT_EVAL_SETTINGS };

/** n test tasks; base right with probability pBase, adapter with pAdapter (seeded). */
function scenario(n: number, pBase: number, pAdapter: number) {
  const rand = mulberry32(11);
  const rows: TaskRow[] = Array.from({ length: n }, (_, i) => row(`t${String(i).padStart(4, "0")}`, LABELS[i % 4]));
  const answer = (r: TaskRow, right: boolean) => [`<answer>${right ? r.label! : LABELS[(LABELS.indexOf(r.label!) + 1) % 4]}</answer>`];
  const base: Record<string, string[]> = {};
  const adapter: Record<string, string[]> = {};
  for (const r of rows) {
    base[r.id] = answer(r, rand() < pBase);
    adapter[r.id] = answer(r, rand() < pAdapter);
  }
  const taskSet: TaskSet = { path: "agent-evals/tasks/aml_typology.jsonl", sha256: "5e".repeat(32), split: "test", limit: 0, rows, humanLabels: new Map() };
  return { rows, taskSet, result: gradedResult(rows, { base, adapter }) };
}

/** A run folder as `agent train` leaves it: run.json, events.jsonl, a plot and an adapter. */
function writeRun(evalsDir: string, runId: string, relative: { change: number; low: number; high: number }, spiky = false) {
  const dir = join(evalsDir, "runs", runId);
  mkdirSync(join(dir, "adapter"), { recursive: true });
  writeFileSync(join(dir, "reward-vs-step.png"), "png");
  writeFileSync(join(dir, "adapter", "adapter_config.json"), "{}");
  const run = create(RunSchema, {
    runId,
    state: RunState.SUCCEEDED,
    request: {
      baseModel: "",
      grpo: { beta: 0.04, numGenerations: 8, learningRate: 5e-4, maxCompletionLength: 32 },
      runtime: { device: "cpu", precision: "fp32" },
    },
    result: {
      startReward: { step: 0n, mean: 0.3, ciLow: 0.25, ciHigh: 0.35, ciMethod: "bootstrap over prompts", numPrompts: 32, samplesPerPrompt: 4 },
      endReward: {
        step: 60n,
        mean: 0.3 * (1 + relative.change),
        ciLow: 0.4,
        ciHigh: 0.6,
        ciMethod: "bootstrap over prompts",
        numPrompts: 32,
        samplesPerPrompt: 4,
      },
      relativeChange: relative.change,
      relativeChangeCiLow: relative.low,
      relativeChangeCiHigh: relative.high,
      stepsCompleted: 60n,
      trainSeconds: 9.5,
      totalParams: 1_000_000n,
      trainableParams: 50_000n,
    },
  });
  writeFileSync(join(dir, "run.json"), toJsonString(RunSchema, run, { prettySpaces: 2 }));
  const rand = mulberry32(3);
  const events = Array.from({ length: 60 }, (_, i) =>
    toJsonString(
      RunEventSchema,
      create(RunEventSchema, {
        seq: BigInt(i + 1),
        runId,
        kind: {
          case: "trainStep",
          value: {
            step: BigInt(i + 1),
            maxSteps: 60n,
            metrics: {
              reward: 0.2 + 0.4 * (i / 59) + 0.03 * (2 * rand() - 1),
              kl: spiky && i % 10 === 5 ? 0.76 : 0.005 + 0.02 * (i / 59),
              frac_reward_zero_std: 0.6 - 0.4 * (i / 59),
              "completions/clipped_ratio": 0.02,
            },
          },
        },
      }),
    ),
  );
  writeFileSync(join(dir, "events.jsonl"), events.join("\n") + "\n");
}

function setup(
  n: number,
  pBase: number,
  pAdapter: number,
  opts: { baseline: boolean; relative?: { change: number; low: number; high: number }; spiky?: boolean },
) {
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const { taskSet, result } = scenario(n, pBase, pAdapter);
  writeRun(evalsDir, "r1", opts.relative ?? { change: 0.5, low: 0.3, high: 0.7 }, opts.spiky);
  const record = buildEvalLog("r1", settings, taskSet, result);
  writeEvalLog(evalsDir, record);
  if (opts.baseline) {
    const base = summarizeVariant(
      result.variants.find((v) => v.name === "base")!,
      settings.graders,
    );
    writeBaseline(evalsDir, buildBaseline(settings, taskSet, { requested: "", resolved: RESOLVED_MODEL }, base), false);
  }
  const { path, analysis } = writeReport(evalsDir, "r1", new Date("2026-11-29T12:00:00Z"));
  return { evalsDir, md: readFileSync(path, "utf8"), analysis };
}

describe("report.md", () => {
  test("a rising curve with KL spikes: no row fires, and the report names the nearest rows and what each missed", () => {
    const { md } = setup(240, 0.3, 0.7, { baseline: true, spiky: true });
    assert.match(md, /\*\*No row of the table fired for this run\.\*\*\n\nNearest rows/);
    assert.match(
      md,
      /- \*\*rises steadily \/ KL moderate \/ frac_reward_zero_std falling\*\* \(likely cause _healthy_;[^\n]*except this run's "5 KL spike\(s\) \(want 0\)"/,
    );
    assert.match(md, /- \*\*collapses \/ oscillates \/ KL spikes[^\n]*_lr too high, clip too loose_;[^\n]*except this run's "curve rising"/);
    assert.doesNotMatch(md, /Nearest rows[\s\S]*reward hacking or loose grader[\s\S]*\| reward curve/);
    const calm = setup(240, 0.3, 0.7, { baseline: true }).md;
    assert.doesNotMatch(calm, /Nearest rows/);
  });

  test("a tiny N says INCONCLUSIVE with n, the 200-task bar and the required n", () => {
    const { md, analysis } = setup(12, 0.3, 0.6, { baseline: true });
    assert.equal(analysis.milestone.verdict, "INCONCLUSIVE");
    assert.equal(analysis.milestone.gated, false);
    assert.match(md, /\*\*Milestone: INCONCLUSIVE\*\*: .*downstream: n=12 < 200 test tasks the milestone needs/);
    assert.match(md, /required n=\d+ for the observed delta/);
    assert.match(md, /\*\*N = 12 tasks\*\*/);
    assert.match(md, /the eval covers 12 test tasks, every test task of the file; the milestone needs >= 200/);
    assert.doesNotMatch(md, /without --limit/, "no --limit was used");
  });

  test("a clear improvement on 240 tasks with a matching baseline is CONFIRMED, with every section present", () => {
    const { md, analysis } = setup(240, 0.3, 0.7, { baseline: true });
    assert.equal(analysis.baselineMatch.status, "match");
    // the delta is taken against the eval's own base variant; baseline.json only guards it (issue 21)
    assert.equal(analysis.comparison!.baseLabel, "base (this eval)");
    assert.equal(analysis.milestone.verdict, "CONFIRMED", analysis.milestone.reason);
    assert.match(md, /\*\*Milestone: CONFIRMED\*\*/);
    assert.match(md, /governing test: exact McNemar test/);
    assert.match(md, /Tango score interval \(the decision interval\)/);
    assert.match(md, /P\(PASS\) \/ P\(CONFIRMED\) if the true delta were \+5 pp, at n=240/);
    assert.match(md, /PASS is a point-estimate gate/);
    assert.match(md, /!\[P\(PASS\) vs true delta\]\(power-curve\.svg\)/);
    assert.match(md, /Absolute change end - start: \*\*\+0\.150\*\*/);
    assert.match(md, /### In-distribution vs held-out templates[\s\S]*\| test \(in-distribution\) \| 240 \|/);
    assert.match(md, /Per slice \(p from the governing test; Holm-adjusted/);
    assert.match(md, /\| test \| structuring \| 60 \|/);
    // the plot, held-out reward, base vs adapter, verdict, attribution, TCO, pending
    assert.match(md, /!\[mean reward per training step\]\(reward-vs-step\.png\)/);
    assert.match(md, /## Held-out reward: step 0 vs end[\s\S]*\| 0 \| 0\.300 \| 0\.250 to 0\.350 \|/);
    assert.match(md, /relative change \(end - start\) \/ \|start\|: \*\*\+50\.0%\*\*/);
    assert.match(md, /## Base vs adapter on the test split[\s\S]*\*\*N = 240 tasks\*\*/);
    assert.match(md, /Re-grading: all 1440 sidecar scores/);
    assert.match(md, /paired percentile bootstrap over tasks, 10000 resamples, seed 0/);
    assert.match(md, /exact McNemar p/);
    assert.match(md, /required n for the observed delta/);
    assert.match(md, /minimum detectable effect at n=240/);
    assert.match(md, /exact_match vs exact_match_lenient \(adapter\)/);
    assert.match(md, /## Milestone verdict/);
    assert.match(md, /## Attribution[\s\S]*\*\*rises steadily \/ KL moderate \/ frac_reward_zero_std falling\*\*: likely cause _healthy_/);
    assert.match(md, /## PPO vs GRPO: total cost of ownership/);
    // P = 1e6, L = 5e4, fp32: GRPO+LoRA policy = 1.05e6*4 + 5e4*4 + 8*5e4 = 4 800 000 B
    assert.match(md, /\| GRPO \+ LoRA \| \*\*total\*\* \|[^\n]*\(4,800,000 B\)/);
    // PPO+full: policy 16e6 + reference 4e6 + critic 16e6 + reward model 4e6 = 40 000 000 B
    assert.match(md, /\| PPO \+ full fine-tuning \| \*\*total\*\* \|[^\n]*\(40,000,000 B\)/);
    assert.match(md, /critic network[\s\S]*labelling cost[\s\S]*tuning surface/);
    assert.match(md, /## Pending[\s\S]*human labels: no task row has `human_label`/);
  });

  test("without baseline.json the report says the milestone is GATED on it", () => {
    const { md, analysis } = setup(240, 0.3, 0.7, { baseline: false });
    assert.equal(analysis.milestone.verdict, "INCONCLUSIVE");
    assert.equal(analysis.milestone.gated, true);
    assert.equal(analysis.comparison!.baseLabel, "base (this eval)");
    assert.match(md, /\*\*Milestone: INCONCLUSIVE \(GATED on baseline\.json\)\*\*: \S*evals-\w+\/baseline\.json is missing/); // the evals dir's own file, named
    // the label says GATED; its reason does not say it again (it read "...baseline.json)**: GATED on baseline.json: ...")
    for (const line of md.split("\n")) assert.ok((line.match(/GATED on baseline\.json/g) ?? []).length <= 1, line);
    assert.match(md, /baseline\.json: run `agent baseline set`/);
  });

  test("a clear downstream regression is a FAIL", () => {
    const { analysis } = setup(240, 0.6, 0.3, { baseline: true });
    assert.equal(analysis.milestone.verdict, "FAIL");
    assert.equal(analysis.milestone.downstream.verdict, "FAIL");
  });

  test("a report before `agent eval` lists it as pending", () => {
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
    writeRun(evalsDir, "r2", { change: 0.5, low: 0.3, high: 0.7 });
    const { path, analysis } = writeReport(evalsDir, "r2");
    const md = readFileSync(path, "utf8");
    assert.equal(analysis.milestone.verdict, "INCONCLUSIVE");
    assert.match(md, /_No eval yet: `agent eval r2`\._/);
    assert.match(md, /base vs adapter: run `agent eval r2`/);
  });
});

describe("baseline reuse and replacement (issue 10)", () => {
  test("the report counts the runs judged on this baseline and warns about repeated use; a replacement is shown with its reason", () => {
    const { evalsDir } = setup(240, 0.3, 0.7, { baseline: true });
    mkdirSync(join(evalsDir, "runs", "r2"), { recursive: true });
    writeFileSync(join(evalsDir, "runs", "r2", "eval.json"), readFileSync(join(evalsDir, "runs", "r1", "eval.json")));
    const b = JSON.parse(readFileSync(join(evalsDir, "baseline.json"), "utf8"));
    b.replaced = { reason: "task file regenerated", previousDate: "2026-11-01T00:00:00.000Z", runsJudgedOnPrevious: 3 };
    writeFileSync(join(evalsDir, "baseline.json"), JSON.stringify(b));
    const { path } = writeReport(evalsDir, "r1", new Date("2026-11-29T12:00:00Z"));
    const md = readFileSync(path, "utf8");
    assert.match(md, /2 run\(s\) judged on it/);
    assert.match(md, /2 runs have been judged on this baseline\.json and test split \(r1, r2\)/);
    assert.match(md, /REPLACED the baseline of 2026-11-01T00:00:00\.000Z \(3 run\(s\) had been judged on that one\): "task file regenerated"/);
  });
});

describe("ranked-preference runs (issue 10)", () => {
  test("get their own section (pairwise accuracy with CIs, win rate, margin, consistency), the DPO TCO with a reference model, and no +20% criterion on a 0.5 start", async () => {
    const { TrainMode } = await import("../src/gen/grpo/trainer/v1/trainer_service_pb.js");
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
    const dir = join(evalsDir, "runs", "p1");
    mkdirSync(dir, { recursive: true });
    const start = Array.from({ length: 24 }, () => 0.5);
    const end = Array.from({ length: 24 }, (_, i) => (i % 4 === 0 ? 0.5 : 0.9));
    const run = create(RunSchema, {
      runId: "p1",
      state: RunState.SUCCEEDED,
      request: { mode: TrainMode.RANKED_PREFERENCE, preference: { beta: 0.1 }, runtime: { precision: "fp32" } },
      result: {
        startReward: { step: 0n, mean: 0.5, ciLow: 0.5, ciHigh: 0.5, numPrompts: 24, samplesPerPrompt: 0, perPrompt: start },
        endReward: { step: 20n, mean: 0.8, ciLow: 0.72, ciHigh: 0.87, numPrompts: 24, samplesPerPrompt: 0, perPrompt: end },
        relativeChange: 0.6,
        relativeChangeCiLow: 0.44,
        relativeChangeCiHigh: 0.74,
        stepsCompleted: 20n,
        totalParams: 1_000_000n,
        trainableParams: 50_000n,
        preferenceMetrics: { pairwiseAccuracy: 0.8, groupWinRate: 0.75, winMargin: 0.6, preferenceConsistency: 0.02 },
      },
    });
    writeFileSync(join(dir, "run.json"), toJsonString(RunSchema, run, { prettySpaces: 2 }));
    const { path, analysis } = writeReport(evalsDir, "p1", new Date("2026-11-29T12:00:00Z"));
    const md = readFileSync(path, "utf8");
    assert.match(analysis.milestone.reward.reason, /^not applicable: a ranked-preference run's held-out reward is pairwise accuracy, 0\.5 by construction/);
    assert.match(md, /## Ranked preference: held-out groups/);
    assert.match(md, /\| pairwise accuracy \| 0\.500 \| 0\.800 \| 0\.720 to 0\.870 \(bootstrap over groups\)/);
    assert.match(md, /\| pairwise accuracy, end - step 0 \|  \| \+0\.300 \| 0\.\d{3} to 0\.\d{3} \(paired bootstrap/);
    assert.match(md, /\| group win rate \|  \| 0\.750 \| 0\.\d{3} to 0\.\d{3} \(Wilson over 24 groups/);
    assert.match(md, /\| win margin \|  \| 0\.600 \|/);
    assert.match(md, /## PPO \(RLHF\) vs DPO: total cost of ownership/);
    assert.match(md, /\| DPO \+ LoRA \| reference \|/);
    assert.match(md, /DPO always needs the reference model/);
    assert.doesNotMatch(md, /prompts x 0/);
    assert.match(md, /_Not applicable to a ranked-preference run/);
  });
});

describe("answers: distribution, confusion matrix, constant predictors (issue 18)", () => {
  function constantBase() {
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
    const rows: TaskRow[] = Array.from({ length: 240 }, (_, i) => row(`t${String(i).padStart(4, "0")}`, LABELS[i % 4]));
    const base: Record<string, string[]> = {};
    const adapter: Record<string, string[]> = {};
    for (const [i, r] of rows.entries()) {
      base[r.id] = ["<answer>money_mule</answer>"];
      adapter[r.id] = [`<answer>${i % 5 === 0 ? LABELS[(i + 1) % 4] : r.label!}</answer>`];
    }
    const taskSet: TaskSet = { path: "agent-evals/tasks/aml_typology.jsonl", sha256: "5e".repeat(32), split: "test", limit: 0, rows, humanLabels: new Map() };
    writeRun(evalsDir, "r1", { change: 0.5, low: 0.3, high: 0.7 });
    writeEvalLog(evalsDir, buildEvalLog("r1", settings, taskSet, gradedResult(rows, { base, adapter })));
    const { path, analysis } = writeReport(evalsDir, "r1", new Date("2026-11-29T12:00:00Z"));
    return { evalsDir, md: readFileSync(path, "utf8"), analysis };
  }

  test("report.md shows each variant's answer distribution and confusion matrix, and names the constant base", () => {
    const { md, analysis, evalsDir } = constantBase();
    assert.match(md, /## Answers: what each variant says/);
    assert.match(md, /### test \(240 tasks\)/);
    assert.match(md, /\| answer \| base \| adapter \|/);
    assert.match(md, /\| money_mule \| 240 \(100%\) \| \d+ \(\d+%\) \|/);
    assert.match(md, /- base: 1 distinct answer\(s\); most frequent money_mule on 240\/240 tasks \(100%\) — \*\*a constant answer\*\*/);
    assert.match(md, /- adapter: 4 distinct answer\(s\); most frequent [a-z_]+ on \d+\/240 tasks \(\d+%\)\n/);
    assert.match(
      md,
      /Confusion matrix, base \(rows: gold label; columns: answer\):\n\n\| gold \\ answer \| structuring \| smurfing \| layering \| money_mule \| \(other\) \| \(none\) \|/,
    );
    assert.match(md, /\| structuring \| 0 \| 0 \| 0 \| 60 \| 0 \| 0 \|/);
    assert.match(md, /Confusion matrix, adapter/);
    // the PNG beside it (matplotlib's, through the real `py-trainer plot confusion`: report-e2e.test.ts)
    const png = readFileSync(join(evalsDir, "runs", "r1", "confusion-matrix.png"));
    assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    assert.match(md, /!\[confusion matrices, gold label x answer, test split\]\(confusion-matrix\.png\)/);
    // the attribution row fires for the base only
    const fired = analysis.attribution.filter((r) => r.fired).map((r) => r.row.likelyCause.split(":")[0]);
    assert.ok(fired.includes("constant answer (base)"), fired.join("; "));
    assert.ok(!fired.includes("constant answer (adapter)"), fired.join("; "));
    assert.match(md, /constant answer \(base\)[^\n]*yes: base answers money_mule on 240\/240 tasks \(100%\)/);
  });

  test("a mixed base is not called constant, and the report says once that the verdict is one draw", () => {
    const { md, analysis } = setup(240, 0.3, 0.7, { baseline: true });
    assert.ok(analysis.answers);
    assert.doesNotMatch(md, /a constant answer\*\*/);
    assert.ok(!analysis.attribution.some((r) => r.fired && r.row.likelyCause.startsWith("constant answer")));
    assert.equal(md.match(/one draw of the training randomness/g)?.length, 1);
    assert.match(md, /`agent sweep --from-run r1 --seeds 10`/);
  });

  test("without py-trainer the report says the PNG was not drawn and keeps the tables", () => {
    const prev = process.env.PY_TRAINER_BIN;
    process.env.PY_TRAINER_BIN = "/nonexistent/py-trainer";
    try {
      const { md } = setup(240, 0.3, 0.7, { baseline: true });
      assert.match(
        md,
        /_confusion-matrix\.png not drawn: py-trainer not found at \/nonexistent\/py-trainer \(set PY_TRAINER_BIN\)\. The tables below hold the same counts\._/,
      );
      assert.match(md, /Confusion matrix, base/);
    } finally {
      if (prev === undefined) delete process.env.PY_TRAINER_BIN;
      else process.env.PY_TRAINER_BIN = prev;
    }
  });
});
