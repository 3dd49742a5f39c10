import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { EvaluateResponseSchema, type EvaluateResult } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import {
  BaselineExistsError,
  BaselineReasonRequiredError,
  baselinePath,
  matchBaseline,
  readBaseline,
  readBaselineHistory,
  runsJudgedOn,
  setBaseline,
  type Baseline,
} from "../src/agent/eval/baseline-record.js";
import { DEFAULT_EVAL_SETTINGS } from "../src/agent/eval/evaluate.js";
import { type EvalSettings } from "../src/agent/core/eval-log.js";
import { RegradeMismatchError } from "../src/agent/eval/grading.js";
import { type TaskSet } from "../src/agent/eval/task-set.js";
import type { SidecarClient } from "../src/sidecar/client.js";
import { gradedResult, row } from "./helpers/eval-fixtures.js";

const rows = [row("t1", "structuring"), row("t2", "smurfing"), row("t3", "layering")];
const taskSet: TaskSet = { path: "agent-evals/tasks/x.jsonl", sha256: "ab".repeat(32), split: "test", limit: 0, rows, humanLabels: new Map() };
const settings: EvalSettings = { ...DEFAULT_EVAL_SETTINGS };

/** A stand-in sidecar whose Evaluate streams one progress event and then `result`. */
function fakeClient(result: () => EvaluateResult): SidecarClient & { calls: number } {
  const fake = {
    calls: 0,
    async *evaluate() {
      fake.calls++;
      yield create(EvaluateResponseSchema, { kind: { case: "progress", value: { variant: "base", tasksDone: 3, tasksTotal: 3 } } });
      yield create(EvaluateResponseSchema, { kind: { case: "result", value: result() } });
    },
  };
  return fake as unknown as SidecarClient & { calls: number };
}

const baseOnly = () =>
  gradedResult(rows, { base: { t1: ["<answer>structuring</answer>"], t2: ["<answer>layering</answer>"], t3: ["<answer>layering</answer>"] } });

describe("agent baseline set", () => {
  test("writes baseline.json with model, task-set sha256, grader, per-task scores, accuracy with CI, seed and date", async () => {
    const evalsDir = join(mkdtempSync(join(tmpdir(), "evals-")), "agent-evals");
    const client = fakeClient(baseOnly);
    const { path, baseline } = await setBaseline(client, { evalsDir, settings, taskSet });
    assert.equal(path, join(evalsDir, "baseline.json"));
    const onDisk = JSON.parse(readFileSync(path, "utf8")) as Baseline;
    assert.deepEqual(onDisk, baseline);
    assert.equal(onDisk.schema, "agent-baseline/v1");
    assert.deepEqual(onDisk.model, { requested: "", resolved: "/cache/models/tiny-aml-qwen2-s0-8ae0970906" });
    assert.deepEqual(onDisk.taskSet, {
      path: taskSet.path,
      sha256: taskSet.sha256,
      split: "test",
      n: 3,
      sliceField: "slice",
      labelField: "label",
      labels: ["layering", "smurfing", "structuring"],
      hasTemplates: true,
    });
    assert.equal(onDisk.grader.name, "exact_match");
    assert.equal(onDisk.grader.params.require_tag, true);
    assert.deepEqual(onDisk.perTask, { t1: 1, t2: 0, t3: 1 });
    assert.equal(onDisk.accuracy!.estimate, 2 / 3);
    assert.equal(onDisk.accuracy!.method, "wilson");
    assert.equal(onDisk.seed, 0);
    assert.ok(!Number.isNaN(Date.parse(onDisk.date)));
  });

  test("an existing baseline is not overwritten without force, and the sidecar is not even asked", async () => {
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
    await setBaseline(fakeClient(baseOnly), { evalsDir, settings, taskSet });
    const before = readFileSync(baselinePath(evalsDir), "utf8");
    const client = fakeClient(baseOnly);
    await assert.rejects(setBaseline(client, { evalsDir, settings, taskSet }), (err: unknown) => {
      assert.ok(err instanceof BaselineExistsError);
      assert.match(err.message, /exists; refusing to overwrite it \(pass --force/);
      return true;
    });
    assert.equal(client.calls, 0);
    assert.equal(readFileSync(baselinePath(evalsDir), "utf8"), before);
    // --force needs a reason, checked before the sidecar is asked
    await assert.rejects(setBaseline(client, { evalsDir, settings, taskSet, force: true }), (err: unknown) => err instanceof BaselineReasonRequiredError);
    assert.equal(client.calls, 0);
    // --force --reason replaces it, records why, and keeps the old one in the history
    const forced = await setBaseline(client, { evalsDir, settings: { ...settings, seed: 5 }, taskSet, force: true, reason: "new seed policy" });
    assert.equal(client.calls, 1);
    assert.equal(readBaseline(evalsDir)!.seed, 5);
    assert.equal(forced.baseline.seed, 5);
    assert.deepEqual(forced.baseline.replaced, { reason: "new seed policy", previousDate: JSON.parse(before).date, runsJudgedOnPrevious: 0 });
    const history = readBaselineHistory(evalsDir);
    assert.equal(history.length, 1);
    assert.equal(history[0].reason, "new seed policy");
    assert.equal(history[0].baseline.seed, settings.seed);
  });

  test("runsJudgedOn counts the run folders whose eval.json matches the baseline", async () => {
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
    const { baseline } = await setBaseline(fakeClient(baseOnly), { evalsDir, settings, taskSet });
    const ev = {
      model: baseline.model,
      taskSet: baseline.taskSet,
      settings,
      variants: [
        { name: "base", perTask: baseline.perTask },
        { name: "adapter", perTask: baseline.perTask },
      ],
    };
    for (const id of ["r1", "r2"]) {
      mkdirSync(join(evalsDir, "runs", id), { recursive: true });
      writeFileSync(join(evalsDir, "runs", id, "eval.json"), JSON.stringify(ev));
    }
    mkdirSync(join(evalsDir, "runs", "r3"), { recursive: true });
    // another max_new_tokens (a seed would not do: the eval is greedy, and greedy ignores the seed)
    writeFileSync(join(evalsDir, "runs", "r3", "eval.json"), JSON.stringify({ ...ev, settings: { ...settings, maxNewTokens: 16 } }));
    assert.deepEqual(runsJudgedOn(evalsDir, baseline), ["r1", "r2"]);
  });

  test("a baseline that appears while the base model is being evaluated is not clobbered either", async () => {
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
    const racing = fakeClient(() => {
      writeFileSync(baselinePath(evalsDir), JSON.stringify({ schema: "agent-baseline/v1", seed: 9 })); // another writer won
      return baseOnly();
    });
    await assert.rejects(setBaseline(racing, { evalsDir, settings, taskSet }), BaselineExistsError);
    assert.equal(racing.calls, 1);
    assert.equal(readBaseline(evalsDir)!.seed, 9);
  });

  test("a TS/Python grading mismatch writes no baseline", async () => {
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
    const bad = () => {
      const r = baseOnly();
      r.variants[0].tasks[1].samples[0].scores["exact_match"] = 1;
      return r;
    };
    await assert.rejects(setBaseline(fakeClient(bad), { evalsDir, settings, taskSet }), RegradeMismatchError);
    assert.equal(existsSync(baselinePath(evalsDir)), false);
  });
});

describe("matchBaseline", () => {
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const identity = {
    model: { requested: "", resolved: "/other/home/models/tiny-aml-qwen2-s0-8ae0970906" },
    taskSet: { ...taskSet, n: 3 },
    settings,
    taskIds: ["t1", "t2", "t3"],
  };

  test("missing", () => {
    assert.deepEqual(matchBaseline(null, identity), { status: "missing" });
  });

  test("same model (by folder name), task file, split, grader, samples, decoding and seed: match", async () => {
    const { baseline } = await setBaseline(fakeClient(baseOnly), { evalsDir, settings, taskSet, force: true });
    assert.deepEqual(matchBaseline(baseline, identity), { status: "match" });
    assert.deepEqual(matchBaseline(baseline, { ...identity, taskIds: ["t1"] }), { status: "match" });
  });

  test("every difference is named", async () => {
    const baseline = readBaseline(evalsDir)!;
    const m = matchBaseline(baseline, {
      model: { requested: "", resolved: "/x/models/tiny-aml-qwen2-s0-0000000000" },
      taskSet: { ...identity.taskSet, sha256: "cd".repeat(32) },
      settings: {
        ...settings,
        seed: 1,
        samplesPerTask: 4,
        temperature: 0.7,
        graders: [{ name: "exact_match", params: { case_sensitive: true } }, ...settings.graders.slice(1)],
      },
      taskIds: ["t1", "t9"],
    });
    assert.equal(m.status, "mismatch");
    const reasons = m.status === "mismatch" ? m.reasons.join("\n") : "";
    // the seed is not among them: the baseline decoded greedily, where the seed cannot matter
    for (const what of [
      "model.resolved",
      "task_set.sha256",
      "grader",
      "decoding.samples_per_task",
      "decoding.temperature: 0 vs 0.7",
      "1 evaluated task(s) are not in the baseline",
    ]) {
      assert.ok(reasons.includes(what), `${what} in\n${reasons}`);
    }
    assert.ok(!reasons.includes("decoding.seed"), reasons);
  });
});
