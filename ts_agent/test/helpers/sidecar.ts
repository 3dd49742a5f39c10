/** Start a real `py-trainer serve` process for a TS test, on a free port, in a temp folder. */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before } from "node:test";

export const REPO = resolve(fileURLToPath(new URL("../../..", import.meta.url)));
export const PYTHON = join(REPO, ".venv", "bin", "python");

/** The first `limit` train rows of the checked-in AML task file, as a TrainRequest's inline rows. */
export function amlTrainRows(limit: number): Array<{ id: string; prompt: string; answers: string[] }> {
  return readFileSync(join(REPO, "agent-evals", "tasks", "aml_typology.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { id: string; prompt: string; split: string; answers: string[] })
    .filter((r) => r.split === "train")
    .slice(0, limit)
    .map((r) => ({ id: r.id, prompt: r.prompt, answers: r.answers }));
}

export interface RunningSidecar {
  proc: ChildProcess;
  address: string;
  dir: string;
  runsRoot: string;
  dataRoot: string;
  output: () => string;
  /** Send a signal and resolve with the exit code (or signal name). */
  stop: (signal?: NodeJS.Signals) => Promise<number | string>;
}

export async function startSidecar(opts: { dir?: string; args?: string[]; env?: Record<string, string> } = {}): Promise<RunningSidecar> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "sidecar-"));
  const runsRoot = join(dir, "runs");
  const dataRoot = join(dir, "data");
  mkdirSync(dataRoot, { recursive: true });
  const proc = spawn(
    PYTHON,
    ["-m", "py_trainer.server.cli", "serve", "--host", "127.0.0.1", "--port", "0", "--runs-root", runsRoot, "--data-root", dataRoot, ...(opts.args ?? [])],
    {
      cwd: REPO,
      env: { ...process.env, HF_HUB_OFFLINE: "1", TRANSFORMERS_OFFLINE: "1", PYTHONUNBUFFERED: "1", ...opts.env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  proc.stdout!.on("data", (d) => (out += d));
  proc.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | string>((res) => proc.on("exit", (code, sig) => res(code ?? sig ?? "unknown")));
  const port = await new Promise<number>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`sidecar did not start:\n${out}`)), 60_000);
    const onData = () => {
      const m = /py-trainer listening on [\d.]+:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        res(Number(m[1]));
      }
    };
    proc.stdout!.on("data", onData);
    proc.on("exit", () => rej(new Error(`sidecar exited early:\n${out}`)));
  });
  return {
    proc,
    address: `127.0.0.1:${port}`,
    dir,
    runsRoot,
    dataRoot,
    output: () => out,
    stop: async (signal: NodeJS.Signals = "SIGTERM") => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/**
 * One sidecar for a whole test file: started before its tests, stopped (SIGTERM) after them, with
 * PY_TRAINER_DATA_ROOT pointing at its data root meanwhile (where the agent resolves
 * "embedded:<file>" bases) and restored afterwards. Call at the top level of the file; the
 * returned function gives the running sidecar inside a test.
 */
export function sidecarForFile(opts: Parameters<typeof startSidecar>[0] = {}): () => RunningSidecar {
  let sc: RunningSidecar | undefined;
  const savedRoot = process.env.PY_TRAINER_DATA_ROOT;
  before(async () => {
    sc = await startSidecar(opts);
    process.env.PY_TRAINER_DATA_ROOT = sc.dataRoot;
  });
  after(async () => {
    if (savedRoot === undefined) delete process.env.PY_TRAINER_DATA_ROOT;
    else process.env.PY_TRAINER_DATA_ROOT = savedRoot;
    await sc?.stop("SIGTERM");
  });
  return () => {
    if (sc === undefined) throw new Error("sidecarForFile: the sidecar is not started yet (use it inside a test)");
    return sc;
  };
}
