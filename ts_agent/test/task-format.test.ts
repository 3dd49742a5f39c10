/**
 * Issue 20: any task file in the documented format (docs/tasks.md) goes through the commands.
 * - A table of malformed task files (and metadata files): each is one line on stderr naming
 *   file:line (or the metadata file) and the field, exit 2, no stack trace (in a process of its
 *   own: cli-errors-e2e.test.ts). Every case starts
 *   from a valid non-AML file, so under the AML-only loader each failed on line 1's "typology".
 * - A task file without label and template: the commands name the features they skip.
 * - The shipped generated task sets are fresh and load with their metadata.
 * - agent eval of a run uses the run's own base and refuses another --base-model in one line.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { main as agentMain } from "../src/cli.js";
import { generateDomains, main as domainsMain } from "../src/task-sets/demo-domains.js";
import { skippedFeatures } from "../src/agent/core/task-format.js";
import { loadTaskFile } from "../src/agent/eval/tasks.js";
import { captureConsole, captureConsoleSync } from "./helpers/console.js";
import { REPO } from "./helpers/sidecar.js";

/** The CLI in this process (an error that is not a user mistake would throw out of it; the same
 *  mistake in a process of its own: cli-errors-e2e.test.ts). */
async function agent(args: string[]) {
  const { value: code, out, err } = await captureConsole(() => agentMain([...args, "--address", "127.0.0.1:9", "--timeout", "2000"]));
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}

const row = (i: number, over: Record<string, unknown> = {}) => ({
  id: `t${i}`,
  split: i % 2 ? "test" : "train",
  label: "billing",
  product: "web_portal",
  prompt: `ticket ${i}`,
  answers: ["billing", "bills"],
  template: "billing/1",
  ...over,
});
const META = { labels: ["billing", "login"], slice_field: "product" };

type Case = [name: string, lines: string[], meta: unknown, message: RegExp];
const lines = (...rows: unknown[]) => rows.map((r) => (typeof r === "string" ? r : JSON.stringify(r)));
const CASES: Case[] = [
  ["invalid JSON", lines(row(1), "{not json"), META, /:2: invalid JSON/],
  ["row not an object", lines(row(1), [1, 2]), META, /:2: row must be a JSON object/],
  ["missing id", lines(row(1), { ...row(2), id: undefined }), META, /:2: field "id" is required/],
  ["duplicate id", lines(row(1), row(1)), META, /:2: field "id" duplicates "t1"/],
  ["undeclared split", lines(row(1), row(2, { split: "dev" })), META, /:2: field "split" must be one of train, test, test_heldout_template, got "dev"/],
  ["missing prompt", lines(row(1), row(2, { prompt: undefined })), META, /:2: field "prompt" is required/],
  ["answers not a list", lines(row(1), row(2, { answers: "billing" })), META, /:2: field "answers" must be a non-empty array/],
  ["answers empty", lines(row(1), row(2, { answers: [] })), META, /:2: field "answers" must be a non-empty array/],
  [
    "label outside the set",
    lines(row(1), row(2, { label: "refund", answers: ["refund"] })),
    META,
    /:2: field "label" must be one of billing, login, got "refund"/,
  ],
  ["answers not led by the label", lines(row(1), row(2, { answers: ["bills", "billing"] })), META, /:2: field "answers" must start with the label "billing"/],
  ["label missing with a declared set", lines(row(1), row(2, { label: undefined })), META, /:2: field "label" is required: the metadata declares a label set/],
  ["slice field empty", lines(row(1), row(2, { product: "" })), META, /:2: field "product" must be a non-empty string/],
  ["template on some rows only", lines(row(1), row(2, { template: undefined })), META, /:2: field "template" is missing here but other rows have it/],
  ["human_label outside the set", lines(row(1), row(2, { human_label: "refund" })), META, /:2: field "human_label" must be one of billing, login/],
  ["no rows", [""], META, /: no tasks \(the file is empty\)/],
  ["metadata unknown field", lines(row(1)), { ...META, slices: "product" }, /\.meta\.json: unknown field "slices"/],
  ["metadata not JSON", lines(row(1)), "{labels:", /\.meta\.json: invalid JSON/],
  ["metadata labels not a list", lines(row(1)), { labels: "billing" }, /\.meta\.json: field "labels" must be a non-empty array of non-empty strings/],
  [
    "metadata graders not a list",
    lines(row(1)),
    { ...META, graders: "final_number_match" },
    /\.meta\.json: field "graders" must be a non-empty array of non-empty strings/,
  ],
];

describe("malformed task files: one line, exit 2, the field named", () => {
  const dir = mkdtempSync(join(tmpdir(), "task-format-"));
  for (const [name, body, meta, message] of CASES) {
    test(name, async () => {
      const sub = join(dir, name.replace(/\W+/g, "-"));
      mkdirSync(sub);
      const path = join(sub, "tickets.jsonl");
      writeFileSync(path, body.join("\n") + "\n");
      writeFileSync(join(sub, "tickets.meta.json"), typeof meta === "string" ? meta : JSON.stringify(meta));
      const r = await agent(["plan", "--tasks", path, "--base-accuracy", "0.3", "--evals-dir", sub]);
      assert.equal(r.code, 2, r.stderr);
      const err = r.stderr.trim();
      assert.equal(err.split("\n").length, 1, err);
      assert.match(err, /^agent plan: /);
      assert.ok(err.includes(sub), err);
      assert.match(err, message);
      assert.doesNotMatch(r.stderr, /^\s+at /m);
    });
  }
});

describe("a task file without label and template", () => {
  test("agent plan plans the test split only and names what it skips, with the field that enables each", async () => {
    const r = await agent(["plan", "--tasks", join(REPO, "agent-evals", "tasks", "arithmetic.jsonl"), "--base-accuracy", "0.3"]);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /test_heldout_template/);
    assert.match(r.stdout, /skipped for this task set: no held-out-template split and no template-clustered SE: the tasks carry no "template" field/);
    assert.match(r.stdout, /skipped for this task set: no confusion matrix: no closed label set \(a "label" field/);
  });

  test("the format says what is skipped; a labelled, templated, sliced set skips nothing", () => {
    const arith = loadTaskFile(join(REPO, "agent-evals", "tasks", "arithmetic.jsonl")).format;
    assert.deepEqual(
      { labels: arith.labels, hasTemplates: arith.hasTemplates, sliceField: arith.sliceField, hasSlices: arith.hasSlices },
      { labels: null, hasTemplates: false, sliceField: "operation", hasSlices: true },
    );
    assert.equal(skippedFeatures(arith).length, 2);
    const tickets = loadTaskFile(join(REPO, "agent-evals", "tasks", "ticket_routing.jsonl")).format;
    assert.deepEqual(skippedFeatures(tickets), []);
    assert.equal(tickets.sliceField, "product");
  });
});

describe("the shipped generated task sets", () => {
  test("are what demo-domains.ts generates (byte for byte) and load with their metadata", () => {
    const { value: checked } = captureConsoleSync(() => domainsMain(["--check"]));
    assert.equal(checked, 0, "agent-evals/tasks is stale: run `tsx src/task-sets/demo-domains.ts --write`");
    const [tickets, arith] = generateDomains();
    const t = loadTaskFile(join(REPO, tickets.path));
    const count = (split: string) => t.rows.filter((r) => r.split === split).length;
    assert.deepEqual([count("train"), count("test"), count("test_heldout_template")], [140, 60, 60]);
    const trainTemplates = new Set(t.rows.filter((r) => r.split === "train").map((r) => r.template));
    assert.ok(t.rows.filter((r) => r.split === "test_heldout_template").every((r) => !trainTemplates.has(r.template)));
    assert.ok(t.rows.filter((r) => r.split === "test").every((r) => trainTemplates.has(r.template)));
    const a = loadTaskFile(join(REPO, arith.path));
    for (const r of a.rows) {
      const m = /What is (\d+) ([+-]) (\d+)\?/.exec(r.prompt)!;
      assert.equal(r.answers[0], String(m[2] === "+" ? Number(m[1]) + Number(m[3]) : Number(m[1]) - Number(m[3])));
    }
  });
});

describe("agent eval <run> evaluates on the run's base", () => {
  test("a --base-model other than the run's is refused in one line, before the sidecar", async () => {
    const evals = mkdtempSync(join(tmpdir(), "eval-base-"));
    mkdirSync(join(evals, "runs", "r1"), { recursive: true });
    writeFileSync(
      join(evals, "runs", "r1", "run.json"),
      JSON.stringify({ runId: "r1", state: "RUN_STATE_SUCCEEDED", request: { baseModel: "embedded:agent-evals/tasks/ticket_routing.jsonl" } }),
    );
    const tasks = join(REPO, "agent-evals", "tasks", "ticket_routing.jsonl");
    const r = await agent(["eval", "r1", "--tasks", tasks, "--evals-dir", evals, "--base-model", "Qwen/Qwen2.5-0.5B"]);
    assert.equal(r.code, 2, r.stderr);
    assert.equal(
      r.stderr.trim(),
      "agent eval: r1 was trained on embedded:agent-evals/tasks/ticket_routing.jsonl; --base-model Qwen/Qwen2.5-0.5B would score its adapter on another base (leave --base-model out)",
    );
    assert.ok(readFileSync(tasks, "utf8").length > 0);
  });
});
