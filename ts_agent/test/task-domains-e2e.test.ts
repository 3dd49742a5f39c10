/**
 * Issue 20 end to end against a real sidecar: `agent demo --tasks <generated non-AML file>` with
 * a tiny request runs baseline, train, eval and report on the embedded model the sidecar builds
 * from that file (base_model "embedded:<file>"), and report.md's per-slice tables are named
 * after the file's slice field. Then `agent eval <run>` uses the run's base and records it, and
 * refuses in one line when that base is gone. The open-answer set (no label, no template) goes
 * through the same loop and its report names what it skips. Tiny budgets: 2 GRPO steps.
 */
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { main } from "../src/cli.js";
import { compareSplits } from "../src/agent/verdict/verdict.js";
import { captureConsole } from "./helpers/console.js";
import { writeTrainConfig } from "./helpers/requests.js";
import { REPO, sidecarForFile } from "./helpers/sidecar.js";

const sidecar = sidecarForFile(); // PY_TRAINER_DATA_ROOT = its data root: where embedded:<file> is resolved

/** The shipped file and its metadata copied under the sidecar's data root. */
function underDataRoot(name: string): string {
  const dir = join(sidecar().dataRoot, "tasks");
  mkdirSync(dir, { recursive: true });
  for (const ext of [".jsonl", ".meta.json"]) copyFileSync(join(REPO, "agent-evals", "tasks", name + ext), join(dir, name + ext));
  return join(dir, `${name}.jsonl`);
}

/** A tiny request: no dataset and no base (demo --tasks fills both), 2 steps. */
function tinyConfig(dir: string, runId: string): string {
  return writeTrainConfig(dir, runId, {
    runId,
    grpo: { maxSteps: 2, perDeviceTrainBatchSize: 8, numGenerations: 4, maxCompletionLength: 16, seed: "1" },
    heldOut: { numPrompts: 4, samplesPerPrompt: 2 },
  });
}

async function quietly(f: () => Promise<number>): Promise<{ code: number; out: string[]; err: string[] }> {
  const { value: code, out, err } = await captureConsole(f);
  return { code, out, err };
}

test(
  "agent demo --tasks ticket_routing.jsonl: the loop on its embedded model, per-product tables; agent eval uses the run's base and refuses it when gone",
  { timeout: 900_000 },
  async () => {
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-tickets-"));
    const tasks = underDataRoot("ticket_routing");
    const base = "embedded:tasks/ticket_routing.jsonl";
    const demo = await quietly(() =>
      main(["demo", "--address", sidecar().address, "--config", tinyConfig(evalsDir, "tickets-e2e"), "--tasks", tasks, "--evals-dir", evalsDir]),
    );
    assert.equal(demo.code, 0, [...demo.out, ...demo.err].join("\n"));
    assert.ok(
      demo.out.some((l) => l.startsWith(`[demo] training ${base} on 140 inline train rows`)),
      demo.out.join("\n"),
    );

    const baseline = JSON.parse(readFileSync(join(evalsDir, "baseline.json"), "utf8"));
    assert.equal(baseline.model.requested, base);
    assert.match(baseline.model.resolved, /tiny-qwen2-ticket_routing-s0-[0-9a-f]{10}$/);
    const dir = join(evalsDir, "runs", "tickets-e2e");
    const run = JSON.parse(readFileSync(join(dir, "run.json"), "utf8"));
    assert.equal(run.request.baseModel, base);
    const ev = JSON.parse(readFileSync(join(dir, "eval.json"), "utf8"));
    assert.equal(ev.model.requested, base);
    assert.equal(ev.model.resolved, baseline.model.resolved);
    assert.deepEqual([ev.taskSet.n, ev.taskSet.sliceField, ev.heldOutTemplate.taskSet.n], [60, "product", 60]);
    const md = readFileSync(join(dir, "report.md"), "utf8");
    assert.match(md, /Per product \(p from the governing test/);
    assert.match(md, /\| split \| product \| tasks \|/);
    assert.match(md, /\| test \| (mobile_app|smart_speaker|web_portal) \| \d+ \|/);
    assert.match(md, /\| test_heldout_template \| 60 \|/);
    assert.doesNotMatch(md, /typology/i);
    assert.doesNotMatch(md, /Skipped for this task set/);

    // agent eval of the run on its own: the run's base, recorded
    const again = await quietly(() => main(["eval", "tickets-e2e", "--address", sidecar().address, "--tasks", tasks, "--limit", "4", "--evals-dir", evalsDir]));
    assert.equal(again.code, 0, again.err.join("\n"));
    assert.ok(
      again.out.some((l) => l.startsWith(`evaluating base (${base}) and tickets-e2e's adapter on 4 test tasks`)),
      again.out.join("\n"),
    );
    assert.equal(JSON.parse(readFileSync(join(dir, "eval.json"), "utf8")).model.requested, base);

    // the base gone from this sidecar's data root: one line, naming it, nothing written
    const elsewhere = join(mkdtempSync(join(tmpdir(), "tasks-copy-")), "ticket_routing.jsonl");
    copyFileSync(tasks, elsewhere);
    copyFileSync(tasks.replace(/\.jsonl$/, ".meta.json"), elsewhere.replace(/\.jsonl$/, ".meta.json"));
    rmSync(tasks);
    const before = readFileSync(join(dir, "eval.json"), "utf8");
    const gone = await quietly(() =>
      main(["eval", "tickets-e2e", "--address", sidecar().address, "--tasks", elsewhere, "--limit", "4", "--evals-dir", evalsDir]),
    );
    assert.equal(gone.code, 2);
    assert.equal(gone.err.length, 1, gone.err.join("\n"));
    assert.match(
      gone.err[0],
      /^agent eval: tickets-e2e was trained on embedded:tasks\/ticket_routing\.jsonl, which is not available here \(not_found: base_model: .*does not exist\)$/,
    );
    assert.equal(readFileSync(join(dir, "eval.json"), "utf8"), before);
  },
);

test("agent demo --tasks arithmetic.jsonl: open answers, no templates; the report names what it skips", { timeout: 900_000 }, async () => {
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-arith-"));
  const tasks = underDataRoot("arithmetic");
  const demo = await quietly(() =>
    main(["demo", "--address", sidecar().address, "--config", tinyConfig(evalsDir, "arith-e2e"), "--tasks", tasks, "--evals-dir", evalsDir]),
  );
  assert.equal(demo.code, 0, [...demo.out, ...demo.err].join("\n"));
  const dir = join(evalsDir, "runs", "arith-e2e");
  const ev = JSON.parse(readFileSync(join(dir, "eval.json"), "utf8"));
  assert.equal(ev.model.requested, "embedded:tasks/arithmetic.jsonl");
  assert.equal(ev.heldOutTemplate ?? null, null);
  assert.deepEqual([ev.taskSet.labels, ev.taskSet.hasTemplates, compareSplits(ev)[0].comparison?.clustered ?? null], [null, false, null]);
  const md = readFileSync(join(dir, "report.md"), "utf8");
  assert.match(md, /Skipped for this task set/);
  assert.match(md, /- no held-out-template split and no template-clustered SE: the tasks carry no "template" field/);
  assert.match(md, /- no confusion matrix: no closed label set/);
  assert.match(md, /Per operation \(p from the governing test/);
  assert.match(md, /\| test \| (addition|subtraction) \| \d+ \|/);
});
