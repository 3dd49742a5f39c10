/**
 * Issue 32, item 1, "the run decides": a command given a run id takes the task file and the base
 * model from the run's own request, not the AML defaults (seen: agent compare loaded the adapters
 * onto the AML model, every variant 0.0%; agent eval <run> without --tasks replaced a good
 * eval.json with AML results). Against an in-process fake sidecar that records each Evaluate.
 * A flag that conflicts with the run is refused in one line, exit 2, naming both values.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, before, describe, test } from "node:test";

import type { EvaluateRequest } from "../src/gen/grpo/trainer/v1/trainer_service_pb.js";
import { REPO_ROOT } from "../src/agent/workspace.js";
import { agentAsync, startFakeSidecar, type FakeSidecar } from "./helpers/fake-sidecar.js";

const TICKETS = join(REPO_ROOT, "agent-evals", "tasks", "ticket_routing.jsonl");
const BASE = `embedded:${relative(REPO_ROOT, TICKETS)}`;

/** runs/<id>/run.json of a SUCCEEDED run trained as `agent demo --tasks ticket_routing.jsonl` trains:
 *  inline train rows of that file on its embedded base. */
function writeRun(dir: string, runId: string): void {
  const rows = readFileSync(TICKETS, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l))
    .filter((r) => r.split === "train")
    .slice(0, 6);
  mkdirSync(join(dir, "runs", runId), { recursive: true });
  const request = { runId, baseModel: BASE, dataset: { inline: { rows: rows.map((r) => ({ id: r.id, prompt: r.prompt, answers: r.answers })) } } };
  writeFileSync(join(dir, "runs", runId, "run.json"), JSON.stringify({ runId, state: "RUN_STATE_SUCCEEDED", request }));
}

describe("commands given a run id follow the run's task file and base", () => {
  const seen: EvaluateRequest[] = [];
  let fake: FakeSidecar;
  let dir: string;
  before(async () => {
    fake = await startFakeSidecar({
      async *evaluate(req) {
        seen.push(req);
        const rows = req.tasks?.source.case === "inline" ? req.tasks.source.value.rows : [];
        const names = ["base", ...req.adapters.map((a) => a.name)];
        yield {
          kind: {
            case: "result",
            value: {
              baseModel: "/x/tiny-qwen2-ticket_routing",
              variants: names.map((name) => ({
                name,
                tasks: rows.map((r) => ({
                  taskId: r.id,
                  samples: [{ completion: `<answer>${r.answers[0]}</answer>`, scores: { exact_match: 1, exact_match_lenient: 1, format: 1 } }],
                })),
              })),
              adapters: req.adapters.map((a) => ({ name: a.name, runId: a.source.case === "runId" ? a.source.value : "", sha256: "ab", step: 2n })),
            },
          },
        };
      },
    });
    dir = mkdtempSync(join(tmpdir(), "run-decides-"));
    writeRun(dir, "a");
    writeRun(dir, "b");
  });
  after(() => fake.close());

  const ticketIds = new Set(
    readFileSync(TICKETS, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).id as string),
  );
  const lastRequest = () => {
    const req = seen.at(-1)!;
    const rows = req.tasks?.source.case === "inline" ? req.tasks.source.value.rows : [];
    return { base: req.baseModel, rows, fromTickets: rows.length > 0 && rows.every((r) => ticketIds.has(r.id)) };
  };

  test("agent compare without --tasks / --base-model: the runs' file and base; compare.md names both", { timeout: 60_000 }, async () => {
    const r = await agentAsync(["compare", "a", "b", "--limit", "4", "--id", "c1", "--evals-dir", dir, "--address", fake.address]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const got = lastRequest();
    assert.equal(got.base, BASE);
    assert.ok(got.fromTickets, `rows ${got.rows.map((x) => x.id).join(",")}`);
    const md = readFileSync(join(dir, "compare", "c1", "compare.md"), "utf8");
    assert.match(md, /ticket_routing\.jsonl/);
    assert.ok(md.includes(BASE), md.slice(0, 600));
  });

  test("agent eval <run> without --tasks: the run's file", { timeout: 60_000 }, async () => {
    const r = await agentAsync(["eval", "a", "--limit", "4", "--evals-dir", dir, "--address", fake.address]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const got = lastRequest();
    assert.equal(got.base, BASE);
    assert.ok(got.fromTickets);
    assert.match(r.stdout, /ticket_routing\.jsonl/);
  });

  test("agent eval --adapter DIR --tasks F without --base-model: F's embedded model", { timeout: 60_000 }, async () => {
    const r = await agentAsync(["eval", "--adapter", "adapters/x", "--tasks", TICKETS, "--limit", "4", "--evals-dir", dir, "--address", fake.address]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.equal(lastRequest().base, BASE);
  });

  test("a --base-model that conflicts with the run: one line, exit 2, both named, nothing evaluated", { timeout: 60_000 }, async () => {
    const n = seen.length;
    for (const args of [
      ["compare", "a", "b", "--id", "c2"],
      ["eval", "a"],
    ]) {
      const r = await agentAsync([...args, "--base-model", "other-model", "--evals-dir", dir, "--address", fake.address]);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
      assert.ok(r.stderr.includes(BASE) && r.stderr.includes("other-model"), r.stderr);
    }
    assert.equal(seen.length, n);
  });
});

describe("agent baseline set", () => {
  test("--tasks F without --base-model evaluates F's embedded model; a second set refuses before it evaluates (exit 2)", { timeout: 60_000 }, async () => {
    const seen: EvaluateRequest[] = [];
    const fake = await startFakeSidecar({
      async *evaluate(req) {
        seen.push(req);
        const rows = req.tasks?.source.case === "inline" ? req.tasks.source.value.rows : [];
        yield {
          kind: {
            case: "result",
            value: {
              baseModel: "/x/tiny-qwen2-ticket_routing",
              variants: [
                {
                  name: "base",
                  tasks: rows.map((r) => ({ taskId: r.id, samples: [{ completion: "", scores: { exact_match: 0, exact_match_lenient: 0, format: 0 } }] })),
                },
              ],
            },
          },
        };
      },
    });
    try {
      const dir = mkdtempSync(join(tmpdir(), "baseline-tasks-"));
      const r = await agentAsync(["baseline", "set", "--tasks", TICKETS, "--limit", "4", "--evals-dir", dir, "--address", fake.address]);
      assert.equal(r.code, 0, r.stderr + r.stdout);
      assert.equal(seen.at(-1)!.baseModel, BASE);
      const again = await agentAsync(["baseline", "set", "--tasks", TICKETS, "--limit", "4", "--evals-dir", dir, "--address", fake.address]);
      assert.equal(again.code, 2, again.stderr);
      assert.doesNotMatch(again.stdout, /evaluating/);
      assert.equal(again.stderr.trim().split("\n").length, 1);
      assert.equal(seen.length, 1);
    } finally {
      await fake.close();
    }
  });
});
