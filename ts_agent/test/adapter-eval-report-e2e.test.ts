/**
 * `agent eval --adapter PATH` is no dead end (issue 22, item 11): its eval.json carries the
 * held-out-template split, `agent report <name>` and `agent report --eval FILE` report it (the
 * downstream comparison on both splits, no milestone: it is not a run), and an absolute path is
 * refused up front naming the sidecar's data root. The sidecar is an in-process TrainerService
 * whose Evaluate answers with completions graded by the TS graders (as a correct sidecar would).
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { EvaluateResponseSchema } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import type { TaskRow } from "../src/agent/core/task-format.js";
import { gradedResult, runtimeFingerprint } from "./helpers/eval-fixtures.js";
import { agentAsync, startFakeSidecar, type FakeSidecar } from "./helpers/fake-sidecar.js";
import { REPO } from "./helpers/sidecar.js";

const TASKS = join(REPO, "agent-evals", "tasks", "aml_typology.jsonl");
let sc: FakeSidecar;
const evalsDir = mkdtempSync(join(tmpdir(), "evals-adapter-"));
const seen: Array<{ adapters: unknown; tasks: number }> = [];

before(async () => {
  sc = await startFakeSidecar({
    async *evaluate(req) {
      const rows = req.tasks?.source.case === "inline" ? req.tasks.source.value.rows : [];
      seen.push({ adapters: req.adapters.map((a) => a.source), tasks: rows.length });
      const taskRows = rows.map((r) => ({ id: r.id, answers: r.answers }) as unknown as TaskRow);
      // the base answers one label everywhere, the adapter the right one on 3 tasks of 4
      const base = Object.fromEntries(rows.map((r) => [r.id, ["<answer>money_mule</answer>"]]));
      const adapter = Object.fromEntries(rows.map((r, i) => [r.id, [`<answer>${i % 4 === 0 ? "layering" : r.answers[0]}</answer>`]]));
      const result = gradedResult(taskRows, { base, adapter });
      result.fingerprint = runtimeFingerprint();
      result.adapters = [{ $typeName: "grpo.trainer.v1.EvaluatedAdapter", name: "adapter", runId: "", sha256: "ab".repeat(32), step: 0n }];
      yield create(EvaluateResponseSchema, { kind: { case: "result", value: result } });
    },
  });
});
after(async () => sc?.close());

const agent = (args: string[]) => agentAsync([...args, "--address", sc.address, "--evals-dir", evalsDir, "--timeout", "10000"]);

test("agent eval --adapter: the held-out-template split goes in the same request and into eval.json; agent report reports it", async () => {
  const ev = await agent(["eval", "--adapter", "adapters/aml-v2", "--tasks", TASKS, "--limit", "20"]);
  assert.equal(ev.code, 0, ev.stdout + ev.stderr);
  assert.equal(seen.length, 1);
  assert.deepEqual(seen[0].adapters, [{ case: "path", value: "adapters/aml-v2" }]);
  assert.equal(seen[0].tasks, 40, "20 test + 20 held-out-template tasks in one Evaluate");
  assert.match(ev.stdout, /on 20 test tasks of .* and 20 held-out-template tasks/);
  assert.match(ev.stdout, /^held-out templates \(20 tasks\): adapter - base /m);
  const log = JSON.parse(readFileSync(join(evalsDir, "runs", "aml-v2", "eval.json"), "utf8"));
  assert.equal(log.heldOutTemplate.taskSet.n, 20);
  assert.equal(log.adapter.runId, "");

  for (const args of [
    ["report", "aml-v2"],
    ["report", "--eval", join(evalsDir, "runs", "aml-v2", "eval.json")],
  ]) {
    const r = await agent(args);
    assert.equal(r.code, 0, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
    assert.doesNotMatch(r.stdout + r.stderr, /not downloaded|agent download/);
    assert.match(r.stdout, /^downstream: (PASS|CONFIRMED|FAIL|INCONCLUSIVE)( \(GATED on baseline\.json\))?: /m);
    assert.match(r.stdout, /wrote .*runs\/aml-v2\/report\.md/);
  }
  const md = readFileSync(join(evalsDir, "runs", "aml-v2", "report.md"), "utf8");
  assert.match(md, /^# Adapter eval `aml-v2`: report/);
  assert.match(md, /not a run of this sidecar, so there is no training curve, no held-out reward and no milestone verdict/);
  assert.match(md, /held-out-template split: 20 tasks/);
  assert.match(md, /test_heldout_template/, "the split's own table");
  assert.doesNotMatch(md, /reward-vs-step|Milestone verdict/);
  assert.ok(!existsSync(join(evalsDir, "runs", "aml-v2", "run.json")));
});

test("agent eval --adapter with an absolute path: one line, exit 2, naming the data root, before any sidecar call", async () => {
  const before = sc.calls.length;
  const r = await agent(["eval", "--adapter", "/models/aml-v2", "--tasks", TASKS]);
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.match(
    r.stderr,
    /^agent eval: --adapter \/models\/aml-v2: give the folder relative to the sidecar's data root \(py-trainer serve --data-root DIR; .*\), e\.g\. --adapter adapters\/aml-v2/,
  );
  assert.equal(sc.calls.length, before);
});

test("agent report --eval: a missing file or a run id beside it is one line, exit 2", async () => {
  const missing = await agent(["report", "--eval", join(evalsDir, "nope.json")]);
  assert.equal(missing.code, 2, missing.stderr);
  assert.match(missing.stderr.trim(), /^agent report: --eval .*nope\.json: no such file$/);
  const both = await agent(["report", "r1", "--eval", "x.json"]);
  assert.equal(both.code, 2);
  assert.match(both.stderr, /give a run id or --eval FILE, not both/);
});
