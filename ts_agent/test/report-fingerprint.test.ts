/**
 * Issue 21, part A, as report tests: a stale baseline.json is a guard, never the comparison's
 * base; the fingerprint names the field that differs; an eval of another adapter than the run's
 * is refused.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { create, toJsonString } from "@bufbuild/protobuf";

import { RunSchema, RunState, type EvaluateResult } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { buildBaseline, writeBaseline } from "../src/agent/eval/baseline-record.js";
import { DEFAULT_EVAL_SETTINGS } from "../src/agent/eval/evaluate.js";
import { type EvalSettings } from "../src/agent/core/eval-log.js";
import { summarizeVariant } from "../src/agent/eval/grading.js";
import type { TaskSet } from "../src/agent/eval/task-set.js";
import type { TaskRow } from "../src/agent/core/task-format.js";
import { writeEvalLog } from "../src/agent/core/eval-log.js";
import { buildEvalLog } from "../src/agent/eval/build-eval-log.js";
import { writeReport } from "../src/agent/report/run-report.js";
import { RESOLVED_MODEL, gradedResult, row, runtimeFingerprint } from "./helpers/eval-fixtures.js";
import { stubConfusionPlot } from "./helpers/plot-stub.js";

// Reports here are not about the confusion-matrix figure: an in-process stand-in draws it (the
// real `py-trainer plot confusion` is tested in tests/test_plot_confusion.py and report-e2e.test.ts).
process.env.PY_TRAINER_BIN = new URL("./helpers/fake-py-trainer.sh", import.meta.url).pathname;
stubConfusionPlot();

const LABELS = ["structuring", "smurfing", "layering", "money_mule"];
const N = 264;
const rows: TaskRow[] = Array.from({ length: N }, (_, i) => row(`t${String(i).padStart(4, "0")}`, LABELS[i % 4]));
const taskSet: TaskSet = { path: "agent-evals/tasks/aml_typology.jsonl", sha256: "5e".repeat(32), split: "test", limit: 0, rows, humanLabels: new Map() };
const ADAPTER_SHA = "aa".repeat(32);

/** Tasks 0..k-1 answered right, the rest wrong. */
function firstRight(k: number): Record<string, string[]> {
  return Object.fromEntries(rows.map((r, i) => [r.id, [`<answer>${i < k ? r.label! : LABELS[(LABELS.indexOf(r.label!) + 1) % 4]}</answer>`]]));
}

const runtime = runtimeFingerprint;

function withFingerprint(result: EvaluateResult, fp: ReturnType<typeof runtime> | null, step = 60): EvaluateResult {
  if (fp) result.fingerprint = fp;
  if (result.variants.some((v) => v.name === "adapter"))
    result.adapters = [{ $typeName: "grpo.trainer.v1.EvaluatedAdapter", name: "adapter", runId: "r1", sha256: ADAPTER_SHA, step: BigInt(step) }];
  return result;
}

/** run.json of a finished run whose adapter file has `sha` at `steps`. */
function writeRun(evalsDir: string, steps: number, sha: string) {
  const dir = join(evalsDir, "runs", "r1");
  mkdirSync(join(dir, "adapter"), { recursive: true });
  writeFileSync(join(dir, "adapter", "adapter_config.json"), "{}");
  const run = create(RunSchema, {
    runId: "r1",
    state: RunState.SUCCEEDED,
    request: { baseModel: "" },
    result: {
      artifacts: [{ path: "adapter/adapter_model.safetensors", sizeBytes: 4n, sha256: sha }],
      startReward: { step: 0n, mean: 0.3, ciLow: 0.25, ciHigh: 0.35, ciMethod: "bootstrap over prompts", numPrompts: 32, samplesPerPrompt: 4 },
      endReward: { step: BigInt(steps), mean: 0.45, ciLow: 0.4, ciHigh: 0.5, ciMethod: "bootstrap over prompts", numPrompts: 32, samplesPerPrompt: 4 },
      relativeChange: 0.5,
      relativeChangeCiLow: 0.3,
      relativeChangeCiHigh: 0.7,
      stepsCompleted: BigInt(steps),
    },
  });
  writeFileSync(join(dir, "run.json"), toJsonString(RunSchema, run, { prettySpaces: 2 }));
}

/**
 * baseline.json made from a base that gets `baselineRight` tasks right (with `baselineSettings`
 * and `baselineRuntime`), an eval whose own base gets 60 right and whose adapter gets 66 right.
 */
function setup(opts: {
  baselineRight?: number;
  baselineSettings?: Partial<EvalSettings>;
  baselineRuntime?: ReturnType<typeof runtime> | null;
  evalRuntime?: ReturnType<typeof runtime> | null;
  evalStep?: number;
  run?: { steps: number; sha: string };
}) {
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const settings = { ...DEFAULT_EVAL_SETTINGS };
  const bSettings = { ...settings, ...opts.baselineSettings };
  const bResult = withFingerprint(
    gradedResult(rows, { base: firstRight(opts.baselineRight ?? 60) }),
    opts.baselineRuntime === undefined ? runtime() : opts.baselineRuntime,
  );
  const base = summarizeVariant(bResult.variants[0], bSettings.graders);
  writeBaseline(
    evalsDir,
    buildBaseline(bSettings, taskSet, { requested: "", resolved: RESOLVED_MODEL }, base, new Date("2026-11-01T00:00:00Z"), bResult.fingerprint ?? null),
    false,
  );
  const run = opts.run ?? { steps: 60, sha: ADAPTER_SHA };
  writeRun(evalsDir, run.steps, run.sha);
  const result = withFingerprint(
    gradedResult(rows, { base: firstRight(60), adapter: firstRight(66) }),
    opts.evalRuntime === undefined ? runtime() : opts.evalRuntime,
    opts.evalStep ?? 60,
  );
  writeEvalLog(evalsDir, buildEvalLog("r1", settings, taskSet, result));
  const { path, analysis } = writeReport(evalsDir, "r1", new Date("2026-11-29T12:00:00Z"));
  return { evalsDir, md: readFileSync(path, "utf8"), analysis };
}

describe("a stale baseline.json guards, it does not decide (issue 21)", () => {
  test("baseline.json 30 right, the eval's own base 60, the adapter 66 on 264 tasks: GATED, naming the disagreeing tasks and the fingerprint field", () => {
    // the baseline was set on a GPU in bf16; this eval ran on the CPU in fp32
    const { md, analysis } = setup({ baselineRight: 30, baselineRuntime: runtime({ device: "cuda", dtype: "bf16" }) });
    // the delta is against the eval's own base: +2.3 pp, not +13.6 pp
    assert.equal(analysis.comparison!.baseLabel, "base (this eval)");
    assert.equal(analysis.comparison!.n, N);
    assert.ok(Math.abs(analysis.comparison!.paired!.meanDiff - 6 / N) < 1e-12);
    assert.notEqual(analysis.milestone.downstream.verdict, "CONFIRMED");
    assert.equal(analysis.milestone.verdict, "INCONCLUSIVE");
    assert.equal(analysis.milestone.gated, true);
    assert.match(analysis.milestone.reason, /runtime\.device: cuda vs cpu/);
    assert.match(analysis.milestone.reason, /runtime\.dtype: bf16 vs fp32/);
    assert.match(
      analysis.milestone.reason,
      /disagree on 30 of 264 task\(s\) \(allowed: 0 with greedy decoding\): t0030, t0031, t0032, t0033, t0034, \.\.\. \(\+25 more\)/,
    );
    assert.match(md, /\*\*Milestone: INCONCLUSIVE \(GATED on baseline\.json\)\*\*/);
    assert.match(md, /### baseline\.json vs this eval: the fingerprint/);
    assert.match(md, /\| runtime\.dtype \| bf16 \| fp32 \| gates \| \*\*differs\*\* \|/);
    assert.match(md, /Per-task check: baseline\.json and this eval's own base variant disagree on 30 of 264[^\n]*the verdict is GATED on it/);
  });

  test("the same stale scores with a matching fingerprint still gate (the per-task check does not trust the fingerprint)", () => {
    const { analysis } = setup({ baselineRight: 30 });
    assert.equal(analysis.milestone.gated, true);
    assert.deepEqual(analysis.baselineMatch.status === "mismatch" ? analysis.baselineMatch.reasons.map((r) => r.split(":")[0]) : [], [
      "baseline.json and this eval's own base variant disagree on 30 of 264 task(s) (allowed",
    ]);
  });

  test("a baseline made with another max_new_tokens gates, naming the field", () => {
    const { md, analysis } = setup({ baselineSettings: { maxNewTokens: 16 } });
    assert.equal(analysis.milestone.gated, true);
    assert.match(analysis.milestone.reason, /baseline\.json does not match this eval \(decoding\.max_new_tokens: 16 vs 32\)/);
    assert.match(md, /\| decoding\.max_new_tokens \| 16 \| 32 \| gates \| \*\*differs\*\* \|/);
  });

  test("a baseline made with another prompt format gates, naming the field", () => {
    const { analysis } = setup({ baselineRuntime: runtime({ promptFormat: "chat", chatTemplateSha256: "cc".repeat(32) }) });
    assert.equal(analysis.milestone.gated, true);
    assert.match(analysis.milestone.reason, /prompt\.format: chat vs raw/);
    assert.match(analysis.milestone.reason, /prompt\.chat_template_sha256: cccccccccccc… vs \(none\)/);
  });

  test("a greedy baseline with another seed, batch size and torch version: not gated; batch size and versions warned about", () => {
    const { md, analysis } = setup({
      baselineSettings: { seed: 3 },
      baselineRuntime: runtime({ batchSize: 8, libraryVersions: { torch: "2.4.0", transformers: "4.57.0", peft: "0.17.0", trl: "0.24.0" } }),
    });
    assert.equal(analysis.milestone.gated, false, analysis.milestone.reason);
    assert.match(md, /\| decoding\.seed \| - \| - \| gates \| ignored: greedy decoding: the seed cannot matter \|/);
    assert.match(md, /Warning: runtime\.batch_size: 8 vs 64; runtime\.library_versions\.torch: 2\.4\.0 vs 2\.5\.1 \(shown, does not gate\)/);
  });

  test("files older than the fingerprint still read: the report names the checks it could not make, and only the per-task check gates", () => {
    const agreeing = setup({ baselineRuntime: null, evalRuntime: null });
    assert.equal(agreeing.analysis.milestone.gated, false, agreeing.analysis.milestone.reason);
    assert.match(
      agreeing.md,
      /Fingerprint incomplete: model\.weights_sha256, model\.revision, prompt\.format, prompt\.chat_template_sha256, runtime\.device, runtime\.dtype, code\.sidecar\.grader_sha256, code\.sidecar\.git_commit, runtime\.library_versions not recorded/,
    );
    const stale = setup({ baselineRight: 30, baselineRuntime: null, evalRuntime: null });
    assert.equal(stale.analysis.milestone.gated, true);
    assert.match(stale.analysis.milestone.reason, /disagree on 30 of 264/);
  });
});

describe("the eval must describe the run's adapter as it is now (issue 21)", () => {
  test("an eval of the step-94 adapter, the run resumed to step 200: INCONCLUSIVE, naming agent eval <run_id>", () => {
    const { md, analysis } = setup({ evalStep: 94, run: { steps: 200, sha: "bb".repeat(32) } });
    assert.equal(analysis.adapter!.status, "changed");
    assert.equal(analysis.milestone.verdict, "INCONCLUSIVE");
    assert.equal(analysis.milestone.downstream.verdict, "INCONCLUSIVE");
    assert.match(
      analysis.milestone.reason,
      /eval\.json scored the adapter at step 94, sha256 aaaaaaaaaaaa…, but run r1's adapter is now at step 200, sha256 bbbbbbbbbbbb…[^\n]*rerun `agent eval r1`/,
    );
    assert.match(md, /\*\*Milestone: INCONCLUSIVE\*\*: downstream: eval\.json scored the adapter at step 94/);
  });

  test("the same adapter: the report says which adapter the eval scored, and the verdict stands", () => {
    const { md, analysis } = setup({});
    assert.equal(analysis.adapter!.status, "same");
    assert.match(md, /Adapter: eval\.json scored this run's adapter \(step 60, sha256 aaaaaaaaaaaa…\)\./);
  });

  test("an eval.json older than the adapter record: said, not refused", () => {
    const { evalsDir } = setup({});
    const p = join(evalsDir, "runs", "r1", "eval.json");
    const log = JSON.parse(readFileSync(p, "utf8"));
    delete log.adapter;
    writeFileSync(p, JSON.stringify(log));
    const { path, analysis } = writeReport(evalsDir, "r1");
    assert.equal(analysis.adapter!.status, "not recorded");
    assert.match(readFileSync(path, "utf8"), /eval\.json does not record which adapter it scored/);
  });
});
