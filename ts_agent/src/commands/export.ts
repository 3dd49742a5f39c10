/**
 * `agent export <run_id> [--merge] [--out DIR]`: the downloaded run's adapter as a PEFT folder
 * (copied, atomically), or with --merge a full model with the LoRA weights folded in, which
 * `transformers.AutoModelForCausalLM.from_pretrained(DIR)` loads. Merging needs Python: it runs
 * `py-trainer export --merge` (the repo's .venv/bin/py-trainer, else $PY_TRAINER_BIN, else
 * py-trainer on PATH), which uses peft's merge_and_unload and then checks the merged model against
 * base + adapter on the run's test prompts (identical greedy completions, logits within the dtype's
 * tolerance; refused naming the first differing prompt, the result in export-check.json).
 */
import { spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { isAgentTaskFile, loadAgentTaskSet } from "../agent/eval/agent-task-set.js";
import { readLocalRun } from "../agent/train/run.js";
import { REPO_ROOT, UserError, displayPath, evalsDirOrDefault, fsyncDirectory, runDir } from "../agent/workspace.js";
import { repeatFlags } from "../pipeline/next-commands.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, usageError, type CommandHandler, type CommandHelp } from "./flags.js";
import { runDataRoot, runTaskFile } from "../pipeline/run-task-file.js";

export const help: CommandHelp = {
  summary: "Export a downloaded run's adapter: a PEFT folder, or (--merge) a merged model from_pretrained loads.",
  usage: "agent export <run_id> [--merge] [--out DIR] [--base-model M] [--check-prompts N] [--evals-dir DIR]",
  flags: [
    ["--merge", "fold the LoRA weights into the base model (py-trainer export --merge, peft merge_and_unload)"],
    ["--out DIR", "folder to create (default runs/<run_id>/export-adapter or export-merged)"],
    ["--base-model M", "with --merge: the base model path or hub id (default: the run's base_model)"],
    ["--check-prompts N", "with --merge: test prompts the merged model is checked on against base + adapter (default 32)"],
    ["--evals-dir DIR", "where runs/ lives (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)"],
  ],
  examples: ["agent export run-20261201-101500-ab12cd --out /models/aml-adapter", "agent export run-20261201-101500-ab12cd --merge --out /models/aml-merged"],
};

function pyTrainer(): string {
  if (process.env.PY_TRAINER_BIN) return process.env.PY_TRAINER_BIN;
  const venv = join(REPO_ROOT, ".venv", "bin", "py-trainer");
  return existsSync(venv) ? venv : "py-trainer";
}

/** --out must be a folder to create (or an empty one) in a folder that exists: checked before
 *  anything is copied or merged, so neither mode ends in ENOTDIR / ENOENT. */
function checkOut(out: string): void {
  if (existsSync(out)) {
    if (!statSync(out).isDirectory()) throw new UserError(`agent export: --out ${out}: is a file, not a folder (give a folder to create)`);
    if (readdirSync(out).length) throw new UserError(`agent export: --out ${out}: exists and is not empty`);
    return;
  }
  const parent = dirname(out);
  if (!existsSync(parent)) throw new UserError(`agent export: --out ${out}: its parent folder ${parent} does not exist (create it first)`);
  if (!statSync(parent).isDirectory()) throw new UserError(`agent export: --out ${out}: ${parent} is a file, not a folder`);
}

export const command: CommandHandler = async (argv, _client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      merge: { type: "boolean" },
      out: { type: "string" },
      "base-model": { type: "string" },
      "check-prompts": { type: "string" },
      ...EVALS_DIR_FLAG,
      ...GLOBAL_FLAGS,
    },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw usageError("export", help, positionals.length ? "one run id, please" : "which run? give its id");
  const runId = positionals[0];
  const evalsDir = evalsDirOrDefault(values["evals-dir"]);
  const run = readLocalRun(evalsDir, runId);
  const adapter = join(runDir(evalsDir, runId), "adapter");
  if (!run) throw new UserError(`agent export: run ${runId} is not downloaded; fetch it with: agent download ${runId}${repeatFlags(values)}`);
  if (!existsSync(join(adapter, "adapter_config.json")))
    throw new UserError(`agent export: run ${runId} has no adapter (it ${run.reason ? `ended: ${run.reason}` : "kept none"})`);
  const out = resolve(values.out ?? join(runDir(evalsDir, runId), values.merge ? "export-merged" : "export-adapter"));
  checkOut(out);
  if (!values.merge) {
    const tmp = mkdtempSync(join(dirname(out), ".export-"));
    try {
      cpSync(adapter, tmp, { recursive: true });
      rmSync(out, { recursive: true, force: true });
      renameSync(tmp, out);
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw err;
    }
    fsyncDirectory(dirname(out));
    console.log(`wrote the PEFT adapter of ${runId} to ${displayPath(out)} (PeftModel.from_pretrained(base, "${displayPath(out)}"))`);
    return 0;
  }
  const base = values["base-model"] ?? run.request?.baseModel ?? "";
  // an embedded:<file> base names a file under the sidecar's data root, as the run's request does
  const dataRoot = resolve(runDataRoot(runId, evalsDir));
  const args = [
    "export",
    "--adapter",
    adapter,
    "--out",
    out,
    "--merge",
    "--base-model",
    base,
    "--data-root",
    dataRoot,
    ...mergeCheckArgs(await checkTasksFile(runTaskFile(run, evalsDir)), values["check-prompts"]),
  ];
  const code = await new Promise<number>((res, rej) => {
    // Ctrl-C (or a kill) stops the child too: it must not finish writing the folder after we exit.
    // The handlers are in place before the child starts: a signal that comes while it starts is not lost.
    let interrupted: NodeJS.Signals | undefined;
    let child: ReturnType<typeof spawn> | undefined;
    const stop = (signal: NodeJS.Signals) => {
      interrupted = signal;
      console.error(`agent export: ${signal}: stopping py-trainer export${child ? ` (pid ${child.pid})` : ""}; ${displayPath(out)} is not written`);
      child?.kill(signal);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
    child = spawn(pyTrainer(), args, { stdio: "inherit" });
    if (interrupted) child.kill(interrupted);
    const dispose = () => (process.off("SIGINT", stop), process.off("SIGTERM", stop));
    child.on("error", (err) => (dispose(), rej(new UserError(`agent export --merge needs py-trainer (${pyTrainer()}): ${err.message}; run make setup`))));
    child.on("exit", (c) => {
      dispose();
      if (interrupted) console.error("agent export: stopped py-trainer export; nothing is left running");
      res(interrupted ? 130 : (c ?? 1));
    });
  });
  return code;
};

/** `py-trainer export --merge`'s check flags: the run's own task file (its test split: the
 * dataset's jsonl_path, or the file of its embedded base, run-task-file.ts) when it is here, and
 * --check-prompts N (a positive integer). */
/** The task file the merge is checked on: the run's own; for an agent run, its agent task's test
 *  prompts written as a JSONL task file (py-trainer reads JSONL; the prompts are the task's own). */
async function checkTasksFile(tasksFile: string | null): Promise<string | null> {
  if (!tasksFile || !isAgentTaskFile(tasksFile) || !existsSync(tasksFile)) return tasksFile;
  const set = await loadAgentTaskSet(tasksFile, "test");
  const path = join(mkdtempSync(join(tmpdir(), "agent-export-")), "test-prompts.jsonl");
  // the task-file format wants answers; the check reads only the prompts
  const answers = (r: (typeof set.rows)[number]) => (r.answers.length ? r.answers : ["(an agent task: its scorers judge the episode)"]);
  writeFileSync(path, set.rows.map((r) => JSON.stringify({ id: r.id, prompt: r.prompt, split: "test", answers: answers(r) })).join("\n") + "\n");
  return path;
}

function mergeCheckArgs(tasksFile: string | null, n: string | undefined): string[] {
  const out: string[] = [];
  if (n !== undefined) {
    if (!/^[1-9][0-9]*$/.test(n)) throw new UserError(`agent export: --check-prompts: must be a positive integer, got ${JSON.stringify(n)}`);
    out.push("--check-prompts", n);
  }
  if (tasksFile && existsSync(tasksFile)) out.push("--check-tasks", tasksFile);
  return out;
}
