/**
 * `agent serve-policy RUN`: a downloaded run's adapter (on the base it trained on) served on the
 * OpenAI-compatible endpoint for your own tries with any OpenAI client (docs/agent-programs.md, "Try
 * a policy by hand"): `py-trainer serve-policy` on this machine, with the run's folder under the
 * evals dir and its recorded base_model. The model name clients send is the run id. Ctrl-C stops it.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { UserError, dataRoot, displayPath, evalsDirOrDefault, pyTrainerBin, runDir } from "../agent/workspace.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, numberFlag, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Serve a downloaded run's adapter on an OpenAI-compatible endpoint (py-trainer serve-policy), for any OpenAI client.",
  usage: "agent serve-policy <run_id> [--port N] [--token T] [--evals-dir DIR] [--data-root DIR]",
  flags: [
    ["--port N", "the port on 127.0.0.1 (default 8000; 0 = a free one, printed)"],
    ["--token T", "require 'Authorization: Bearer T' (the client's apiKey)"],
    ["--evals-dir DIR", "where the run was downloaded (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)"],
    ["--data-root DIR", "the sidecar's data root, where a base built from a file of it resolves (default $PY_TRAINER_DATA_ROOT or the repository)"],
  ],
  notes:
    "The run must be downloaded with its adapter (a SUCCEEDED run; agent download RUN otherwise). It serves on this machine's loopback " +
    "through $PY_TRAINER_BIN (default the repository's .venv/bin/py-trainer). Exit 2 on a mistake (no such run, no adapter).",
  examples: ["agent serve-policy run-20261206-210811-22b47f", "then: new OpenAI({ baseURL: 'http://127.0.0.1:8000/v1', apiKey: 'unused' })"],
};

export const command: CommandHandler = async (argv) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...GLOBAL_FLAGS, ...EVALS_DIR_FLAG, port: { type: "string" }, token: { type: "string" }, "data-root": { type: "string" } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw usageError("serve-policy", help, "give one run id");
  const runId = positionals[0];
  const port = values.port === undefined ? 8000 : numberFlag("--port", values.port, { min: 0, max: 65535, integer: true });
  const folder = runDir(evalsDirOrDefault(values["evals-dir"]), runId);
  const runJson = join(folder, "run.json");
  if (!existsSync(runJson)) throw new UserError(`agent serve-policy: no run ${runId} under ${displayPath(folder)} (agent download ${runId} first)`);
  const adapter = join(folder, "adapter");
  if (!existsSync(join(adapter, "adapter_config.json")))
    throw new UserError(
      `agent serve-policy: run ${runId} has no adapter at ${displayPath(adapter)} (only a SUCCEEDED run, or a CANCELLED one's kept adapter, has one)`,
    );
  const run = JSON.parse(readFileSync(runJson, "utf8")) as { request?: { baseModel?: string } };
  const args = ["serve-policy", "--adapter", adapter, "--base-model", run.request?.baseModel ?? "", "--name", runId, "--port", String(port)];
  args.push("--data-root", values["data-root"] ?? dataRoot());
  if (values.token) args.push("--token", values.token);
  const bin = pyTrainerBin();
  if (!existsSync(bin)) throw new UserError(`agent serve-policy: py-trainer not found at ${bin} (run make setup, or set PY_TRAINER_BIN)`);
  // the handlers first: a Ctrl-C while py-trainer starts is passed on, not lost
  let child: ReturnType<typeof spawn> | undefined;
  let stopped = false;
  const stop = () => {
    stopped = true;
    child?.kill("SIGINT");
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  child = spawn(bin, args, { stdio: "inherit", env: { ...process.env, HF_HUB_OFFLINE: process.env.HF_HUB_OFFLINE ?? "1" } });
  if (stopped) child.kill("SIGINT");
  return await new Promise<number>((done) => child.on("exit", (code, signal) => done(code ?? (signal === "SIGINT" ? 0 : 1))));
};
