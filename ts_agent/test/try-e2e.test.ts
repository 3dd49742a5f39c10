/**
 * `agent try <run> --prompt TEXT` against a real sidecar on the embedded tiny model (issue 45 item
 * 6): a 2-step run, then one prompt through its base and its adapter, greedy; the completions it
 * prints are the ones an Evaluate of that prompt as a task gives (same request path, same prompt
 * formatting); --answer grades them by the run's task file's graders, --base-only leaves the
 * adapter out, and a mistake is one line and exit 2.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { DEFAULT_EVAL_SETTINGS, runEvaluate } from "../src/agent/eval/evaluate.js";
import { trainViaSidecar } from "../src/agent/train/run.js";
import { RunState, SidecarClient } from "../src/sidecar/client.js";
import { agentAsync } from "./helpers/fake-sidecar.js";
import { trainRequest } from "./helpers/requests.js";
import { REPO, amlTrainRows, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

let sc: RunningSidecar;
const evalsDir = mkdtempSync(join(tmpdir(), "evals-try-"));
const RUN = "try-e2e";
// an AML test task: its prompt and label
const TASK = readFileSync(join(REPO, "agent-evals", "tasks", "aml_typology.jsonl"), "utf8")
  .split("\n")
  .map((l) => (l ? (JSON.parse(l) as { id: string; split: string; prompt: string; answers: string[] }) : null))
  .find((r) => r?.split === "test")!;

before(async () => {
  sc = await startSidecar();
  const client = new SidecarClient({ address: sc.address });
  const request = trainRequest({
    runId: RUN,
    rows: amlTrainRows(16),
    grpo: { maxSteps: 2, numGenerations: 4, perDeviceTrainBatchSize: 8, maxCompletionLength: 12, seed: 1 },
    heldOut: { numPrompts: 4, samplesPerPrompt: 2 },
  });
  const out = await trainViaSidecar(client, request, { evalsDir, log: () => undefined });
  assert.equal(out.state, RunState.SUCCEEDED, out.reason);
});
after(async () => {
  await sc?.stop("SIGTERM");
});

const agent = (args: string[], stdin = "") => agentAsync([...args, "--address", sc.address, "--evals-dir", evalsDir], stdin);

/** The completion printed under the line that starts with `head`: its indented lines, unindented. */
function completionAfter(stdout: string, head: RegExp): string {
  const lines = stdout.split("\n");
  const at = lines.findIndex((l) => head.test(l));
  assert.ok(at >= 0, `no line ${head} in:\n${stdout}`);
  const body: string[] = [];
  for (const l of lines.slice(at + 1)) {
    if (!l.startsWith("  ")) break;
    body.push(l.slice(2));
  }
  return body.join("\n");
}

test("agent try prints the base's and the adapter's greedy completions, the ones an Evaluate of the prompt gives", { timeout: 300_000 }, async () => {
  const r = await agent(["try", RUN, "--prompt", TASK.prompt]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^try-e2e's adapter and its base \(the embedded default model\) on one prompt$/m);
  assert.match(r.stdout, /^greedy, at most 32 new tokens, the prompt as given \(no chat template\); \d+\.\d s on one model load$/m);
  assert.doesNotMatch(r.stdout, /exact_match/, "no grading without --answer");
  const base = completionAfter(r.stdout, /^base:$/);
  const adapter = completionAfter(r.stdout, /^adapter \(try-e2e, step 2\):$/);
  // the same prompt as an eval task, greedy, 32 new tokens
  const client = new SidecarClient({ address: sc.address });
  const res = await runEvaluate(client, {
    adapters: [{ name: "adapter", source: { case: "runId", value: RUN } }],
    tasks: { source: { case: "inline", value: { rows: [{ id: TASK.id, prompt: TASK.prompt, answers: TASK.answers }] } } },
    temperature: 0,
    maxNewTokens: DEFAULT_EVAL_SETTINGS.maxNewTokens,
  });
  const text = (name: string) => res.variants.find((v) => v.name === name)!.tasks[0].samples[0].completion;
  assert.equal(base, text("base") || "(an empty completion)");
  assert.equal(adapter, text("adapter") || "(an empty completion)");
});

test("agent try --answer grades each completion; --base-only leaves the adapter out; --prompt - reads stdin", { timeout: 300_000 }, async () => {
  const graded = await agent(["try", RUN, "--prompt", TASK.prompt, "--answer", TASK.answers[0], "--max-new-tokens", "16"]);
  assert.equal(graded.code, 0, graded.stdout + graded.stderr);
  assert.match(graded.stdout, /^base — exact_match [01], exact_match_lenient [01], format [0-9.]+:$/m);
  assert.match(graded.stdout, /^adapter \(try-e2e, step 2\) — exact_match [01], /m);
  assert.match(graded.stdout, /at most 16 new tokens/);
  const baseOnly = await agent(["try", RUN, "--prompt", "-", "--base-only"], TASK.prompt);
  assert.equal(baseOnly.code, 0, baseOnly.stdout + baseOnly.stderr);
  assert.match(baseOnly.stdout, /^the base \(the embedded default model\) on one prompt$/m);
  assert.match(baseOnly.stdout, /^base:$/m);
  assert.doesNotMatch(baseOnly.stdout, /^adapter/m);
});

test("agent try's mistakes are one line and exit 2", { timeout: 120_000 }, async () => {
  const cases: Array<[string[], RegExp]> = [
    [["try", RUN], /^agent try: --prompt TEXT is required \(usage: /],
    [["try", "--prompt", "hi"], /^agent try: which run\? give its id/],
    [["try", RUN, "--prompt", "  "], /^agent try: --prompt is empty/],
    [["try", RUN, "--prompt", "hi", "--max-new-tokens", "0"], /^agent try: --max-new-tokens: must be >= 1, got 0$/m],
    [["try", RUN, "--prompt", "hi", "--max-tokens", "8"], /^agent try: unknown flag --max-tokens \(did you mean --max-new-tokens\?\)/],
    [["try", "no-such-run", "--prompt", "hi"], /^agent try: not_found: .*no-such-run/],
  ];
  for (const [args, line] of cases) {
    const r = await agent(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, line);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  }
});
