/**
 * Issue 28, item 4: a sweep's seeds go to the sidecar together. What it records and prints of
 * where they ran (pure parts; sweep-e2e.test.ts runs it on a real 2-slot sidecar): the most
 * RUNNING intervals at one instant, the placement sentence and cell, Ctrl-C with several runs on
 * the sidecar, the per-run log lines that name their run, and a seed the sidecar's full queue
 * refuses (submitted again when another run of the sweep ends).
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { Code } from "@connectrpc/connect";

import { maxOverlap, placementCell, placementLine, renderSweepReport, summarizeSweep, type SeedRun } from "../src/agent/replicate/across-seeds.js";
import { interruptLines } from "../src/pipeline/interrupt.js";
import { seedLog, untilAdmitted } from "../src/pipeline/seed-sweep.js";
import { SidecarError } from "../src/sidecar/client.js";

const seed = (s: number, startMs: number | null, endMs: number | null, slots: number[] = []): SeedRun => ({
  seed: s,
  runId: `sw-s${s}`,
  state: "SUCCEEDED",
  heldOut: null,
  downstream: { n: 8, delta: 0.05 * s, ciLow: 0, ciHigh: 0.1, method: "m" },
  heldOutTemplate: null,
  verdict: "PASS",
  rewardVerdict: "PASS",
  downstreamVerdict: "PASS",
  trainSeconds: 10,
  wallSeconds: 20,
  report: `runs/sw-s${s}/report.md`,
  placement: { slots, node: "", startMs, endMs },
});

test("the most RUNNING intervals at one instant: touching end-to-start is not at once; a run that never ran counts nowhere", () => {
  assert.equal(maxOverlap([]), 0);
  assert.equal(
    maxOverlap([
      { startMs: 0, endMs: 10 },
      { startMs: 10, endMs: 20 },
    ]),
    1,
  );
  assert.equal(
    maxOverlap([
      { startMs: 0, endMs: 10 },
      { startMs: 5, endMs: 20 },
      { startMs: 6, endMs: 7 },
    ]),
    3,
  );
  assert.equal(
    maxOverlap([
      { startMs: 0, endMs: 10 },
      { startMs: null, endMs: null },
      { startMs: 9, endMs: 12 },
    ]),
    2,
  );
});

test("the summary and report say how the seeds were placed: at once with slots, or one after another", () => {
  const together = summarizeSweep("sw", "req", [seed(1, 0, 100, [0]), seed(2, 50, 150, [1])], 2);
  assert.deepEqual(together.placement, { inFlight: 2, maxOverlap: 2, concurrent: true });
  assert.match(placementLine(together), /^submitted to one sidecar up to 2 at a time; up to 2 trained at once/);
  const md = renderSweepReport(together, { docs: "d", runs: "r" });
  assert.match(md, /\| train s \| placement \|/);
  assert.match(md, /\| 1 \| sw-s1 \|.*\| slot 0 \|\n\| 2 \| sw-s2 \|.*\| slot 1 \|/);
  const apart = summarizeSweep("sw", "req", [seed(1, 0, 100, [0]), seed(2, 100, 200, [0])], 2);
  assert.equal(apart.placement!.concurrent, false);
  assert.match(placementLine(apart), /they trained one after another \(no two RUNNING intervals overlap\)/);
  assert.equal(placementCell({ slots: [0, 1], node: "10.0.0.2 ab12", startMs: 0, endMs: 1 }), "slots 0,1 on node 10.0.0.2 ab12");
  assert.equal(placementCell(undefined), "-");
  // a sweep.json written before placements were recorded still renders
  const old = { ...together, placement: undefined, seeds: together.seeds.map((s) => ({ ...s, placement: undefined })) };
  assert.match(renderSweepReport(old, { docs: "d", runs: "r" }), /one after another on the same sidecar[\s\S]*\| 1 \| sw-s1 \|.*\| - \|/);
});

test("Ctrl-C with several runs of a sweep on the sidecar names each with its watch and cancel commands", () => {
  const lines = interruptLines({ command: "sweep", runId: "", runIds: ["sw-s3", "sw-s4"], seedsLeft: [5], sweepId: "sw", flags: { address: "h:1" } });
  assert.ok(lines.includes("runs sw-s3, sw-s4 keep running on the sidecar (queued ones start as slots free)."), lines.join("\n"));
  for (const id of ["sw-s3", "sw-s4"]) {
    assert.ok(lines.includes(`  cancel ${id}:  agent cancel ${id} --address h:1`), lines.join("\n"));
    assert.ok(
      lines.some((l) => l.startsWith(`  follow ${id}:  agent watch ${id} `)),
      lines.join("\n"),
    );
  }
  assert.ok(lines.includes("seeds not started: 5"));
  assert.match(interruptLines({ command: "sweep", runId: "", runIds: [], sweepId: "sw", flags: {} }).join("\n"), /no run of the sweep is on the sidecar now/);
  assert.ok(interruptLines({ command: "sweep", runId: "", runIds: ["sw-s3"], flags: {} }).includes("run sw-s3 keeps running on the sidecar."));
});

test("each seed's lines name its run; step lines at most every interval and at the last step", () => {
  const printed: string[] = [];
  const log = seedLog("sw-s3", (l) => printed.push(l), 60_000);
  log("[sw-s3] RUNNING", true);
  log("step 1/4 reward 0.1", false, { step: 1, maxSteps: 4 });
  log("step 2/4 reward 0.1", false, { step: 2, maxSteps: 4 });
  log("warning [W] at step 2: x", true);
  log("step 4/4 reward 0.2", false, { step: 4, maxSteps: 4 });
  assert.deepEqual(printed, ["[sw-s3] RUNNING", "[sw-s3] step 1/4 reward 0.1", "[sw-s3] warning [W] at step 2: x", "[sw-s3] step 4/4 reward 0.2"]);
});

test("a seed the full queue refuses is submitted again when another run of the sweep ends; with none on the sidecar the refusal stands", async () => {
  const full = () => new SidecarError("the run queue is full (8 waiting); retry later", Code.ResourceExhausted, undefined);
  let tries = 0;
  let ends = 0;
  const refused: string[] = [];
  const got = await untilAdmitted(
    async () => {
      if (++tries < 3) throw full();
      return "admitted";
    },
    { othersOnSidecar: () => 1, nextEnd: async () => void ends++, onRefused: (e) => refused.push(e.message) },
  );
  assert.equal(got, "admitted");
  assert.equal(tries, 3);
  assert.equal(ends, 2); // waited for a run of the sweep to end before each new try
  assert.equal(refused.length, 2);
  // no other run of the sweep on the sidecar: nothing of ours frees a place
  const never = async () => {
    throw new Error("waited for a run of the sweep that is not on the sidecar");
  };
  await assert.rejects(
    untilAdmitted(() => Promise.reject(full()), { othersOnSidecar: () => 0, nextEnd: never }),
    /queue is full/,
  );
  // another refusal (a bad request) is never retried
  let bad = 0;
  const invalid = () => new SidecarError("grpo.seed: bad", Code.InvalidArgument, undefined);
  await assert.rejects(
    untilAdmitted(() => (bad++, Promise.reject(invalid())), { othersOnSidecar: () => 3, nextEnd: async () => undefined }),
    /grpo\.seed/,
  );
  assert.equal(bad, 1);
});
