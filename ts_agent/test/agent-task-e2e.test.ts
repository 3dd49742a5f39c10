/**
 * An agent task written in TS (agent-evals/agent-tasks/calculator.agent.ts) trained and judged
 * through a real sidecar by bin/agent, as a user runs it: GRPO steps on episodes whose tool calls
 * run in this TS process, then base vs adapter episodes with --threshold (exit code), JUnit XML,
 * eval.json and report.md's episodes section; a malformed task file is one line, exit 2.
 */
import { strict as assert } from "node:assert";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { EVAL_LOG_SCHEMA, loggedEpisode, readEvalLog } from "../src/agent/core/eval-log.js";
import { AGENT } from "./helpers/agent-process.js";
import { REPO, sidecarForFile } from "./helpers/sidecar.js";

const sidecar = sidecarForFile();
const TASK = join(REPO, "agent-evals", "agent-tasks", "calculator.agent.ts");

/** A copy of the task beside it (its relative import of defineAgentTask must resolve), removed by the caller. */
function besideTask(tag: string, text: string): string {
  const path = join(REPO, "agent-evals", "agent-tasks", `.calculator-${tag}-${process.pid}.agent.ts`);
  writeFileSync(path, text);
  return path;
}

function agent(args: string[]) {
  const r = spawnSync(AGENT, [...args, "--address", sidecar().address], { encoding: "utf8", timeout: 600_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("an agent run is a run: train, baseline, eval (one verdict, eval log, junit, threshold), report, compare, delete", { timeout: 900_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "agent-task-"));
  const evals = join(dir, "evals");
  const config = join(dir, "run.json");
  writeFileSync(
    config,
    JSON.stringify({
      grpo: { max_steps: 2, num_generations: 4, per_device_train_batch_size: 8, max_completion_length: 32, seed: 1 },
      held_out: { num_prompts: 2, samples_per_prompt: 2 },
    }),
  );
  // the preflight: the embedded default model never calls the calculator's tool, every group is flat
  const plan = agent(["plan", "--agent-task", TASK, "--config", config]);
  assert.equal(plan.code, 0, plan.stdout + plan.stderr);
  assert.match(
    plan.stdout,
    /preflight: the base \(the embedded default model\) on 8 train tasks x G=4 episodes at temperature 1: tool calls in 0% of episodes, well-formed calls - \(no call attempted\), scorers correct 0\.00, used_tool 0\.00; groups with all rewards equal: 8\/8/,
  );
  assert.match(plan.stdout, /No signal for GRPO: in all 8 groups of 4 episodes every episode scored 0\. GRPO learns from the differences within a group/);
  const refused = agent(["train", "--agent-task", TASK, "--config", config, "--run-id", "calc-1", "--evals-dir", evals]);
  assert.equal(refused.code, 2, refused.stdout + refused.stderr);
  assert.match(refused.stdout, /No signal for GRPO/);
  assert.match(refused.stderr, /agent train: not started: no group of the base's episodes has a spread.*--force trains anyway/);
  assert.doesNotMatch(agent(["runs"]).stdout, /calc-1\s/);
  const train = agent(["train", "--agent-task", TASK, "--config", config, "--run-id", "calc-1", "--evals-dir", evals, "--force"]);
  assert.equal(train.code, 0, train.stdout + train.stderr);
  assert.match(train.stdout, /step 2\/2 reward [\d.]+ kl [-\d.e]+ turns\/episode [\d.]+ tool calls\/episode [\d.]+ tool errors\/call [\d.]+ limits hit/);
  assert.match(train.stdout, /SUCCEEDED/);
  // run.json and the artifacts, as for any run; the agent task file recorded with the run
  const run = JSON.parse(readFileSync(join(evals, "runs", "calc-1", "run.json"), "utf8"));
  assert.equal(run.request.agent.source.path, TASK);
  assert.equal(run.request.agent.source.sha256, createHash("sha256").update(readFileSync(TASK)).digest("hex"));
  assert.ok(existsSync(join(evals, "runs", "calc-1", "adapter", "adapter_model.safetensors")));

  const base = agent(["baseline", "set", "--agent-task", TASK, "--evals-dir", evals]);
  assert.equal(base.code, 0, base.stdout + base.stderr);

  // the run's own agent task file, from its record: no --agent-task needed
  const ev = agent(["eval", "calc-1", "--threshold", "0.99", "--evals-dir", evals]);
  assert.equal(ev.code, 1, `the adapter cannot reach 99%: exit 1\n${ev.stdout}${ev.stderr}`);
  assert.match(ev.stdout, /adapter - base: [-+][\d.]+ pp \(95% CI .*(exact McNemar test|paired t test|exact sign test|undefined)/);
  assert.match(ev.stdout, /downstream: INCONCLUSIVE .*n=48 < 200 test tasks the milestone needs/);
  assert.match(ev.stdout, /baseline\.json matches this eval/);
  assert.match(ev.stdout, /threshold: adapter's correct accuracy [\d.]+% is below 99\.0%: exit 1/);
  const log = readEvalLog(join(evals, "runs", "calc-1", "eval.json"));
  assert.equal(log.schema, EVAL_LOG_SCHEMA);
  assert.equal(log.taskSet.n, 48);
  assert.equal(log.agentTask?.name, "calculator");
  assert.ok(log.fingerprint && log.fingerprint.taskSet.sha256 === run.request.agent.source.sha256);
  const ep = loggedEpisode((log.result as { variants: Array<{ tasks: Array<{ samples: never[] }> }> }).variants[1].tasks[0].samples[0]);
  assert.ok(ep && ep.messages.some((m) => m.role === "user") && typeof ep.endedBy === "string" && ep.endedBy !== "");
  const junit = readFileSync(join(evals, "runs", "calc-1", "junit.xml"), "utf8");
  assert.equal((junit.match(/<testcase /g) ?? []).length, 48);
  assert.match(junit, /<testsuite name="agent eval: calculator" tests="48" failures="\d+" skipped="\d+">/);
  assert.match(junit, /<property name="verdict" value="INCONCLUSIVE"\/>/);
  assert.match(readFileSync(join(evals, "runs", "calc-1", "test-evals.jsonl"), "utf8"), /"command":"eval"/);

  const report = agent(["report", "calc-1", "--evals-dir", evals]);
  assert.equal(report.code, 0, report.stdout + report.stderr);
  const md = readFileSync(join(evals, "runs", "calc-1", "report.md"), "utf8");
  for (const heading of [
    "## Episodes",
    "## Transcripts",
    "| tool errors |",
    "| calls to unknown tools |",
    "| malformed calls |",
    "| limits hit |",
    "milestone",
  ]) {
    assert.ok(md.includes(heading), heading);
  }
  assert.match(md, /Picked by the base-vs-adapter pair/);
  // the calculator's base never acts: every group of every step was flat, and the report says so first
  assert.match(md, /\*\*No signal: in every one of the 2 logged steps every group's rewards were equal/);

  // an edited agent task file is refused, naming both sha256
  const edited = besideTask("edited", readFileSync(TASK, "utf8") + "\n// edited\n");
  const changed = agent(["eval", "calc-1", "--agent-task", edited, "--evals-dir", evals]);
  rmSync(edited);
  assert.equal(changed.code, 2, changed.stdout + changed.stderr);
  assert.match(
    changed.stderr,
    /changed since run calc-1 trained on it \(sha256 [0-9a-f]{12} now, [0-9a-f]{12} in the run; no tool, scorer, limit, system prompt or task changed in its own text/,
  );

  const del = agent(["delete", "calc-1", "--evals-dir", evals, "--yes"]);
  assert.equal(del.code, 0, del.stdout + del.stderr);
  assert.doesNotMatch(agent(["runs"]).stdout, /calc-1\s/); // gone from the sidecar
  assert.ok(existsSync(join(evals, "runs", "calc-1", "run.json"))); // the downloaded copy is the user's
});

test("a malformed agent task file is one line naming the field, exit 2", () => {
  const r = agent(["train", "--agent-task", join(REPO, "ts_agent", "test", "fixtures", "agent-tasks", "no-run.agent.ts")]);
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.match(r.stderr, /no-run\.agent\.ts: tools\.multiply\.run: must be a function/);
});

test(
  "the agent process killed mid-run fails the run naming it; agent resume serves the recorded file's tools again and the run finishes",
  { timeout: 900_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-task-kill-"));
    const config = join(dir, "run.json");
    writeFileSync(
      config,
      JSON.stringify({
        grpo: { max_steps: 6, num_generations: 4, per_device_train_batch_size: 8, max_completion_length: 32, save_steps: 1, seed: 2 },
        held_out: { num_prompts: 2, samples_per_prompt: 2 },
      }),
    );
    const evals = join(dir, "evals");
    const child = spawn(
      AGENT,
      ["train", "--agent-task", TASK, "--config", config, "--run-id", "calc-kill", "--evals-dir", evals, "--force", "--address", sidecar().address],
      { detached: true },
    ); // its own process group: the kill takes the whole agent (tsx runs node as a child)
    let out = "";
    await new Promise<void>((res, rej) => {
      child.stdout.on("data", (d) => {
        out += d;
        if (/step 2\/6/.test(out)) {
          process.kill(-child.pid!, "SIGKILL");
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
    // a file that is not the one the run recorded is refused, the run left as it is
    const other = besideTask("other", readFileSync(TASK, "utf8").replace("weight: 0.2", "weight: 0.3"));
    const refused = agent(["train", "--agent-task", other, "--resume", "calc-kill", "--evals-dir", evals]);
    rmSync(other);
    assert.equal(refused.code, 2, refused.stdout + refused.stderr);
    assert.equal(refused.stderr.trim().split("\n").length, 1, refused.stderr);
    assert.match(
      refused.stderr,
      /changed since run calc-kill trained on it \(.*changed: scorers\.used_tool\): restore the file the run used, or pass --accept-changed-task/,
    );
    assert.match(agent(["runs"]).stdout, /calc-kill\s+FAILED/);
    // plain `agent resume` serves the tools of the file the run recorded again
    const resumed = agent(["resume", "calc-kill", "--evals-dir", evals]);
    assert.equal(resumed.code, 0, resumed.stdout + resumed.stderr);
    assert.match(resumed.stdout, /run calc-kill resumed from its last checkpoint/);
    assert.match(resumed.stdout, /step 6\/6/);
    assert.match(resumed.stdout, /SUCCEEDED/);
    assert.ok(existsSync(join(evals, "runs", "calc-kill", "run.json")));
  },
);

test(
  "Ctrl-C on an agent run cancels it at a step (it needs this process), prints the resume command, and resume finishes it",
  { timeout: 900_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-task-int-"));
    const evals = join(dir, "evals");
    const config = join(dir, "run.json");
    writeFileSync(
      config,
      JSON.stringify({
        grpo: { max_steps: 8, num_generations: 4, per_device_train_batch_size: 8, max_completion_length: 32, save_steps: 1, seed: 3 },
        held_out: { num_prompts: 2, samples_per_prompt: 2 },
      }),
    );
    const child = spawn(AGENT, [
      "train",
      "--agent-task",
      TASK,
      "--config",
      config,
      "--run-id",
      "calc-int",
      "--evals-dir",
      evals,
      "--force",
      "--address",
      sidecar().address,
    ]);
    let out = "";
    const code = await new Promise<number | null>((res) => {
      let sent = false;
      child.stdout.on("data", (d) => {
        out += d;
        if (!sent && /step 2\/8/.test(out)) {
          sent = true;
          child.kill("SIGINT");
        }
      });
      child.on("exit", (c) => res(c));
    });
    assert.equal(code, 130, out);
    assert.match(out, /Ctrl-C: an agent run needs this process .* run calc-int is cancelled at its next step instead of detached/);
    assert.match(out, /CANCELLED/);
    assert.match(out, /continue it from its last checkpoint: agent resume calc-int/);
    assert.doesNotMatch(out, /FAILED/);
    const resumed = agent(["resume", "calc-int", "--evals-dir", evals]);
    assert.equal(resumed.code, 0, resumed.stdout + resumed.stderr);
    assert.match(resumed.stdout, /step 8\/8/);
    assert.match(resumed.stdout, /SUCCEEDED/);
  },
);
