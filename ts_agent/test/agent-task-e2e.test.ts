/**
 * An agent task written in TS (agent-evals/agent-tasks/calculator.agent.ts) trained and judged
 * through a real sidecar by bin/agent, as a user runs it: GRPO steps on episodes whose tool calls
 * run in this TS process, then base vs adapter episodes with --threshold (exit code), JUnit XML,
 * eval.json and report.md's episodes section; a malformed task file is one line, exit 2.
 */
import { strict as assert } from "node:assert";
import { spawn, spawnSync } from "node:child_process";
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

test("train on episodes, then eval base vs adapter with a threshold, JUnit XML and the episodes report", { timeout: 900_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "agent-task-"));
  const config = join(dir, "run.json");
  writeFileSync(config, JSON.stringify({
    grpo: { max_steps: 2, num_generations: 4, per_device_train_batch_size: 8, max_completion_length: 32, seed: 1 },
    held_out: { num_prompts: 2, samples_per_prompt: 2 },
  }));
  const train = agent(["train", "--agent-task", TASK, "--config", config, "--run-id", "calc-1"]);
  assert.equal(train.code, 0, train.stdout + train.stderr);
  assert.match(train.stdout, /step 2\/2 {2}reward [\d.]+ {2}turns\/episode [\d.]+ {2}tool calls\/episode [\d.]+ {2}tool errors\/call/);
  assert.match(train.stdout, /run calc-1: SUCCEEDED/);

  const out = join(dir, "eval");
  const ev = agent(["eval", "--agent-task", TASK, "--run", "calc-1", "--threshold", "0.99", "--out", out]);
  assert.equal(ev.code, 1, `the adapter cannot reach 99%: exit 1\n${ev.stdout}${ev.stderr}`);
  assert.match(ev.stdout, /calculator: base [\d.]+% -> adapter [\d.]+% on 48 test tasks/);
  assert.match(ev.stdout, /verdict: (CONFIRMED|PASS|FAIL|INCONCLUSIVE) \(/);
  assert.match(ev.stdout, /threshold: the adapter's success [\d.]+% is below 99\.0%: exit 1/);
  const junit = readFileSync(join(out, "junit.xml"), "utf8");
  assert.equal((junit.match(/<testcase /g) ?? []).length, 48);
  assert.match(junit, /<testsuite name="agent eval: calculator" tests="48" failures="\d+">/);
  const report = readFileSync(join(out, "report.md"), "utf8");
  for (const heading of ["## Episodes", "## Transcripts", "| tool errors |", "| calls to unknown tools |", "| malformed calls |", "| limits hit |"]) {
    assert.ok(report.includes(heading), heading);
  }
  assert.match(report, /Governing test: (exact McNemar|paired t)/);
  const saved = JSON.parse(readFileSync(join(out, "eval.json"), "utf8"));
  assert.equal(saved.judgement.n, 48);
  assert.equal(saved.result.variants.length, 2);
  assert.ok(existsSync(join(out, "report.md")));
});

test("a malformed agent task file is one line naming the field, exit 2", () => {
  const r = agent(["train", "--agent-task", join(REPO, "ts_agent", "test", "fixtures", "agent-tasks", "no-run.agent.ts")]);
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.match(r.stderr, /no-run\.agent\.ts: tools\.multiply\.run: must be a function/);
});

test("the agent process killed mid-run fails the run naming it; --resume serves the tools again and the run finishes", { timeout: 900_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "agent-task-kill-"));
  const config = join(dir, "run.json");
  writeFileSync(config, JSON.stringify({
    grpo: { max_steps: 6, num_generations: 4, per_device_train_batch_size: 8, max_completion_length: 32, save_steps: 1, seed: 2 },
    held_out: { num_prompts: 2, samples_per_prompt: 2 },
  }));
  const child = spawn(AGENT, ["train", "--agent-task", TASK, "--config", config, "--run-id", "calc-kill", "--address", sidecar().address]);
  let out = "";
  await new Promise<void>((res, rej) => {
    child.stdout.on("data", (d) => {
      out += d;
      if (/step 2\/6/.test(out)) {
        child.kill("SIGKILL");
        res();
      }
    });
    child.on("exit", () => rej(new Error(`agent train ended before step 2:\n${out}`)));
  });
  let runs = "";
  for (let i = 0; i < 240 && !/calc-kill\s+FAILED/.test(runs); i++) {
    await new Promise((r) => setTimeout(r, 500));
    runs = agent(["runs"]).stdout;
  }
  assert.match(runs, /calc-kill\s+FAILED/, runs);
  const events = readFileSync(join(sidecar().runsRoot, "calc-kill", "events.jsonl"), "utf8");
  assert.match(events, /agent\.tool_host: the TS agent's tool host at 127\.0\.0\.1:\d+ is gone/);
  const plain = agent(["resume", "calc-kill"]); // nothing would serve its tools: refused, the run left as it is
  assert.equal(plain.code, 2, plain.stdout + plain.stderr);
  assert.equal(plain.stderr.trim().split("\n").length, 1, plain.stderr);
  assert.match(plain.stderr, /run calc-kill trains an agent .*agent train --agent-task FILE --resume calc-kill/);
  assert.match(agent(["runs"]).stdout, /calc-kill\s+FAILED/);
  const resumed = agent(["train", "--agent-task", TASK, "--resume", "calc-kill"]);
  assert.equal(resumed.code, 0, resumed.stdout + resumed.stderr);
  assert.match(resumed.stdout, /run calc-kill resumed from its last checkpoint/);
  assert.match(resumed.stdout, /step 6\/6/);
  assert.match(resumed.stdout, /run calc-kill: SUCCEEDED/);
});
