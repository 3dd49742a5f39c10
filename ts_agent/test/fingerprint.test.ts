/** The fingerprint (issue 21): what gates, what warns, what an older file could not record. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { buildBaseline, matchBaseline } from "../src/agent/eval/baseline-record.js";
import { DEFAULT_EVAL_SETTINGS } from "../src/agent/eval/evaluate.js";
import { type EvalSettings } from "../src/agent/core/eval-log.js";
import { buildFingerprint, compareFingerprints, fingerprintGates, fingerprintUnchecked, fingerprintWarnings } from "../src/agent/eval/fingerprint.js";
import { summarizeVariant } from "../src/agent/eval/grading.js";
import type { TaskSet } from "../src/agent/eval/task-set.js";
import { RESOLVED_MODEL, gradedResult, row, runtimeFingerprint } from "./helpers/eval-fixtures.js";

const rows = [row("t1", "structuring"), row("t2", "smurfing")];
const taskSet: TaskSet = { path: "agent-evals/tasks/x.jsonl", sha256: "ab".repeat(32), split: "test", limit: 0, rows, humanLabels: new Map() };
const taskSetRef = { path: taskSet.path, sha256: taskSet.sha256, split: taskSet.split, n: 2 };
const model = { requested: "", resolved: RESOLVED_MODEL };

const runtime = runtimeFingerprint;

function fp(settings: Partial<EvalSettings> = {}, rt: ReturnType<typeof runtime> | null = runtime()) {
  return buildFingerprint({ settings: { ...DEFAULT_EVAL_SETTINGS, ...settings }, taskSet: taskSetRef, taskIds: ["t1", "t2"], model, runtime: rt });
}

function gates(a: ReturnType<typeof fp>, b: ReturnType<typeof fp>) {
  return fingerprintGates(compareFingerprints(a, b));
}

describe("the fingerprint", () => {
  test("identical fingerprints: no gate, no warning, nothing unchecked", () => {
    const rows = compareFingerprints(fp(), fp());
    assert.deepEqual(fingerprintGates(rows), []);
    assert.deepEqual(fingerprintWarnings(rows), []);
    assert.deepEqual(fingerprintUnchecked(rows), []);
  });

  test("another max_new_tokens or prompt format gates, naming the field (baseline first)", () => {
    assert.deepEqual(gates(fp({ maxNewTokens: 16 }), fp({ maxNewTokens: 32 })), ["decoding.max_new_tokens: 16 vs 32"]);
    assert.deepEqual(gates(fp({}, runtime({ promptFormat: "chat", chatTemplateSha256: "cc".repeat(32) })), fp()), [
      "prompt.format: chat vs raw",
      `prompt.chat_template_sha256: ${"cc".repeat(6)}… vs (none)`,
    ]);
  });

  test("a greedy eval ignores a seed mismatch (and top_p); a sampled one does not", () => {
    assert.deepEqual(gates(fp({ seed: 1 }), fp({ seed: 2 })), []);
    const rows = compareFingerprints(fp({ seed: 1 }, runtime({ topP: 0.9 })), fp({ seed: 2 }));
    assert.equal(rows.find((r) => r.field === "decoding.seed")!.status, "ignored");
    assert.equal(rows.find((r) => r.field === "decoding.top_p")!.status, "ignored");
    const sampled = { temperature: 0.7, samplesPerTask: 4 };
    assert.deepEqual(gates(fp({ ...sampled, seed: 1 }), fp({ ...sampled, seed: 2 })), ["decoding.seed: 1 vs 2"]);
  });

  test("matchBaseline: greedy baseline vs greedy eval with another seed matches", () => {
    const summary = summarizeVariant(
      gradedResult(rows, { base: { t1: ["<answer>structuring</answer>"], t2: ["x"] } }).variants[0],
      DEFAULT_EVAL_SETTINGS.graders,
    );
    const baseline = buildBaseline({ ...DEFAULT_EVAL_SETTINGS, seed: 7 }, taskSet, model, summary, new Date(), runtime());
    const settings = { ...DEFAULT_EVAL_SETTINGS, seed: 0 };
    assert.deepEqual(matchBaseline(baseline, { model, taskSet: taskSetRef, settings, taskIds: ["t1", "t2"], fingerprint: fp(settings) }), { status: "match" });
  });

  test("device and dtype gate; batch size and library versions only warn", () => {
    const other = runtime({
      device: "cuda",
      dtype: "bf16",
      batchSize: 8,
      libraryVersions: { torch: "2.6.0", transformers: "4.57.0", peft: "0.17.0", trl: "0.24.0" },
    });
    const rows = compareFingerprints(fp(), fp({}, other));
    assert.deepEqual(fingerprintGates(rows), ["runtime.device: cpu vs cuda", "runtime.dtype: fp32 vs bf16"]);
    assert.deepEqual(fingerprintWarnings(rows), ["runtime.batch_size: 64 vs 8", "runtime.library_versions.torch: 2.5.1 vs 2.6.0"]);
  });

  test("other weights gate; the same weights under another folder name only warn", () => {
    const moved = fp({}, runtime({ model: "/elsewhere/tiny-renamed" }));
    moved.model.resolved = "/elsewhere/tiny-renamed";
    const rows = compareFingerprints(fp(), moved);
    assert.deepEqual(fingerprintGates(rows), []);
    assert.deepEqual(fingerprintWarnings(rows), ["model.resolved: tiny-aml-qwen2-s0-8ae0970906 vs tiny-renamed"]);
    assert.deepEqual(gates(fp(), fp({}, runtime({ weightsSha256: "22".repeat(32) }))), [`model.weights_sha256: ${"11".repeat(6)}… vs ${"22".repeat(6)}…`]);
  });

  test("a file older than the fingerprint: the run-time fields are 'not recorded', named, and never gate by themselves", () => {
    const rows = compareFingerprints(fp({}, null), fp());
    assert.deepEqual(fingerprintGates(rows), []);
    assert.deepEqual(fingerprintUnchecked(rows), [
      "model.weights_sha256",
      "model.revision",
      "prompt.format",
      "prompt.chat_template_sha256",
      "runtime.device",
      "runtime.dtype",
      "code.sidecar.grader_sha256",
      "code.sidecar.git_commit",
      "runtime.library_versions",
    ]);
  });

  test("the code revision (issue 26): a grader-code change gates, naming the field; another commit only warns", () => {
    const otherGrader = fp(
      {},
      runtime({ codeRevision: { packageVersion: "0.1.0", gitCommit: "c0".repeat(20), gitDirty: false, graderSha256: "44".repeat(32) } }),
    );
    assert.deepEqual(gates(fp(), otherGrader), [`code.sidecar.grader_sha256: ${"33".repeat(6)}… vs ${"44".repeat(6)}…`]);

    const agentEdited = fp();
    agentEdited.code!.agent = { ...agentEdited.code!.agent!, graderSha256: "55".repeat(32) };
    assert.deepEqual(gates(fp(), agentEdited), [`code.agent.grader_sha256: ${fp().code!.agent!.graderSha256.slice(0, 12)}… vs ${"55".repeat(6)}…`]);

    const laterCommit = fp(
      {},
      runtime({ codeRevision: { packageVersion: "0.1.0", gitCommit: "d1".repeat(20), gitDirty: true, graderSha256: "33".repeat(32) } }),
    );
    const rows = compareFingerprints(fp(), laterCommit);
    assert.deepEqual(fingerprintGates(rows), []);
    assert.deepEqual(fingerprintWarnings(rows), [`code.sidecar.git_commit: ${"c0".repeat(6)} vs ${"d1".repeat(6)} (dirty)`]);
  });

  test("a file older than the code revision: the code rows are 'not recorded' and never gate", () => {
    const older = fp();
    delete older.code;
    const rows = compareFingerprints(
      older,
      fp({}, runtime({ codeRevision: { packageVersion: "0.2.0", gitCommit: "", gitDirty: false, graderSha256: "66".repeat(32) } })),
    );
    assert.deepEqual(fingerprintGates(rows), []);
    assert.deepEqual(fingerprintUnchecked(rows), [
      "code.sidecar.grader_sha256",
      "code.agent.grader_sha256",
      "code.sidecar.git_commit",
      "code.agent.git_commit",
    ]);
  });
});
