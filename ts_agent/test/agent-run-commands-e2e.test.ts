/**
 * Issue 52, item 4: agent runs are runs. Every command that takes a run takes an agent run through
 * its own code, with the agent task file the run recorded: `agent sweep --agent-task` (two seeds,
 * this process serving the tools), `agent compare` of the two, `agent select` on one's
 * checkpoints (its held-out rows as validation, its test rows once), `agent export --merge`
 * (checked on the agent task's own test prompts) and `agent sweep --from-run` of an agent run.
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

test("sweep, compare, select, export --merge and sweep --from-run on agent runs", { timeout: 900_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "agent-runs-"));
  const evals = join(dir, "evals");
  const config = join(dir, "knobs.json");
  writeFileSync(
    config,
    JSON.stringify({
      grpo: { max_steps: 2, num_generations: 4, per_device_train_batch_size: 8, max_completion_length: 32, save_steps: 1, seed: 1 },
      held_out: { num_prompts: 4, samples_per_prompt: 1 },
    }),
  );
  const sweepArgs = [
    "sweep",
    "--agent-task",
    TASK,
    "--config",
    config,
    "--seeds",
    "2",
    "--sweep-id",
    "calc",
    "--parallel",
    "1",
    "--limit",
    "8",
    "--evals-dir",
    evals,
  ];
  // the calculator's base never calls its tool: the preflight refuses the sweep, --force runs it
  const refused = agent(sweepArgs);
  assert.equal(refused.code, 2, refused.stdout + refused.stderr);
  assert.match(refused.stderr, /agent sweep: not started: no group of the base's episodes has a spread/);
  const sweep = agent([...sweepArgs, "--force"]);
  assert.equal(sweep.code, 0, sweep.stdout + sweep.stderr);
  assert.match(sweep.stdout, /\[sweep\] seed 2: (CONFIRMED|PASS|FAIL|INCONCLUSIVE)/);
  for (const id of ["calc-s1", "calc-s2"]) {
    const run = JSON.parse(readFileSync(join(evals, "runs", id, "run.json"), "utf8"));
    assert.equal(run.request.agent.source.path, TASK, id);
    assert.equal(JSON.parse(readFileSync(join(evals, "runs", id, "eval.json"), "utf8")).agentTask.name, "calculator");
  }

  const cmp = agent(["compare", "calc-s1", "calc-s2", "--id", "c1", "--limit", "8", "--evals-dir", evals]);
  assert.equal(cmp.code, 0, cmp.stdout + cmp.stderr);
  assert.match(cmp.stdout, /calculator\.agent\.ts/);
  assert.ok(existsSync(join(evals, "compare", "c1")));

  const sel = agent(["select", "calc-s1", "--limit", "8", "--evals-dir", evals]);
  assert.equal(sel.code, 0, sel.stdout + sel.stderr);
  assert.match(sel.stdout, /validation: 4 train-split rows of .*calculator\.agent\.ts/);
  assert.match(sel.stdout, /chosen: step \d/);

  const out = join(dir, "merged");
  const exp = agent(["export", "calc-s1", "--merge", "--out", out, "--check-prompts", "2", "--evals-dir", evals]);
  assert.equal(exp.code, 0, exp.stdout + exp.stderr);
  assert.ok(existsSync(join(out, "config.json")));

  const again = agent([
    "sweep",
    "--from-run",
    "calc-s1",
    "--seeds",
    "1",
    "--first-seed",
    "5",
    "--sweep-id",
    "again",
    "--limit",
    "8",
    "--evals-dir",
    evals,
    "--force",
  ]);
  assert.equal(again.code, 0, again.stdout + again.stderr);
  assert.equal(JSON.parse(readFileSync(join(evals, "runs", "again-s5", "run.json"), "utf8")).request.agent.source.path, TASK);
});
