/**
 * `agent watch <run_id>`: re-attach to a run (its events replayed from the start, then followed
 * live, with the same progress line as `agent train`), and download it once it is over: the one
 * command that recovers a run whose client went away. Exit 0 when the run SUCCEEDED.
 */
import { RUN_DIR_FLAG_HELP, followOneRun, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Re-attach to a run: replay its events, follow it live, then download and verify it.",
  usage: "agent watch <run_id> [--evals-dir DIR]",
  flags: [RUN_DIR_FLAG_HELP],
  notes: "Ctrl-C detaches again (a second Ctrl-C within 2 s cancels the run).",
  examples: ["agent watch run-20261201-101500-ab12cd"],
};

export const command: CommandHandler = followOneRun("watch", help);
