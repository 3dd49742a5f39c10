/**
 * One source of truth per interval (issue 26 item 3): the decision interval `agent eval` prints is
 * the one report.md shows, in its comparison table and in its "in-distribution vs held-out
 * templates" table, and the held-out-template interval it prints is that table's held-out row.
 * Both come from the samples in eval.json; an eval.json written by an older agent carries an
 * eval-time copy of each comparison, which the report must not show: here that copy is replaced
 * by a wrong one before the report is made. In-process: the eval command's code against an
 * in-process fake sidecar whose Evaluate grades with the TS graders (so re-grading agrees).
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { buildReward } from "../src/agent/core/task-rewards.js";
import { writeEvalReport } from "../src/agent/report/eval-report.js";
import { SidecarClient } from "../src/sidecar/client.js";
import { evalAdapterPath } from "../src/pipeline/evaluate-adapter.js";
import { evalTargetFromFlags } from "../src/commands/flags.js";
import { startFakeSidecar } from "./helpers/fake-sidecar.js";

const GRADERS = ["exact_match", "exact_match_lenient", "format"].map((name) => buildReward({ name }));

test("agent eval prints the decision intervals report.md shows, never an eval-time copy", { timeout: 120_000 }, async () => {
  const fake = await startFakeSidecar({
    async *evaluate(req) {
      const rows = req.tasks?.source.case === "inline" ? req.tasks.source.value.rows : [];
      // base right on every 3rd task, the adapter on every 3rd and every 4th: a difference with spread
      const right = (name: string, i: number) => i % 3 === 0 || (name !== "base" && (i % 4 === 0 || (i >= 60 && i % 7 === 0)));
      const names = ["base", ...req.adapters.map((a) => a.name)];
      const variants = names.map((name) => ({
        name,
        tasks: rows.map((r, i) => {
          const completion = right(name, i) ? `<answer>${r.answers[0]}</answer>` : "<answer>none</answer>";
          return { taskId: r.id, samples: [{ completion, scores: Object.fromEntries(GRADERS.map((g) => [g.name, g.score(completion, r.answers) ?? NaN])) }] };
        }),
      }));
      yield {
        kind: {
          case: "result",
          value: { baseModel: "/x/tiny-aml-qwen2", variants, adapters: req.adapters.map((a) => ({ name: a.name, runId: "", sha256: "ab", step: 0n })) },
        },
      };
    },
  });
  const dir = mkdtempSync(join(tmpdir(), "printed-interval-"));
  const client = new SidecarClient({ address: fake.address });
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => lines.push(a.join(" "));
  let path: string;
  try {
    ({ path } = await evalAdapterPath(client, "adapters/x", "x", evalTargetFromFlags({ limit: "60", "evals-dir": dir })));
  } finally {
    console.log = log;
    await fake.close();
  }
  const printed = /^adapter - base: .+? \(95% CI (\S+ pp to \S+ pp),/m.exec(lines.join("\n"));
  const printedHeld = /^held-out templates \(\d+ tasks\): adapter - base .+? \(95% CI (\S+ pp to \S+ pp),/m.exec(lines.join("\n"));
  assert.ok(printed && printedHeld, lines.join("\n"));

  // an older agent's eval.json: its eval-time comparisons, here wrong, beside the samples
  const stored = JSON.parse(readFileSync(path, "utf8"));
  const wrong = {
    baseLabel: "base",
    candidateLabel: "adapter",
    n: 1,
    unpaired: 0,
    taskIds: [],
    paired: { meanDiff: 0.77 },
    bootstrap: null,
    requiredN: null,
    requiredNNote: "",
    mde: null,
    decision: { method: "stale", test: "stale", lower: 0.66, upper: 0.88, p: 0.5, rejects: false },
    clustered: null,
  };
  stored.comparison = wrong;
  stored.heldOutTemplate.comparison = wrong;
  writeFileSync(path, JSON.stringify(stored));

  const md = readFileSync(writeEvalReport(dir, path).path, "utf8");
  assert.match(md, /Base model: the embedded default model \(loaded as .+\)\. Test split: \d+ tasks of \S+aml_typology\.jsonl/); // issue 32, item 1: the report names both
  assert.ok(!md.includes("+66.0 pp") && !md.includes("stale"), "report.md shows the stored eval-time copy");
  assert.ok(md.includes(`**${printed![1]}**`), `the comparison table's decision interval is not the printed ${printed![1]}`);
  const rowOf = (label: string) => md.split("\n").find((l) => l.startsWith(`| ${label} |`)) ?? "";
  assert.ok(rowOf("test (in-distribution)").includes(`| ${printed![1]} (`), rowOf("test (in-distribution)"));
  assert.ok(rowOf("test_heldout_template").includes(`| ${printedHeld![1]} (`), rowOf("test_heldout_template"));
});
