/**
 * `agent delete <run_id> [--yes]`: remove a finished run (SUCCEEDED, FAILED or CANCELLED) and its
 * folder on the sidecar (DeleteRun: events, checkpoints, adapter); its id can then be used again.
 * It asks first (one line on stdin, "y" or "yes"); --yes skips the question. An active run is
 * refused (cancel it first), as is an unknown id: one line, exit 2. The downloaded copy under
 * <evals dir>/runs/<run_id>/ is the user's and is never touched.
 */
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

import { Code } from "@connectrpc/connect";

import { UserError, displayPath, evalsDirOrDefault, runDir } from "../agent/workspace.js";
import { SidecarError, isTerminal, runStateName, type Run } from "../sidecar/client.js";
import { sidecarFlags } from "../pipeline/next-commands.js";
import { EVALS_DIR_FLAG, GLOBAL_FLAGS, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Delete a finished run and its folder on the sidecar (asks first; --yes skips the question).",
  usage: "agent delete <run_id> [--yes] [--evals-dir DIR]",
  flags: [
    ["--yes", "delete without asking"],
    [
      "--evals-dir DIR",
      "where the downloaded copy lives (it is kept; default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)",
    ],
  ],
  notes:
    "Only a SUCCEEDED, FAILED or CANCELLED run can be deleted: cancel an active one first (agent cancel).\n" +
    "Exit 0 deleted, 1 not deleted (the answer was not yes, or a sidecar error), 2 a mistake (unknown or active run).",
  examples: ["agent delete run-20261201-101500-ab12cd", "agent delete run-20261201-101500-ab12cd --yes"],
};

/** One line from stdin: true for "y"/"yes" (any case), false for anything else, undefined at EOF. */
export function askYesNo(question: string, input: NodeJS.ReadableStream = process.stdin): Promise<boolean | undefined> {
  process.stderr.write(question);
  const rl = createInterface({ input, terminal: false });
  return new Promise((res) => {
    let answered = false;
    rl.once("line", (line) => {
      answered = true;
      rl.close();
      res(/^\s*y(es)?\s*$/i.test(line));
    });
    rl.once("close", () => {
      if (answered) return;
      process.stderr.write("\n"); // end the question's line
      res(undefined);
    });
  });
}

/** The sidecar's refusal (unknown id, active run) is the user's mistake: its message, one line. */
function refusal(err: unknown): never {
  if (err instanceof SidecarError && (err.code === Code.NotFound || err.code === Code.FailedPrecondition || err.code === Code.InvalidArgument)) {
    throw new UserError(`agent delete: ${err.codeName}: ${err.message.replace(/\s+/g, " ")}`);
  }
  if (err instanceof SidecarError && err.code === Code.Unimplemented) {
    throw new SidecarError(`this sidecar has no DeleteRun (a py-trainer older than this agent): ${err.message}`, err.code, undefined);
  }
  throw err;
}

function describe(run: Run): string {
  return `${runStateName(run.state)}, step ${run.currentStep}${run.reason ? `, ${run.reason}` : ""}`;
}

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { yes: { type: "boolean", short: "y" }, ...EVALS_DIR_FLAG, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw usageError("delete", help, positionals.length ? "one run id, please" : "which run? give its id");
  const runId = positionals[0];
  // the sidecar's run id rule (py_trainer/core/paths.py): '../x' or '' is the user's mistake, refused here
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/.test(runId))
    throw usageError("delete", help, `${JSON.stringify(runId)} is not a run id ([A-Za-z0-9_-], 1-64 characters)`);
  if (!values.yes) {
    const run = await client.getRun(runId).catch(refusal);
    if (!isTerminal(run.state)) {
      throw new UserError(
        `agent delete: run ${runId} is ${runStateName(run.state)}: only a finished run can be deleted; cancel it first: agent cancel ${runId}${sidecarFlags(values)}`,
      );
    }
    const answer = await askYesNo(
      `delete run ${runId} (${describe(run)}) on the sidecar at ${client.options.address}, with its events, checkpoints and adapter? [y/N] `,
    );
    if (answer === undefined) throw new UserError(`agent delete: no answer on stdin: run ${runId} was not deleted (pass --yes to delete without asking)`);
    if (!answer) {
      console.log(`run ${runId} was not deleted`);
      return 1;
    }
  }
  const was = await client.deleteRun(runId).catch(refusal);
  console.log(`deleted run ${runId} (${describe(was)}) on the sidecar; the id can be used again`);
  const local = runDir(evalsDirOrDefault(values["evals-dir"]), runId);
  if (existsSync(local)) console.log(`the downloaded copy in ${displayPath(local)} is kept (it is yours to remove)`);
  return 0;
};
