/**
 * `agent sweep` against a real 2-slot sidecar (issue 28, item 4): one tiny request under 2 seeds,
 * submitted together, trained at once (one slot and one of the sidecar's 2 threads each: their
 * RUNNING intervals overlap on the sidecar), each evaluated (--limit 8) and reported; the sweep's
 * report.md has the replicate section (PASS share with its Wilson interval, the mean delta with a
 * t interval over 2 runs, the run shown in detail, where each seed ran) and each run's report says
 * its verdict is one draw and links the sweep. Then the same sweep one seed at a time
 * (`--parallel 1`, same sidecar, so the same threads per run) gives the same per-seed table: the
 * same adapter bytes and verdict for every seed.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { timestampMs } from "@bufbuild/protobuf/wkt";

import { main } from "../src/cli.js";
import { SidecarClient } from "../src/sidecar/client.js";
import { captureConsole } from "./helpers/console.js";
import { writeTrainConfig } from "./helpers/requests.js";
import { amlTrainRows, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

let sc: RunningSidecar;
let evalsDir: string;
let config: string;

before(async () => {
  // 2 slots of the sidecar's 2 threads: each run gets OMP_NUM_THREADS=1 on any machine
  sc = await startSidecar({ args: ["--slots", "2"], env: { OMP_NUM_THREADS: "2" } });
  evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const rows = amlTrainRows(48);
  config = writeTrainConfig(evalsDir, "request", { rows, grpo: { maxSteps: 4, seed: "3" }, heldOut: { numPrompts: 8, samplesPerPrompt: 2 } });
});
after(async () => {
  await sc?.stop("SIGTERM");
});

async function sweep(id: string, ...more: string[]): Promise<{ summary: SweepJson; lines: string[] }> {
  const { value: rc, out: lines } = await captureConsole(() =>
    main(["sweep", "--config", config, "--seeds", "2", "--sweep-id", id, "--limit", "8", "--address", sc.address, "--evals-dir", evalsDir, ...more]),
  );
  assert.equal(rc, 0, lines.join("\n"));
  return { summary: JSON.parse(readFileSync(join(evalsDir, "sweeps", id, "sweep.json"), "utf8")) as SweepJson, lines };
}

interface SweepJson {
  passed: number;
  delta: { n: number; method: string };
  placement: { inFlight: number; maxOverlap: number; concurrent: boolean };
  seeds: Array<{
    seed: number;
    runId: string;
    verdict: string;
    heldOut: unknown;
    downstream: unknown;
    heldOutTemplate: unknown;
    placement: { slots: number[] };
  }>;
}

/** The sidecar's own RUNNING intervals of two runs overlap. */
async function overlap(a: string, b: string): Promise<boolean> {
  const client = new SidecarClient({ address: sc.address });
  const [x, y] = [await client.getRun(a), await client.getRun(b)];
  const t = (r: typeof x, k: "startTime" | "endTime") => timestampMs(r[k]!);
  return t(x, "startTime") < t(y, "endTime") && t(y, "startTime") < t(x, "endTime");
}

const adapterSha = (runId: string) =>
  createHash("sha256")
    .update(readFileSync(join(evalsDir, "runs", runId, "adapter", "adapter_model.safetensors")))
    .digest("hex");

test("sweep: 2 seeds at once on a 2-slot sidecar, each evaluated and reported, and the replicate section", { timeout: 600_000 }, async () => {
  const { summary, lines } = await sweep("e2e");
  assert.ok(await overlap("e2e-s3", "e2e-s4"), "the 2 seeds' RUNNING intervals do not overlap on the sidecar");
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
  assert.deepEqual(
    summary.seeds.map((s) => s.seed),
    [3, 4],
  );
  assert.equal(summary.seeds.filter((s) => s.verdict === "PASS" || s.verdict === "CONFIRMED").length, summary.passed);
  assert.equal(summary.delta.n, 2);
  assert.match(summary.delta.method, /^t interval over 2 runs/);
  // where they ran: one slot each, the two slots, at once
  assert.deepEqual(summary.seeds.map((s) => s.placement.slots).sort(), [[0], [1]]);
  assert.deepEqual(summary.placement, { inFlight: 2, maxOverlap: 2, concurrent: true });
  const md = readFileSync(join(evalsDir, "sweeps", "e2e", "report.md"), "utf8");
  assert.match(md, /## Replicates: the recipe over seeds/);
  assert.match(md, /submitted to one sidecar up to 2 at a time; up to 2 trained at once \(overlapping RUNNING intervals/);
  assert.match(md, new RegExp(`${summary.passed}/2 PASS both criteria \\(Wilson 95% CI \\d\\.\\d\\d-\\d\\.\\d\\d\\)`));
  assert.match(md, /downstream adapter - base: mean [+-]\d+\.\d pp over 2 seeds \(95% CI .* t interval over 2 runs \(df 1\)\), between-seed SD \d+\.\d pp/);
  assert.match(md, /shown in detail: `e2e-s[34]`/);
  assert.match(md, /\| 3 \| e2e-s3 \|[^\n]*\| slot [01] \|\n\| 4 \| e2e-s4 \|[^\n]*\| slot [01] \|/);
  assert.ok(
    lines.some((l) => /^\[sweep\] \d\/2 PASS both criteria/.test(l)),
    lines.join("\n"),
  );
});

test("sweep --parallel 1 on the same sidecar: one after another, and the same per-seed table (adapter bytes, verdicts)", { timeout: 600_000 }, async () => {
  const { summary: seq } = await sweep("seq", "--parallel", "1");
  assert.ok(!(await overlap("seq-s3", "seq-s4")), "one at a time, yet the RUNNING intervals overlap");
  assert.deepEqual(seq.placement, { inFlight: 1, maxOverlap: 1, concurrent: false });
  const par = JSON.parse(readFileSync(join(evalsDir, "sweeps", "e2e", "sweep.json"), "utf8")) as SweepJson;
  for (const [i, seed] of [3, 4].entries()) {
    assert.equal(adapterSha(`seq-s${seed}`), adapterSha(`e2e-s${seed}`), `seed ${seed}: the adapter bytes differ`);
    const [a, b] = [seq.seeds[i], par.seeds[i]];
    assert.equal(a.seed, seed);
    assert.deepEqual(
      { v: a.verdict, h: a.heldOut, d: a.downstream, t: a.heldOutTemplate },
      { v: b.verdict, h: b.heldOut, d: b.downstream, t: b.heldOutTemplate },
      `seed ${seed}`,
    );
  }
});
