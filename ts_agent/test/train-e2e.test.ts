/**
 * The main path end to end: the TS client asks a real sidecar to GRPO-train the embedded default
 * model (TRL + PEFT in a worker process), follows the run, downloads and verifies the adapter,
 * and the held-out reward must have risen by a clear margin on this seeded run. Python then loads
 * the downloaded adapter with PeftModel.from_pretrained.
 *
 * The objective is one the 2-layer default model can learn in a CPU test budget: AML prompts whose
 * reward pays one fixed label ("structuring"), i.e. GRPO must move the policy's label choice
 * toward what exact_match pays, from reward alone (the default model answers in format with
 * uniformly random labels: ~1/8). Learning the real typology mapping takes far more steps than a
 * test can afford on 2 CPU cores (see the README's training notes); `make demo` runs that.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";

import { trainViaSidecar } from "../src/agent/train/run.js";
import { RunState, SidecarClient } from "../src/sidecar/client.js";
import { trainRequest } from "./helpers/requests.js";
import { PYTHON, REPO, amlTrainRows, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

const run = promisify(execFile);
let sc: RunningSidecar;

before(async () => {
  sc = await startSidecar();
});
after(async () => {
  await sc?.stop("SIGTERM");
});

test("GRPO through the sidecar raises the held-out reward; the adapter loads with PEFT", { timeout: 900_000 }, async () => {
  const client = new SidecarClient({ address: sc.address });
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-"));
  const rows = amlTrainRows(200).map((r) => ({ ...r, answers: ["structuring"] }));
  const request = trainRequest({ runId: "ts-e2e", rows, grpo: { maxSteps: 30, seed: 1 }, heldOut: { numPrompts: 32, samplesPerPrompt: 4 } });
  const lines: string[] = [];
  const out = await trainViaSidecar(client, request, { evalsDir, log: (l) => lines.push(l) });
  assert.equal(out.state, RunState.SUCCEEDED, out.reason);
  assert.ok(
    lines.some((l) => /^step 30\/30 reward \d\.\d{3} kl \d\.\d{4} elapsed \d+:\d\d ETA 0:00$/.test(l)),
    lines.join("\n"),
  );
  const r = out.result!;
  const start = r.startReward!.mean;
  const end = r.endReward!.mean;
  console.log(`held-out exact-match reward: step 0 ${start.toFixed(3)} -> end ${end.toFixed(3)} (${(r.relativeChange * 100).toFixed(1)}%)`);
  // Learning happened: +0.15 absolute on the same held-out prompts and sampling seed (measured
  // 0.11 -> 0.50 at these settings), and the paired bootstrap interval of the change excludes 0.
  assert.ok(end - start >= 0.15, `held-out reward ${start} -> ${end}`);
  assert.ok(r.relativeChangeCiLow > 0, `relative change CI [${r.relativeChangeCiLow}, ${r.relativeChangeCiHigh}]`);
  // Every artifact arrived and was verified; the events log was kept.
  for (const rel of [
    "adapter/adapter_config.json",
    "adapter/adapter_model.safetensors",
    "reward-vs-step.png",
    "reward-vs-step.csv",
    "summary.json",
    "run.json",
    "events.jsonl",
  ]) {
    assert.ok(existsSync(join(out.localDir, rel)), rel);
  }
  const csv = readFileSync(join(out.localDir, "reward-vs-step.csv"), "utf8").trim().split("\n");
  assert.equal(csv.length, 31);
  const { stdout } = await run(
    PYTHON,
    [
      "-c",
      [
        "import sys, torch",
        "from transformers import AutoModelForCausalLM",
        "from peft import PeftModel",
        "from py_trainer.models.tiny_model import ensure_default_model",
        "base = AutoModelForCausalLM.from_pretrained(str(ensure_default_model()))",
        "m = PeftModel.from_pretrained(base, sys.argv[1])",
        "n = sum(p.numel() for name, p in m.named_parameters() if 'lora_' in name)",
        "print('lora params', n)",
      ].join("\n"),
      join(out.localDir, "adapter"),
    ],
    { cwd: REPO, env: { ...process.env, HF_HUB_OFFLINE: "1" } },
  );
  assert.match(stdout, /lora params [1-9]\d*/);
});
