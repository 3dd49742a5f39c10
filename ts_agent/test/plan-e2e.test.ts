/**
 * `agent plan --config run.json` (issue 23): the sidecar's EstimateMemory for the request, printed
 * component by component with the device's free memory; a request Train would refuse is refused
 * the same way, naming the field.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { REPO, amlTrainRows, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

const AGENT = join(REPO, "ts_agent", "bin", "agent");
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
  const request = { dataset: { inline: { rows: amlTrainRows(24) } }, grpo: { maxSteps: 2, numGenerations: 4, perDeviceTrainBatchSize: 8 }, heldOut: { numPrompts: 4 } };
  const r = plan(request);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^memory estimate on cpu \(per process, from the model's config\.json\):/m);
  for (const name of ["weights", "lora_parameters", "optimizer_state", "activations", "kv_cache", "total"]) assert.match(r.stdout, new RegExp(`^  ${name} +\\d+\\.\\d\\d GiB`, "m"), name);
  assert.match(r.stdout, /params x 4 bytes \(fp32\)/);
  assert.match(r.stdout, /^free on cpu: \d+\.\d\d GiB: fits$/m);
  const bad = plan({ ...request, grpo: { ...request.grpo, numGenerations: 1 } });
  assert.equal(bad.code, 1, bad.stdout + bad.stderr);
  assert.match(bad.stderr, /^agent plan: invalid_argument: grpo\.num_generations: must be in \[2, 256\]/);
});
