/**
 * Every user mistake at `agent` is one line on stderr naming the file and the field (or the flag),
 * exit 2, and no stack frames: table-driven, each case through the real entry point (bin/agent).
 * None of them needs a sidecar. Also: per-command help lists every flag and an example.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { agentProcess } from "./helpers/agent-process.js";

const dir = mkdtempSync(join(tmpdir(), "agent-errors-"));
const file = (name: string, text: string) => {
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};

// an address nothing listens on: a case that reached the sidecar would fail with exit 1, not 2
const agent = (args: string[]) => agentProcess(args, { AGENT_SIDECAR: "127.0.0.1:9" });

const dirOf = (path: string) => path.slice(0, path.lastIndexOf("/"));
const MINIMAL_BASELINE = {
  schema: "agent-baseline/v1",
  date: "2026-11-01T00:00:00Z",
  model: { requested: "", resolved: "m" },
  taskSet: { path: "x", sha256: "ab", split: "test", n: 0 },
  grader: { name: "exact_match", params: {} },
  samplesPerTask: 1,
  temperature: 0,
  maxNewTokens: 32,
  seed: 0,
  perTask: {},
  accuracy: null,
  meanScores: {},
  settings: {},
};

/** A downloaded run (run.json and a PEFT adapter_config.json) under `dir`, for the export rows. */
function downloadedRun(runId: string): string {
  mkdirSync(join(dir, "runs", runId, "adapter"), { recursive: true });
  writeFileSync(join(dir, "runs", runId, "run.json"), JSON.stringify({ runId, state: "RUN_STATE_SUCCEEDED" }));
  writeFileSync(join(dir, "runs", runId, "adapter", "adapter_config.json"), "{}");
  return runId;
}

const CASES: Array<[string, string[], RegExp]> = [
  ["unknown command", ["trian"], /^agent: unknown command 'trian' \(did you mean train\?\)/],
  ["unknown flag", ["train", "--conifg", "x.json"], /^agent train: unknown flag --conifg \(did you mean --config\?\)/],
  ["unknown flag before the command", ["--adress", "h:1", "runs"], /unknown flag --adress \(did you mean --address\?\)/],
  ["missing config file", ["train", "--config", join(dir, "nope.json")], /^agent train: .*nope\.json: no such file$/],
  ["bad JSON with line and column", ["train", "--config", file("bad.json", '{\n  "grpo": {"maxSteps": 3,}\n}')], /bad\.json:2:26: not valid JSON/],
  [
    "misspelt key, camelCase",
    ["train", "--config", file("camel.json", '{"grpo": {"maxStep": 3}}')],
    /camel\.json: grpo\.maxStep: unknown field \(did you mean maxSteps\?\)/,
  ],
  [
    "misspelt key, proto names",
    ["train", "--config", file("snake.json", '{"grpo": {"max_step": 3}}')],
    /snake\.json: grpo\.max_step: unknown field \(did you mean max_steps\?\)/,
  ],
  ["bad number in the config", ["train", "--config", file("num.json", '{"grpo": {"maxSteps": "abc"}}')], /num\.json: .*max_steps.*"abc"/],
  ["not an object", ["train", "--config", file("arr.json", "[1]")], /arr\.json: expected a JSON object/],
  ["train without --config", ["train"], /^agent train: --config FILE is required/],
  ["bad --timeout", ["--timeout", "abc", "health"], /--timeout: expected an integer, got 'abc'/],
  ["bad --limit", ["eval", "r1", "--limit", "abc"], /--limit: expected an integer, got 'abc'/],
  [
    "greedy K > 1",
    ["eval", "r1", "--samples", "4", "--temperature", "0"],
    /^agent eval: --temperature 0 \(greedy\) gives K identical samples: use --samples 1, or a temperature above 0 \(usage: /,
  ],
  ["temperature over 2", ["eval", "r1", "--temperature", "2.5"], /^agent eval: --temperature: must be <= 2, got 2\.5$/],
  ["missing value", ["train", "--config"], /^agent train: Option '--config <value>' argument missing/],
  ["negative count", ["eval", "r1", "--limit", "-3"], /^agent eval: --limit -3: not a valid value \(it starts with '-'; see agent eval --help\)$/],
  ["negative count, plan", ["plan", "--limit", "-3"], /^agent plan: --limit -3: not a valid value/],
  ["cancel without a run", ["cancel"], /^agent cancel: which run\? give its id/],
  ["watch with two runs", ["watch", "a", "b"], /^agent watch: one run id, please/],
  ["unknown state", ["runs", "--state", "runing"], /--state: unknown state 'runing' \(did you mean RUNNING\?\)/],
  ["report of a run not downloaded", ["report", "r-404", "--evals-dir", dir], /run r-404 is not downloaded .*fetch it with: agent download r-404 --evals-dir /],
  ["export of a run not downloaded", ["export", "r-404", "--evals-dir", dir], /fetch it with: agent download r-404/],
  [
    "export --out a file",
    ["export", downloadedRun("exp-1"), "--evals-dir", dir, "--out", file("a-file", "x")],
    /^agent export: --out .*a-file: is a file, not a folder/,
  ],
  [
    "export --merge --out a file",
    ["export", downloadedRun("exp-1"), "--merge", "--evals-dir", dir, "--out", file("a-file", "x")],
    /^agent export: --out .*a-file: is a file, not a folder/,
  ],
  [
    "export --out in a missing folder",
    ["export", downloadedRun("exp-1"), "--evals-dir", dir, "--out", join(dir, "no-such", "x")],
    /^agent export: --out .*no-such\/x: its parent folder .*no-such does not exist/,
  ],
  [
    "export --merge --out in a missing folder",
    ["export", downloadedRun("exp-1"), "--merge", "--evals-dir", dir, "--out", join(dir, "no-such", "x")],
    /its parent folder .*no-such does not exist/,
  ],
  [
    "export --merge --check-prompts 0",
    ["export", downloadedRun("exp-1"), "--merge", "--evals-dir", dir, "--check-prompts", "0"],
    /^agent export: --check-prompts: must be a positive integer, got "0"/,
  ],
  ["cancel takes no --evals-dir (the detach hint does not print it)", ["cancel", "r1", "--evals-dir", dir], /^agent cancel: unknown flag --evals-dir/],
  [
    "eval --adapter with an absolute path",
    ["eval", "--adapter", "/models/aml-v2"],
    /^agent eval: --adapter \/models\/aml-v2: give the folder relative to the sidecar's data root \(py-trainer serve --data-root DIR/,
  ],
  ["report --eval of a missing file", ["report", "--eval", join(dir, "nope-eval.json")], /^agent report: --eval .*nope-eval\.json: no such file$/],
  [
    "report --eval of a file that is no eval log",
    ["report", "--eval", file("not-eval.json", '{"schema": "x"}')],
    /^agent report: --eval .*not-eval\.json: not an eval log/,
  ],
  ["baseline history with an argument", ["baseline", "history", "x", "--evals-dir", dir], /^agent baseline history: unexpected argument 'x'/],
  ["eval --name without --adapter", ["eval", "r1", "--name", "x"], /--name goes with --adapter/],
  ["baseline check with two runs", ["baseline", "check", "a", "b", "--evals-dir", dir], /^agent baseline check: one run id at most, got 2/],
  [
    "baseline check of a run never evaluated",
    ["baseline", "check", "r-404", "--evals-dir", dirOf(file("baseline.json", JSON.stringify(MINIMAL_BASELINE)))],
    /^agent baseline check: run r-404 has no eval\.json .*\(evaluate it with: agent eval r-404\)/,
  ],
];

for (const [what, args, want] of CASES) {
  test(`user mistake -> one line, exit 2: ${what}`, () => {
    const r = agent(args);
    const lines = r.stderr.split("\n").filter((l) => l.trim());
    assert.equal(r.code, 2, `exit ${r.code}\n${r.stderr}`);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0], want);
    assert.doesNotMatch(r.stderr + r.stdout, /^\s+at /m, "no stack frames");
  });
}

test("a sidecar that is not there is exit 1 with the address, not a stack trace", () => {
  const r = agent(["runs", "--timeout", "2000"]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /^agent runs: unavailable: sidecar at 127\.0\.0\.1:9 is unavailable/);
  assert.doesNotMatch(r.stderr, /^\s+at /m);
});

test("every command's --help lists its flags and an example; agent --help lists every command", () => {
  const top = agent(["--help"]);
  assert.equal(top.code, 0);
  for (const name of ["health", "runs", "train", "watch", "cancel", "delete", "download", "eval", "try", "baseline", "report", "export", "demo", "sweep"]) {
    assert.match(top.stdout, new RegExp(`^  ${name} `, "m"), name);
    const r = agent([name, "--help"]);
    assert.equal(r.code, 0, `${name}: ${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^usage: agent ${name}`), name);
    assert.match(r.stdout, /^examples?:\n {2}\S/m, name);
    assert.match(r.stdout, /--address HOST:PORT/, name);
  }
  const train = agent(["train", "--help"]).stdout;
  for (const flag of ["--config FILE", "--run-id ID", "--evals-dir DIR"]) assert.ok(train.includes(flag), flag);
  assert.match(agent(["runs", "--help"]).stdout, /--state S/);
  assert.match(agent(["eval", "--help"]).stdout, /--adapter PATH/);
  assert.match(agent(["export", "--help"]).stdout, /--merge/);
  assert.match(agent(["delete", "--help"]).stdout, /--yes/);
  assert.match(top.stdout, /^ {2}serve-policy /m);
  assert.match(agent(["serve-policy", "--help"]).stdout, /^usage: agent serve-policy <run_id>/);
  assert.match(agent(["report", "--help"]).stdout, /--eval FILE/);
  assert.match(agent(["baseline", "--help"]).stdout, /agent baseline history/);
  const sweep = agent(["sweep", "--help"]).stdout;
  for (const flag of ["--config FILE", "--from-run ID", "--seeds N", "--first-seed S", "--limit N"]) assert.ok(sweep.includes(flag), flag);
});

test("agent sweep: user mistakes are one line and exit 2, before any sidecar is called", () => {
  const evals = mkdtempSync(join(tmpdir(), "evals-"));
  const cases: Array<[string[], RegExp]> = [
    [["--seeds", "0"], /--seeds/],
    [["--seeds", "two"], /--seeds/],
    [["--first-seed", "-1"], /--first-seed/],
    [["--sweep-id", "bad id"], /--sweep-id 'bad id' must be 1-50 of \[A-Za-z0-9_-\]/],
    [["--config", "a.json", "--from-run", "r1"], /give --config or --from-run, not both/],
    [["--from-run", "nope"], /--from-run nope: no runs\/nope\/run\.json with a request/],
    [["--config", join(evals, "missing.json")], /missing\.json/],
  ];
  for (const [args, message] of cases) {
    const r = agent(["sweep", ...args, "--evals-dir", evals, "--address", "127.0.0.1:9", "--timeout", "2000"]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, message, args.join(" "));
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  }
});

test("a task file that does not load is one line and exit 2 in every command that reads it, before any sidecar is called", () => {
  const dir = mkdtempSync(join(tmpdir(), "tasks-"));
  const bad = join(dir, "sentiment.jsonl");
  // a sentiment file in the task format loads (docs/tasks.md); one whose answers are not a list does not
  writeFileSync(bad, JSON.stringify({ id: "s1", split: "train", prompt: "Great film?", answers: "positive", label: "positive" }) + "\n");
  const runs: Array<[string[], RegExp]> = [
    [["sweep", "--tasks", bad], /^agent sweep: .*sentiment\.jsonl:1: field "answers" must be a non-empty array of non-empty strings$/],
    [["baseline", "set", "--tasks", bad], /^agent baseline: .*sentiment\.jsonl:1: field "answers"/],
    [["plan", "--tasks", bad, "--base-accuracy", "0.5"], /^agent plan: .*sentiment\.jsonl:1: field "answers"/],
    [["sweep", "--tasks", join(dir, "missing.jsonl")], /^agent sweep: .*missing\.jsonl: cannot read the task file \(ENOENT\)$/],
  ];
  for (const [args, message] of runs) {
    const r = agent([...args, "--evals-dir", dir, "--address", "127.0.0.1:9", "--timeout", "2000"]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr.trim(), message);
    assert.doesNotMatch(r.stderr, /^\s+at /m);
  }
});

test("a malformed task file in a process of its own: one line on stderr, exit 2, no stack trace (baseline set, demo)", () => {
  const sub = mkdtempSync(join(tmpdir(), "task-format-process-"));
  const path = join(sub, "tickets.jsonl");
  // task-format.test.ts's valid ticket row, then one whose answers are not a list
  const rows = [
    { id: "t1", split: "test", label: "billing", product: "web_portal", prompt: "ticket 1", answers: ["billing", "bills"], template: "billing/1" },
    { id: "t2", split: "train", label: "billing", product: "web_portal", prompt: "ticket 2", answers: "billing", template: "billing/1" },
  ];
  writeFileSync(path, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
  for (const args of [["baseline", "set"], ["demo"]]) {
    const r = agent([...args, "--tasks", path, "--evals-dir", sub]);
    assert.equal(r.code, 2, r.stderr);
    assert.equal(r.stderr.trim(), `agent ${args[0]}: ${path}:2: field "answers" must be a non-empty array of non-empty strings`);
  }
});

test("agent serve-policy: a run that is not downloaded, or has no adapter, is one line and exit 2", () => {
  const evals = mkdtempSync(join(tmpdir(), "serve-policy-"));
  let r = agent(["serve-policy", "nope", "--evals-dir", evals]);
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  assert.match(r.stderr, /^agent serve-policy: no run nope under .*\(agent download nope first\)/);
  mkdirSync(join(evals, "runs", "r1"), { recursive: true });
  writeFileSync(join(evals, "runs", "r1", "run.json"), JSON.stringify({ request: { baseModel: "" } }));
  r = agent(["serve-policy", "r1", "--evals-dir", evals]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /^agent serve-policy: run r1 has no adapter at /);
  r = agent(["serve-policy", "--evals-dir", evals]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /give one run id/);
});
