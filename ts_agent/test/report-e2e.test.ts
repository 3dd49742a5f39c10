/**
 * The demo path in miniature against a real sidecar (issue 10): a short GRPO run, `agent baseline
 * set --limit 8`, `agent eval` (the test split and its held-out-template companion in ONE Evaluate
 * request), and `agent report`: the report carries the decision interval and governing test, the
 * in-distribution and held-out-template deltas side by side, per typology with Holm-adjusted p,
 * the power curve, and calls 10 logged steps "undetermined". Tiny budgets; the verdict itself is
 * INCONCLUSIVE at n=8, which is the point.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { main } from "../src/cli.js";
import { trainViaSidecar } from "../src/agent/train/run.js";
import { RunState, SidecarClient } from "../src/sidecar/client.js";
import { captureConsole } from "./helpers/console.js";
import { trainRequest } from "./helpers/requests.js";
import { amlTrainRows, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

let sc: RunningSidecar;

before(async () => {
  sc = await startSidecar();
});
after(async () => {
  await sc?.stop("SIGTERM");
});

test("train 10 steps, baseline, eval with held-out templates, report", { timeout: 600_000 }, async () => {
  const client = new SidecarClient({ address: sc.address });
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const rows = amlTrainRows(64);
  const request = trainRequest({ runId: "report-e2e", rows, grpo: { maxSteps: 10, seed: 1 }, heldOut: { numPrompts: 8, samplesPerPrompt: 2 } });
  const out = await trainViaSidecar(client, request, { evalsDir, log: () => undefined });
  assert.equal(out.state, RunState.SUCCEEDED, out.reason);

  const { out: lines } = await captureConsole(async () => {
    const flags = ["--address", sc.address, "--evals-dir", evalsDir, "--limit", "8"];
    assert.equal(await main(["baseline", "set", ...flags]), 0);
    assert.equal(await main(["eval", "report-e2e", ...flags]), 0);
    assert.equal(await main(["report", "report-e2e", "--evals-dir", evalsDir]), 0);
  });
  assert.ok(
    lines.some((l) => /^held-out templates \(8 tasks\): adapter - base [+-]\d+\.\d pp/.test(l)),
    lines.join("\n"),
  );
  const dir = join(evalsDir, "runs", "report-e2e");
  const ev = JSON.parse(readFileSync(join(dir, "eval.json"), "utf8"));
  assert.equal(ev.taskSet.n, 8);
  assert.equal(ev.heldOutTemplate.taskSet.split, "test_heldout_template");
  assert.equal(ev.heldOutTemplate.taskSet.n, 8);
  // JUnit XML and the --threshold gate are exporters of any eval, a task file's too (issue 52)
  const junit = readFileSync(join(dir, "junit.xml"), "utf8");
  assert.equal((junit.match(/<testcase /g) ?? []).length, 8);
  assert.match(junit, /<testsuite name="agent eval: [^"]*aml_typology\.jsonl" tests="8" failures="\d+" skipped="\d+">/);
  assert.match(junit, /<property name="verdict" value="INCONCLUSIVE"\/>/);
  const adapterAccuracy = ev.variants.find((v: { name: string }) => v.name === "adapter").accuracy.estimate as number;
  const gate = await captureConsole(() =>
    main(["eval", "report-e2e", "--threshold", "0.99", "--address", sc.address, "--evals-dir", evalsDir, "--limit", "8"]),
  );
  assert.equal(gate.value, adapterAccuracy < 0.99 ? 1 : 0, gate.out.join("\n"));
  if (adapterAccuracy < 0.99)
    assert.ok(
      gate.out.some((l) => /^threshold: adapter's exact_match accuracy [\d.]+% is below 99\.0%: exit 1$/.test(l)),
      gate.out.join("\n"),
    );
  const md = readFileSync(join(dir, "report.md"), "utf8");
  assert.match(md, /held-out set of 8 prompts|too few (scorable )?prompts to carry a CI/);
  assert.match(md, /### In-distribution vs held-out templates[\s\S]*\| test_heldout_template \| 8 \|/);
  assert.match(md, /Per typology \(p from the governing test; Holm-adjusted/);
  assert.match(md, /curve too short|undetermined/);
  if (existsSync(join(dir, "power-curve.csv"))) assert.match(md, /power-curve\.svg/);
  // the confusion matrix is matplotlib's, drawn through the real `py-trainer plot confusion`
  const png = readFileSync(join(dir, "confusion-matrix.png"));
  assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
  assert.ok(png.length > 5000, `a drawn figure, not a stub (${png.length} bytes)`);
  assert.match(md, /!\[confusion matrices, gold label x answer, test split\]\(confusion-matrix\.png\)/);
  // issue 21: the fingerprint from a real sidecar, the same on both sides; the adapter as evaluated
  assert.match(ev.fingerprint.model.weightsSha256, /^[0-9a-f]{64}$/);
  assert.deepEqual([ev.fingerprint.runtime.device, ev.fingerprint.runtime.dtype], ["cpu", "fp32"]);
  const run = JSON.parse(readFileSync(join(dir, "run.json"), "utf8"));
  const listed = run.result.artifacts.find((a: { path: string }) => a.path === "adapter/adapter_model.safetensors");
  assert.deepEqual(ev.adapter, { runId: "report-e2e", sha256: listed.sha256, step: 10 });
  assert.match(md, /### baseline\.json vs this eval: the fingerprint/);
  assert.match(md, /\| model\.weights_sha256 \| [0-9a-f]{12}… \| [0-9a-f]{12}… \| gates \| same \|/);
  assert.doesNotMatch(md, /\*\*differs\*\*/);
  assert.match(md, /Adapter: eval\.json scored this run's adapter \(step 10, sha256 /);
  assert.ok(
    lines.some((l) => l === "baseline.json matches this eval (fingerprint and per-task check)"),
    lines.join("\n"),
  );
  assert.equal(await main(["baseline", "check", "report-e2e", "--evals-dir", evalsDir]), 0);
});
