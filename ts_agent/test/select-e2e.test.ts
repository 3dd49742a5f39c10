/**
 * `agent select` against a real sidecar (issue 23): a 3-step run saving a checkpoint every step,
 * its kept checkpoints scored on validation rows (AML train rows it did not train on), one chosen
 * by the default rule, test evaluated once (one record in test-evals.jsonl), selection.json and
 * report.md's selection section; a later `agent eval` is a second look at test and the report
 * warns. Tiny budgets: 24 train rows, 8 validation and 8 test tasks. Then bin/agent select's
 * refusals (one line, exit 2), which need no sidecar.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { create, toJsonString } from "@bufbuild/protobuf";

import { main } from "../src/cli.js";
import { RunSchema, TrainRequestSchema } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { trainViaSidecar } from "../src/agent/train/run.js";
import { readTestEvals } from "../src/agent/eval/test-evals.js";
import { SELECTION_FILE, SELECTION_SCHEMA } from "../src/agent/verdict/checkpoint-selection-rule.js";
import { RunState, SidecarClient } from "../src/sidecar/client.js";
import { agentProcess } from "./helpers/agent-process.js";
import { captureConsole } from "./helpers/console.js";
import { trainRequest } from "./helpers/requests.js";
import { runFolder } from "./helpers/run-folders.js";
import { amlTrainRows, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

let sc: RunningSidecar;

before(async () => {
  sc = await startSidecar();
});
after(async () => {
  await sc?.stop("SIGTERM");
});

test(
  "agent select: checkpoints on validation, the rule's choice, test once, the report's section and the second-look warning",
  { timeout: 600_000 },
  async () => {
    const client = new SidecarClient({ address: sc.address });
    const evalsDir = mkdtempSync(join(tmpdir(), "evals-select-"));
    const rows = amlTrainRows(24);
    const request = trainRequest({
      runId: "select-e2e",
      rows,
      grpo: { maxSteps: 3, saveSteps: 1, saveTotalLimit: 0, numGenerations: 4, perDeviceTrainBatchSize: 8, maxCompletionLength: 12, seed: 1 },
      heldOut: { numPrompts: 4, samplesPerPrompt: 2 },
    });
    const out = await trainViaSidecar(client, request, { evalsDir, log: () => undefined });
    assert.equal(out.state, RunState.SUCCEEDED, out.reason);
    const dir = join(evalsDir, "runs", "select-e2e");
    const saved = readFileSync(join(dir, "events.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l.includes('"checkpoint"'));
    assert.equal(saved.length, 3, "3 checkpoints saved");
    // save_total_limit 0 kept every one on the sidecar; one removed there (as a limit would) is
    // named and skipped by select, not an error
    const ckpts = join(sc.runsRoot, "select-e2e", "checkpoints");
    assert.deepEqual(
      readdirSync(ckpts)
        .filter((f) => f.startsWith("checkpoint-"))
        .sort(),
      ["checkpoint-1", "checkpoint-2", "checkpoint-3"],
    );
    rmSync(join(ckpts, "checkpoint-1"), { recursive: true });

    await captureConsole(async (lines) => {
      const flags = ["--address", sc.address, "--evals-dir", evalsDir, "--limit", "8"];
      assert.equal(await main(["select", "select-e2e", ...flags, "--val-limit", "8"]), 0);
      const sel = JSON.parse(readFileSync(join(dir, "selection.json"), "utf8"));
      assert.equal(sel.rule, "last-unless-better");
      assert.ok(
        lines.some((l) => l.startsWith("rule: last-unless-better: the last checkpoint, unless an earlier one is better")),
        lines.join("\n"),
      );
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
      assert.deepEqual(
        readTestEvals(evalsDir, "select-e2e").map((r) => [r.command, r.step, r.tasks]),
        [["select", sel.chosenStep, 8]],
      );

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
      assert.deepEqual(
        readTestEvals(evalsDir, "select-e2e").map((r) => r.command),
        ["select", "eval"],
      );
      assert.equal(await main(["report", "select-e2e", "--evals-dir", evalsDir]), 0);
      md = readFileSync(join(dir, "report.md"), "utf8");
      assert.match(md, /the test split was looked at 2 times for this run: a number chosen after looking is optimistic/);
    });
  },
);

// bin/agent's refusals, before any sidecar call (the address is never dialled)

test("agent select refuses in one line (exit 2) when the run trained on every train-split row", () => {
  const { dir, run } = runFolder();
  const request = create(TrainRequestSchema, {
    dataset: { source: { case: "inline", value: { rows: amlTrainRows(100_000) } } },
    heldOut: { dataset: { source: { case: "inline", value: { rows: amlTrainRows(4) } } } },
  });
  writeFileSync(join(run, "run.json"), toJsonString(RunSchema, create(RunSchema, { runId: "r1", state: RunState.SUCCEEDED, request })));
  // the address is never dialled: the refusal comes before any call
  const r = agentProcess(["select", "r1", "--evals-dir", dir, "--address", "127.0.0.1:9"]);
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.match(
    r.stderr,
    /^agent select: no validation rows left: run r1 trained on all 616 train-split rows of agent-evals\/tasks\/aml_typology\.jsonl; .*dataset\.limit/,
  );
  assert.equal(r.stdout, "");
});

test("agent select: a user mistake is one line and exit 2 (no run id, an unknown --rule, an earlier selection without --force)", () => {
  const { dir, run } = runFolder();
  writeFileSync(join(run, SELECTION_FILE), JSON.stringify({ schema: SELECTION_SCHEMA, runId: "r1", date: "2026-12-01T10:00:00.000Z", chosenStep: 2 }));
  const agent = (...args: string[]) => agentProcess([...args, "--evals-dir", dir, "--address", "127.0.0.1:9"]);
  for (const [args, want] of [
    [["select"], /which run\? give its id/],
    [["select", "r1", "--rule", "newest"], /--rule newest: one of last-unless-better, best/],
    [["select", "r1"], /selection\.json already holds a selection \(step 2, 2026-12-01\); selecting again looks at test again: add --force to replace it/],
  ] as Array<[string[], RegExp]>) {
    const r = agent(...args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, want);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  }
  assert.equal(JSON.parse(readFileSync(join(run, SELECTION_FILE), "utf8")).chosenStep, 2);
});
