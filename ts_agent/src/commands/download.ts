/**
 * `agent download <run_id>`: fetch a finished run into <evals dir>/runs/<run_id>/: every artifact
 * resumed from its .partial, sha256-checked, renamed once verified; files already there and
 * verified are kept, so running it again fetches nothing. run.json is written last: a folder
 * without it is not complete. Exit 1 (and the `agent watch` command) for a run not over yet.
 */
import { RunNotFinished, downloadRun } from "../agent/train/run.js";
import { displayPath, evalsDirOrDefault } from "../agent/workspace.js";
import { runStateName } from "../sidecar/client.js";
import { repeatFlags } from "../pipeline/next-commands.js";
import { RUN_DIR_FLAG_HELP, oneRunId, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Download a finished run (resumable, sha256-checked, idempotent).",
  usage: "agent download <run_id> [--evals-dir DIR]",
  flags: [RUN_DIR_FLAG_HELP],
  examples: ["agent download run-20261201-101500-ab12cd"],
};

export const command: CommandHandler = async (argv, client) => {
  const { values, runId } = oneRunId("download", help, argv);
  try {
    const out = await downloadRun(client, runId, evalsDirOrDefault(values["evals-dir"]), {
      onWait: (pid) => console.log(`another agent (pid ${pid}) is downloading ${runId} into the same folder: waiting for it`),
      onArtifact: (art, fetched) => console.log(`${fetched ? "fetched " : "verified"} ${art.path} (${art.sizeBytes} bytes, sha256 ${art.sha256.slice(0, 12)})`),
    });
    const what = out.fetched.length ? `${out.fetched.length} fetched, ${out.kept.length} already there` : `all ${out.kept.length} already there and verified`;
    console.log(`run ${runId}: ${runStateName(out.run.state)}; artifacts ${what}: ${displayPath(out.localDir)}`);
    return 0;
  } catch (err) {
    if (err instanceof RunNotFinished) {
      console.error(`agent download: ${err.message}; follow it and download it at the end with: agent watch ${runId}${repeatFlags(values)}`);
      return 1;
    }
    throw err;
  }
};
