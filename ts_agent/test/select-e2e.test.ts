/**
 * `agent select` against a real sidecar (issue 23): a 3-step run saving a checkpoint every step,
 * its kept checkpoints scored on validation rows (AML train rows it did not train on), one chosen
 * by the default rule, test evaluated once (one record in test-evals.jsonl), selection.json and
 * report.md's selection section; a later `agent eval` is a second look at test and the report
 * warns. Tiny budgets: 24 train rows, 8 validation and 8 test tasks.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { create } from "@bufbuild/protobuf";

import { main } from "../src/cli.js";
import { TrainRequestSchema } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { trainViaSidecar } from "../src/agent/train/run.js";
import { readTestEvals } from "../src/agent/eval/test-evals.js";
import { RunState, SidecarClient } from "../src/sidecar/client.js";
import { amlTrainRows, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

let sc: RunningSidecar;

before(async () => {
  sc = await startSidecar();
});
after(async () => {
  await sc?.stop("SIGTERM");
});

test("agent select: checkpoints on validation, the rule's choice, test once, the report's section and the second-look warning", { timeout: 600_000 }, async () => {
  const client = new SidecarClient({ address: sc.address });
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-select-"));
  const rows = amlTrainRows(24);
  const request = create(TrainRequestSchema, {
    runId: "select-e2e",
    dataset: { source: { case: "inline", value: { rows } } },
    rewards: [{ name: "exact_match", weight: 1 }],
    grpo: { maxSteps: 3, saveSteps: 1, saveTotalLimit: 0, numGenerations: 4, perDeviceTrainBatchSize: 8, maxCompletionLength: 12, seed: 1n },
    heldOut: { numPrompts: 4, samplesPerPrompt: 2 },
  });
  const out = await trainViaSidecar(client, request, { evalsDir, log: () => undefined });
  assert.equal(out.state, RunState.SUCCEEDED, out.reason);
  const dir = join(evalsDir, "runs", "select-e2e");
  const saved = readFileSync(join(dir, "events.jsonl"), "utf8").split("\n").filter((l) => l.includes('"checkpoint"'));
  assert.equal(saved.length, 3, "3 checkpoints saved");
  // save_total_limit 0 kept every one on the sidecar; one removed there (as a limit would) is
  // named and skipped by select, not an error
  const ckpts = join(sc.runsRoot, "select-e2e", "checkpoints");
  assert.deepEqual(readdirSync(ckpts).filter((f) => f.startsWith("checkpoint-")).sort(), ["checkpoint-1", "checkpoint-2", "checkpoint-3"]);
  rmSync(join(ckpts, "checkpoint-1"), { recursive: true });

  const log = console.log;
  const lines: string[] = [];
  console.log = (...a: unknown[]) => lines.push(a.join(" "));
  try {
    const flags = ["--address", sc.address, "--evals-dir", evalsDir, "--limit", "8"];
    assert.equal(await main(["select", "select-e2e", ...flags, "--val-limit", "8"]), 0);
    const sel = JSON.parse(readFileSync(join(dir, "selection.json"), "utf8"));
    assert.equal(sel.rule, "last-unless-better");
    assert.ok(lines.some((l) => l.startsWith("rule: last-unless-better: the last checkpoint, unless an earlier one is better")), lines.join("\n"));
    // validation: 8 AML train rows, none of the 20 the run trained on
    const trained = new Set(rows.slice(0, 20).map((r) => r.prompt));
    assert.equal(sel.validation.split, "train");
    assert.equal(sel.validation.n, 8);
    const result = lines.join("\n");
    assert.match(result, /validation: 8 train-split rows .*the 20 train-split prompts the run trained on are excluded/);
    assert.equal(trained.size, 20);
    // the curve: the checkpoints still on the sidecar, ascending; the removed one named
    const steps: number[] = sel.curve.map((p: { step: number }) => p.step);
    assert.deepEqual(steps, [2, 3]);
    assert.match(result, /checkpoint\(s\) at step 1 no longer on the sidecar .*selecting among 2, 3/);
    for (const p of sel.curve) assert.ok(p.accuracy && p.accuracy.n === 8, JSON.stringify(p));
    // the rule: the last unless an earlier one is better beyond its interval
    const better = sel.curve.filter((p: { betterThanLast: boolean }) => p.betterThanLast);
    for (const p of better) assert.ok(p.vsLast.decision.lower > 0, JSON.stringify(p));
    if (better.length === 0) assert.equal(sel.chosenStep, 3);
    else assert.ok(better.some((p: { step: number }) => p.step === sel.chosenStep));
    // test once, the chosen checkpoint
    assert.equal(sel.test.n, 8);
    assert.equal(sel.test.chosen.n, 8);
    assert.deepEqual(readTestEvals(evalsDir, "select-e2e").map((r) => [r.command, r.step, r.tasks]), [["select", sel.chosenStep, 8]]);

    assert.equal(await main(["report", "select-e2e", "--evals-dir", evalsDir]), 0);
    let md = readFileSync(join(dir, "report.md"), "utf8");
    assert.match(md, /## Checkpoint selection/);
    assert.match(md, new RegExp(`Chosen: \\*\\*step ${sel.chosenStep}\\*\\*`));
    assert.match(md, /test was evaluated once, after selection/);
    assert.match(md, /\(selection-curve\.svg\)/);
    assert.equal(readFileSync(join(dir, "selection-curve.svg"), "utf8").match(/<circle /g)?.length, steps.length + 1);
    assert.doesNotMatch(md, /looked at/);

    // a second look at test: agent eval of the same run
    assert.equal(await main(["eval", "select-e2e", ...flags]), 0);
    assert.deepEqual(readTestEvals(evalsDir, "select-e2e").map((r) => r.command), ["select", "eval"]);
    assert.equal(await main(["report", "select-e2e", "--evals-dir", evalsDir]), 0);
    md = readFileSync(join(dir, "report.md"), "utf8");
    assert.match(md, /the test split was looked at 2 times for this run: a number chosen after looking is optimistic/);
  } finally {
    console.log = log;
  }
});
