/**
 * Recovering runs through the real CLI (bin/agent) against a real sidecar:
 * - the `agent train` client is killed (SIGKILL) mid-run: the run goes on; its local folder never
 *   looks complete; `agent report` names the one command that fetches it; `agent watch` re-attaches
 *   (replay + live line) and downloads every artifact, sha256-verified, TensorBoard events too;
 *   `agent download` again fetches nothing; a stale .partial is resumed, fails its sha256 check,
 *   and is fetched again from byte 0;
 * - Ctrl-C detaches and prints the `agent watch` / `agent cancel` commands; a second Ctrl-C within
 *   2 s cancels the run; the CANCELLED run downloads with its kept adapter, which `agent eval`
 *   evaluates (Evaluate accepts a CANCELLED run's kept adapter);
 * - the sidecar killed under an attached `agent train`: it says so with the run id and the
 *   `agent watch` / `agent resume` commands (exit 1), and after a restart `agent resume` finishes it;
 * - `agent delete` asks, then removes the CANCELLED run on the sidecar (the local copy stays);
 * - `agent export` writes the PEFT folder or a merged model that from_pretrained loads, and
 *   `agent eval --adapter PATH` evaluates a PEFT folder under the sidecar's data root.
 * Budgets are tiny: 4 prompts x 4 generations, 12 new tokens.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { writeTrainConfig } from "./helpers/requests.js";
import { PYTHON, REPO, startSidecar, type RunningSidecar } from "./helpers/sidecar.js";

const AGENT = join(REPO, "ts_agent", "bin", "agent");
let sc: RunningSidecar;
const evalsDir = mkdtempSync(join(tmpdir(), "evals-recover-"));

before(async () => {
  sc = await startSidecar();
});
after(async () => {
  await sc?.stop("SIGTERM");
});

function config(runId: string, maxSteps: number): string {
  const rows = readFileSync(join(REPO, "agent-evals", "tasks", "aml_typology.jsonl"), "utf8")
    .trim()
    .split("\n")
    .slice(0, 24)
    .map((l) => JSON.parse(l) as { id: string; prompt: string; answers: string[] })
    .map((r) => ({ id: r.id, prompt: r.prompt, answers: r.answers }));
  return writeTrainConfig(evalsDir, runId, {
    runId,
    rows,
    grpo: { maxSteps, numGenerations: 4, perDeviceTrainBatchSize: 8, maxCompletionLength: 12, saveSteps: 4, seed: 3 },
    heldOut: { numPrompts: 4, samplesPerPrompt: 2 },
  });
}

function agent(args: string[]) {
  const r = spawnSync(AGENT, [...args, "--address", sc.address, "--evals-dir", evalsDir], { encoding: "utf8", timeout: 600_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Start `agent train` in the background; resolves once its output matches `until`. */
async function trainUntil(configPath: string, until: RegExp) {
  // its own process group, signalled as a terminal does (bin/agent may run node under tsx)
  const proc = spawn(AGENT, ["train", "--config", configPath, "--address", sc.address, "--evals-dir", evalsDir], {
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let out = "";
  proc.stdout.on("data", (d) => (out += d));
  proc.stderr.on("data", (d) => (out += d));
  const exited = new Promise<number | string>((res) => proc.on("exit", (code, sig) => res(code ?? sig ?? "?")));
  await new Promise<void>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no ${until} in:\n${out}`)), 300_000);
    const check = () => {
      if (until.test(out)) {
        clearTimeout(timer);
        res();
      }
    };
    proc.stdout.on("data", check);
    proc.on("exit", () => rej(new Error(`agent train exited early:\n${out}`)));
  });
  return { proc, output: () => out, exited, signal: (sig: NodeJS.Signals) => process.kill(-proc.pid!, sig) };
}

function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

test("a client killed mid-run: the run is recovered with agent watch, and agent download is idempotent", { timeout: 600_000 }, async () => {
  const t = await trainUntil(config("recover-1", 12), /^step \d+\/12 /m);
  t.signal("SIGKILL");
  assert.equal(await t.exited, "SIGKILL");
  const local = join(evalsDir, "runs", "recover-1");
  assert.ok(!existsSync(join(local, "run.json")), "a stranded run's folder never looks complete");

  const report = agent(["report", "recover-1"]);
  assert.equal(report.code, 2, report.stderr);
  assert.match(report.stderr, new RegExp(`fetch it with: agent download recover-1 --address ${sc.address} --evals-dir ${evalsDir}$`, "m"));

  const watch = agent(["watch", "recover-1"]);
  assert.equal(watch.code, 0, watch.stdout + watch.stderr);
  assert.match(watch.stdout, /^step 12\/12 reward \d\.\d{3} kl \d\.\d{4} elapsed \d+:\d\d ETA 0:00$/m);
  assert.match(watch.stdout, /run recover-1: SUCCEEDED/);
  const got = files(local);
  for (const rel of ["adapter/adapter_config.json", "adapter/adapter_model.safetensors", "reward-vs-step.csv", "summary.json", "run.json", "events.jsonl"]) {
    assert.ok(got.includes(rel), `${rel} in ${got}`);
  }
  assert.ok(
    got.some((f) => f.startsWith("tensorboard/events.out.tfevents.")),
    `TensorBoard events in ${got}`,
  );
  assert.ok(!got.some((f) => f.endsWith(".partial")), `no partial files: ${got}`);
  const run = JSON.parse(readFileSync(join(local, "run.json"), "utf8"));
  for (const art of run.result.artifacts as Array<{ path: string; sha256: string }>) assert.equal(sha256(join(local, art.path)), art.sha256, art.path);

  const again = agent(["download", "recover-1"]);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /artifacts all \d+ already there and verified/);
  assert.doesNotMatch(again.stdout, /^fetched /m);

  // a stale partial (not a prefix of the file) is resumed, fails its sha256 check, is fetched anew
  rmSync(join(local, "summary.json"));
  writeFileSync(join(local, "summary.json.partial"), "{ not the real bytes");
  const repaired = agent(["download", "recover-1"]);
  assert.equal(repaired.code, 0, repaired.stderr);
  assert.match(repaired.stdout, /^fetched +summary\.json /m);
  assert.match(repaired.stdout, /1 fetched, \d+ already there/);
  const listed = (run.result.artifacts as Array<{ path: string; sha256: string }>).find((a) => a.path === "summary.json")!;
  assert.equal(sha256(join(local, "summary.json")), listed.sha256);
  assert.ok(!existsSync(join(local, "summary.json.partial")));

  const report2 = agent(["report", "recover-1"]);
  assert.equal(report2.code, 0, report2.stderr);

  // agent export: the PEFT folder as is, and merged into a model from_pretrained loads
  const plain = agent(["export", "recover-1", "--out", join(evalsDir, "exported")]);
  assert.equal(plain.code, 0, plain.stderr);
  assert.equal(sha256(join(evalsDir, "exported", "adapter_model.safetensors")), sha256(join(local, "adapter", "adapter_model.safetensors")));
  const merged = agent(["export", "recover-1", "--merge", "--out", join(evalsDir, "merged")]);
  assert.equal(merged.code, 0, merged.stdout + merged.stderr);
  const load = spawnSync(
    PYTHON,
    [
      "-c",
      "import sys\nfrom transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained(sys.argv[1])\nprint('lora', sum('lora_' in n for n, _ in m.named_parameters()))",
      join(evalsDir, "merged"),
    ],
    {
      encoding: "utf8",
      env: { ...process.env, HF_HUB_OFFLINE: "1" },
    },
  );
  assert.equal(load.status, 0, load.stderr);
  assert.match(load.stdout, /^lora 0$/m);

  // agent eval --adapter PATH: any PEFT folder under the sidecar's data root
  cpSync(join(local, "adapter"), join(sc.dataRoot, "adapters", "r1"), { recursive: true });
  const byPath = agent(["eval", "--adapter", "adapters/r1", "--limit", "4"]);
  assert.equal(byPath.code, 0, byPath.stdout + byPath.stderr);
  assert.ok(existsSync(join(evalsDir, "runs", "r1", "eval.json")));
});

test("Ctrl-C detaches with the watch/cancel commands; a second Ctrl-C cancels; the kept adapter evaluates", { timeout: 600_000 }, async () => {
  const t = await trainUntil(config("ctrlc-1", 400), /^step \d+\/400 /m);
  t.signal("SIGINT");
  await new Promise<void>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`no detach message:\n${t.output()}`)), 10_000);
    const check = () => /Ctrl-C again within 2 s/.test(t.output()) && (clearTimeout(timer), res());
    t.proc.stdout.on("data", check);
    check();
  });
  assert.match(t.output(), new RegExp(`re-attach: +agent watch ctrlc-1 --address ${sc.address} --evals-dir ${evalsDir}`));
  assert.match(t.output(), /cancel: +agent cancel ctrlc-1 .*Ctrl-C again within 2 s/);
  t.signal("SIGINT");
  assert.equal(await t.exited, 130, t.output());
  assert.match(t.output(), /cancel requested: run ctrlc-1 is CANCELL/);
  assert.doesNotMatch(t.output(), /^\s+at /m);

  const watch = agent(["watch", "ctrlc-1"]);
  assert.equal(watch.code, 1, watch.stdout + watch.stderr); // not SUCCEEDED
  assert.match(watch.stdout, /run ctrlc-1: CANCELLED/);
  const local = join(evalsDir, "runs", "ctrlc-1");
  assert.ok(existsSync(join(local, "adapter", "adapter_config.json")), files(local).join("\n"));

  const evaluated = agent(["eval", "ctrlc-1", "--limit", "4"]);
  assert.equal(evaluated.code, 0, evaluated.stdout + evaluated.stderr);
  assert.ok(existsSync(join(local, "eval.json")));

  // agent delete: asks, DeleteRun removes it on the sidecar, the id is free, the local copy stays
  const del = (stdin: string, ...extra: string[]) =>
    spawnSync(AGENT, ["delete", "ctrlc-1", ...extra, "--address", sc.address, "--evals-dir", evalsDir], { encoding: "utf8", input: stdin, timeout: 60_000 });
  const runs = () => spawnSync(AGENT, ["runs", "--address", sc.address], { encoding: "utf8", timeout: 60_000 }).stdout;
  const kept = del("n\n");
  assert.equal(kept.status, 1, kept.stdout + kept.stderr);
  assert.match(runs(), /^ctrlc-1\tCANCELLED/m);
  const deleted = del("y\n");
  assert.equal(deleted.status, 0, deleted.stdout + deleted.stderr);
  assert.match(deleted.stdout, /^deleted run ctrlc-1 \(CANCELLED, step \d+/m);
  assert.doesNotMatch(runs(), /^ctrlc-1\t/m);
  assert.ok(!existsSync(join(sc.runsRoot, "ctrlc-1")), "the sidecar's folder is gone");
  assert.ok(existsSync(join(local, "eval.json")), "the downloaded copy is the user's");
  const again = del("", "--yes");
  assert.equal(again.status, 2, again.stderr);
  assert.match(again.stderr.trim(), /^agent delete: not_found: /);
});

test(
  "the sidecar killed under an attached agent train: the run id and the watch/resume commands; after a restart agent resume finishes it",
  { timeout: 600_000 },
  async () => {
    const own = await startSidecar();
    const dir = own.dir;
    let restarted: RunningSidecar | undefined;
    try {
      const proc = spawn(AGENT, ["train", "--config", config("lost-1", 12), "--address", own.address, "--evals-dir", evalsDir], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      proc.stdout.on("data", (d) => (out += d));
      proc.stderr.on("data", (d) => (err += d));
      const exited = new Promise<number | null>((res) => proc.on("close", (code) => res(code)));
      await new Promise<void>((res, rej) => {
        const timer = setTimeout(() => rej(new Error(`no step 6 in:\n${out}${err}`)), 300_000);
        proc.stdout.on("data", () => /^step ([6-9]|1[0-2])\/12 /m.test(out) && (clearTimeout(timer), res()));
      });
      await own.stop("SIGKILL");
      assert.equal(await exited, 1, out + err);
      assert.doesNotMatch(err, /cancel/i, "nothing says the user cancelled");
      assert.doesNotMatch(err, /^\s+at /m);
      assert.match(
        err,
        new RegExp(`^agent: lost the sidecar at ${own.address} while following run lost-1 \\(last step seen: \\d+; 5 re-attach attempts failed`, "m"),
      );
      assert.match(err, new RegExp(`^  follow it: +agent watch lost-1 --address ${own.address} --evals-dir ${evalsDir}$`, "m"));
      assert.match(err, /continue it from its last checkpoint: +agent resume lost-1 /);

      restarted = await startSidecar({ dir });
      const resumed = spawnSync(AGENT, ["resume", "lost-1", "--address", restarted.address, "--evals-dir", evalsDir], { encoding: "utf8", timeout: 600_000 });
      assert.equal(resumed.status, 0, resumed.stdout + resumed.stderr);
      assert.match(resumed.stdout, /run lost-1: SUCCEEDED/);
    } finally {
      await own.stop("SIGKILL");
      await restarted?.stop("SIGTERM");
    }
  },
);
