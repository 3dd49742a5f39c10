/**
 * `agent plan` in a process of its own (bin/agent). With --config run.json (issue 23): the
 * sidecar's EstimateMemory for the request, printed component by component with the device's free
 * memory; a request Train would refuse is refused the same way, naming the field. With --tasks:
 * a baseline.json made on another task file is refused.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { AGENT, agentProcess } from "./helpers/agent-process.js";
import { REPO, amlTrainRows, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

let sc: RunningSidecar;

before(async () => {
  sc = await startSidecar();
});
after(async () => {
  await sc?.stop("SIGTERM");
});

function plan(config: object) {
  const dir = mkdtempSync(join(tmpdir(), "plan-mem-"));
  const path = join(dir, "run.json");
  writeFileSync(path, JSON.stringify(config));
  const r = spawnSync(AGENT, ["plan", "--config", path, "--address", sc.address], { encoding: "utf8", timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("agent plan --config prints the estimate per component against the free memory", { timeout: 180_000 }, () => {
  const request = {
    dataset: { inline: { rows: amlTrainRows(24) } },
    grpo: { maxSteps: 2, numGenerations: 4, perDeviceTrainBatchSize: 8 },
    heldOut: { numPrompts: 4 },
  };
  const r = plan(request);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^memory estimate on cpu \(per process, from the model's config\.json\):/m);
  for (const name of ["weights", "lora_parameters", "optimizer_state", "activations", "kv_cache", "total"])
    assert.match(r.stdout, new RegExp(`^  ${name} +\\d+\\.\\d\\d GiB`, "m"), name);
  assert.match(r.stdout, /params x 4 bytes \(fp32\)/);
  assert.match(r.stdout, /^free on cpu: \d+\.\d\d GiB: fits$/m);
  const bad = plan({ ...request, grpo: { ...request.grpo, numGenerations: 1 } });
  assert.equal(bad.code, 2, bad.stdout + bad.stderr); // INVALID_ARGUMENT is the user's mistake (issue 32, item 5)
  assert.match(bad.stderr, /^agent plan: invalid_argument: grpo\.num_generations: must be in \[2, 256\]/);
});

test("agent plan refuses a baseline.json made on another task file (it used the AML baseline's accuracy for any --tasks)", () => {
  const dir = mkdtempSync(join(tmpdir(), "evals-plan-"));
  writeFileSync(
    join(dir, "baseline.json"),
    JSON.stringify({
      schema: "agent-baseline/v1",
      date: "2026-11-01T00:00:00Z",
      model: { requested: "", resolved: "m" },
      taskSet: { path: "agent-evals/tasks/aml_typology.jsonl", sha256: "ab", split: "test", n: 264 },
      grader: { name: "exact_match", params: {} },
      samplesPerTask: 1,
      temperature: 0,
      maxNewTokens: 32,
      seed: 0,
      perTask: {},
      accuracy: { estimate: 0.545, lower: 0.485, upper: 0.604, n: 264, method: "wilson" },
      meanScores: {},
      settings: {},
    }),
  );
  const tasks = join(REPO, "agent-evals", "tasks", "ticket_routing.jsonl");
  const r = agentProcess(["plan", "--tasks", tasks, "--evals-dir", dir]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(
    r.stderr,
    /^agent plan: .*baseline\.json was made on agent-evals\/tasks\/aml_typology\.jsonl, not agent-evals\/tasks\/ticket_routing\.jsonl: .*--base-accuracy P\n$/,
  );
  assert.equal(r.stdout, "");
});
