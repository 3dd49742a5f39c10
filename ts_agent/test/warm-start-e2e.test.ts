/**
 * Issue 53 item 2: a warm start before RL, through a real sidecar as a user runs it: `agent
 * warmstart` writes the task's reference demonstrations under the sidecar's data root and runs
 * LoRA SFT on them (TRL's SFTTrainer, the sidecar's SFT mode); `agent train --init-from` starts
 * GRPO from that adapter (the preflight samples the warm start, not the base); `agent eval` of the
 * GRPO run scores base, warm start and warm start + GRPO on the same test tasks, and report.md
 * shows the two paired steps with Holm-adjusted p. Learning itself is the sidecar's test
 * (tests/); this one checks the product path end to end.
 */
import { strict as assert } from "node:assert";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { AGENT } from "./helpers/agent-process.js";
import { REPO, sidecarForFile } from "./helpers/sidecar.js";

const sidecar = sidecarForFile();
const TASK = join(REPO, "agent-evals", "agent-tasks", "calculator.agent.ts");

function agent(args: string[]) {
  const r = spawnSync(AGENT, [...args, "--address", sidecar().address], { encoding: "utf8", timeout: 600_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("warm start, then GRPO from it, then base vs warm start vs warm start + GRPO", { timeout: 900_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "warm-start-"));
  const evals = join(dir, "evals");
  const sft = join(dir, "sft.json");
  writeFileSync(sft, JSON.stringify({ sft: { max_steps: 4, per_device_train_batch_size: 8, seed: 1 }, held_out: { num_prompts: 2, samples_per_prompt: 1 } }));
  const warm = agent([
    "warmstart",
    "--agent-task",
    TASK,
    "--config",
    sft,
    "--demonstrations",
    "32",
    "--run-id",
    "calc-warm",
    "--data-root",
    sidecar().dataRoot,
    "--evals-dir",
    evals,
  ]);
  assert.equal(warm.code, 0, warm.stdout + warm.stderr);
  assert.match(warm.stdout, /warm start of calculator on the embedded default model: \d+ demonstrations from reference\(task\), run through the task's tools/);
  assert.ok(existsSync(join(evals, "runs", "calc-warm", "adapter", "adapter_model.safetensors")));
  assert.equal(JSON.parse(readFileSync(join(evals, "runs", "calc-warm", "run.json"), "utf8")).request.mode, "TRAIN_MODE_SFT");

  const grpo = join(dir, "grpo.json");
  writeFileSync(
    grpo,
    JSON.stringify({
      grpo: { max_steps: 2, num_generations: 4, per_device_train_batch_size: 8, max_completion_length: 32, seed: 1 },
      held_out: { num_prompts: 2, samples_per_prompt: 2 },
    }),
  );
  const rl = agent(["train", "--agent-task", TASK, "--config", grpo, "--init-from", "calc-warm", "--run-id", "calc-rl", "--force", "--evals-dir", evals]);
  assert.equal(rl.code, 0, rl.stdout + rl.stderr);
  assert.match(rl.stdout, /preflight: the warm start calc-warm \(the embedded default model\)/);
  assert.equal(JSON.parse(readFileSync(join(evals, "runs", "calc-rl", "run.json"), "utf8")).request.initAdapter.runId, "calc-warm");

  const ev = agent(["eval", "calc-rl", "--limit", "16", "--evals-dir", evals]);
  assert.equal(ev.code, 0, ev.stdout + ev.stderr);
  assert.match(ev.stdout, /what the warm start gave \(base -> warm-start\): [-+][\d.]+ pp/);
  assert.match(ev.stdout, /what RL added \(warm-start -> warm-start \+ GRPO\): [-+][\d.]+ pp/);
  assert.match(ev.stdout, /what RL added \(warm-start -> warm-start \+ GRPO\): .*: (CONFIRMED|PASS|FAIL|INCONCLUSIVE)$/m);
  const log = JSON.parse(readFileSync(join(evals, "runs", "calc-rl", "eval.json"), "utf8"));
  assert.deepEqual(log.variants.map((v: { name: string }) => v.name).sort(), ["adapter", "base", "warm-start"]);
  assert.equal(agent(["report", "calc-rl", "--evals-dir", evals]).code, 0);
  const md = readFileSync(join(evals, "runs", "calc-rl", "report.md"), "utf8");
  assert.match(md, /## Warm start, then RL/);
  assert.match(md, /warm start \+ GRPO on the same 16 test tasks, greedy/);
  assert.match(md, /\| what RL added \| warm-start -> warm-start \+ GRPO \|/);
});
