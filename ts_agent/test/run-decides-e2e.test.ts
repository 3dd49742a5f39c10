/**
 * Issue 32, Done when (item 1, "the run decides"), end to end against a real sidecar: on a
 * generated non-AML task file (ticket_routing.jsonl under the sidecar's data root), `agent demo
 * --tasks` trains on inline rows on the file's embedded base; then eval, select, compare, sweep
 * (from the run, 2 seeds) and export run with no --tasks or --base-model, and every output names
 * that file and that base (each used the AML file or model before). The compare deltas equal
 * --from-evals. `agent sweep --resume` of the finished sweep keeps both seeds. Short: 2 GRPO steps,
 * 20 test tasks.
 */
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { main } from "../src/cli.js";
import { captureConsole } from "./helpers/console.js";
import { writeTrainConfig } from "./helpers/requests.js";
import { REPO, sidecarForFile } from "./helpers/sidecar.js";

const sidecar = sidecarForFile(); // PY_TRAINER_DATA_ROOT = its data root: where embedded:<file> is resolved

async function agent(args: string[]): Promise<{ code: number; text: string }> {
  const { value: code, out, err } = await captureConsole(() => main([...args, "--address", sidecar().address]));
  return { code, text: [...out, ...err].join("\n") };
}

test("every command given the run follows its task file and embedded base", { timeout: 900_000 }, async () => {
  const dir = join(sidecar().dataRoot, "tasks");
  mkdirSync(dir, { recursive: true });
  for (const ext of [".jsonl", ".meta.json"]) copyFileSync(join(REPO, "agent-evals", "tasks", "ticket_routing" + ext), join(dir, "ticket_routing" + ext));
  const tasks = join(dir, "ticket_routing.jsonl");
  const base = "embedded:tasks/ticket_routing.jsonl";
  const evalsDir = mkdtempSync(join(tmpdir(), "evals-run-decides-"));
  // 60 of the 140 train rows inline (select validates on the rest), as agent demo --tasks sends them
  const rows = readFileSync(tasks, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l))
    .filter((r) => r.split === "train")
    .slice(0, 60);
  const config = writeTrainConfig(evalsDir, "own", {
    runId: "own-e2e",
    rows: rows.map((r) => ({ id: r.id, prompt: r.prompt, answers: r.answers })),
    grpo: { maxSteps: 2, saveSteps: 1, saveTotalLimit: 0, perDeviceTrainBatchSize: 8, numGenerations: 4, maxCompletionLength: 12, seed: "1" },
    heldOut: { numPrompts: 4, samplesPerPrompt: 2 },
  });
  const demo = await agent(["demo", "--config", config, "--tasks", tasks, "--evals-dir", evalsDir]);
  assert.equal(demo.code, 0, demo.text);
  const names = (what: string, text: string) => {
    assert.ok(text.includes("ticket_routing.jsonl"), `${what} does not name the task file:\n${text.slice(0, 2000)}`);
    assert.doesNotMatch(text, /aml_typology/, what);
  };

  const ev = await agent(["eval", "own-e2e", "--limit", "20", "--evals-dir", evalsDir]);
  assert.equal(ev.code, 0, ev.text);
  names("agent eval", ev.text);
  const evalLog = JSON.parse(readFileSync(join(evalsDir, "runs", "own-e2e", "eval.json"), "utf8"));
  assert.equal(evalLog.model.requested, base);
  names("eval.json", evalLog.taskSet.path);

  const sel = await agent(["select", "own-e2e", "--limit", "20", "--val-limit", "8", "--evals-dir", evalsDir]);
  assert.equal(sel.code, 0, sel.text);
  names("agent select", sel.text);

  const sw = await agent(["sweep", "--from-run", "own-e2e", "--seeds", "2", "--limit", "20", "--sweep-id", "sw", "--evals-dir", evalsDir]);
  assert.equal(sw.code, 0, sw.text);
  names("agent sweep --from-run", sw.text);
  const sweepMd = readFileSync(join(evalsDir, "sweeps", "sw", "report.md"), "utf8");
  names("the sweep's report.md", sweepMd);
  assert.ok(sweepMd.includes(base), "the sweep's report does not name the base");
  for (const id of ["sw-s1", "sw-s2"]) {
    const log = JSON.parse(readFileSync(join(evalsDir, "runs", id, "eval.json"), "utf8"));
    assert.equal(log.model.requested, base, id);
    names(`${id}'s eval.json`, log.taskSet.path);
  }

  // the sweep continued (nothing left to train: both seeds kept as they are)
  const again = await agent(["sweep", "--resume", "sw", "--evals-dir", evalsDir]);
  assert.equal(again.code, 0, again.text);
  assert.equal(again.text.match(/already trained and evaluated: kept/g)?.length, 2, again.text);

  const one = await agent(["compare", "own-e2e", "sw-s2", "--limit", "20", "--id", "one", "--evals-dir", evalsDir]);
  assert.equal(one.code, 0, one.text);
  const fromEvals = await agent(["compare", "own-e2e", "sw-s2", "--from-evals", "--id", "logs", "--evals-dir", evalsDir]);
  assert.equal(fromEvals.code, 0, fromEvals.text);
  const md = readFileSync(join(evalsDir, "compare", "one", "compare.md"), "utf8");
  names("compare.md", md);
  assert.ok(md.includes(base), "compare.md does not name the base");
  const deltas = (id: string) =>
    JSON.parse(readFileSync(join(evalsDir, "compare", id, "compare.json"), "utf8")).pairs.map(
      (p: { meanDiff?: number; delta?: number }) => p.meanDiff ?? p.delta,
    );
  assert.deepEqual(deltas("one"), deltas("logs"));

  const report = readFileSync(join(evalsDir, "runs", "own-e2e", "report.md"), "utf8");
  names("report.md", report);
  assert.ok(report.includes(base));

  const ex = await agent(["export", "own-e2e", "--merge", "--evals-dir", evalsDir]);
  assert.equal(ex.code, 0, ex.text);
  const check = join(evalsDir, "runs", "own-e2e", "export-merged", "export-check.json");
  assert.ok(existsSync(check), ex.text);
  names("export-check.json", readFileSync(check, "utf8"));
});
