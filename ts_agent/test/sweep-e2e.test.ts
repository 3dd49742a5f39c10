/**
 * `agent sweep` against a real sidecar: one tiny request under 2 seeds, one after another, each
 * trained, evaluated (--limit 8) and reported; the sweep's report.md has the replicate section
 * (PASS share with its Wilson interval, the mean delta with a t interval over 2 runs, the run shown
 * in detail) and each run's report says its verdict is one draw and links the sweep.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { main } from "../src/cli.js";
import { captureConsole } from "./helpers/console.js";
import { writeTrainConfig } from "./helpers/requests.js";
import { amlTrainRows, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

let sc: RunningSidecar;

before(async () => {
  sc = await startSidecar();
});
after(async () => {
  await sc?.stop("SIGTERM");
});

test("sweep: 2 seeds of a 4-step request, each evaluated and reported, and the replicate section", { timeout: 600_000 }, async () => {
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const rows = amlTrainRows(48);
  const config = writeTrainConfig(evalsDir, "request", { rows, grpo: { maxSteps: 4, seed: "3" }, heldOut: { numPrompts: 8, samplesPerPrompt: 2 } });

  const { value: rc, out: lines } = await captureConsole(() =>
    main(["sweep", "--config", config, "--seeds", "2", "--sweep-id", "e2e", "--limit", "8", "--address", sc.address, "--evals-dir", evalsDir]),
  );
  assert.equal(rc, 0, lines.join("\n"));
  for (const seed of [3, 4]) {
    const dir = join(evalsDir, "runs", `e2e-s${seed}`);
    assert.ok(existsSync(join(dir, "adapter", "adapter_model.safetensors")), `seed ${seed} adapter`);
    assert.ok(existsSync(join(dir, "eval.json")), `seed ${seed} eval`);
    const run = JSON.parse(readFileSync(join(dir, "run.json"), "utf8"));
    assert.equal(String(run.request.grpo.seed), String(seed));
    const md = readFileSync(join(dir, "report.md"), "utf8");
    assert.match(md, /one draw of the training randomness/);
    assert.match(md, /sweeps\/e2e\/report\.md/);
  }
  const summary = JSON.parse(readFileSync(join(evalsDir, "sweeps", "e2e", "sweep.json"), "utf8"));
  assert.deepEqual(summary.seeds.map((s: { seed: number }) => s.seed), [3, 4]);
  assert.equal(summary.seeds.filter((s: { verdict: string }) => s.verdict === "PASS" || s.verdict === "CONFIRMED").length, summary.passed);
  assert.equal(summary.delta.n, 2);
  assert.match(summary.delta.method, /^t interval over 2 runs/);
  const md = readFileSync(join(evalsDir, "sweeps", "e2e", "report.md"), "utf8");
  assert.match(md, /## Replicates: the recipe over seeds/);
  assert.match(md, new RegExp(`${summary.passed}/2 PASS both criteria \\(Wilson 95% CI \\d\\.\\d\\d-\\d\\.\\d\\d\\)`));
  assert.match(md, /downstream adapter - base: mean [+-]\d+\.\d pp over 2 seeds \(95% CI .* t interval over 2 runs \(df 1\)\), between-seed SD \d+\.\d pp/);
  assert.match(md, /shown in detail: `e2e-s[34]`/);
  assert.match(md, /\| 3 \| e2e-s3 \|[\s\S]*\| 4 \| e2e-s4 \|/);
  assert.ok(lines.some((l) => /^\[sweep\] \d\/2 PASS both criteria/.test(l)), lines.join("\n"));
});
