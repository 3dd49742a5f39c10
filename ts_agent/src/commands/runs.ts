/** `agent runs [--state S]`: list the sidecar's runs, one tab-separated line each (id, state, step,
 *  reason); a QUEUED run's state carries its place in the device queue ("QUEUED #2"), a running one
 *  the sidecar's slots it holds ("RUNNING on slots 0,1") and, under Ray, its node. */
import { parseArgs } from "node:util";

import { UserError, didYouMean } from "../agent/workspace.js";
import { RunState, runStateName, type Run } from "../sidecar/client.js";
import { GLOBAL_FLAGS, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

const STATES = ["QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED"];

export const help: CommandHelp = {
  summary: "List the sidecar's runs: id, state (a QUEUED run with its place in the queue, a running one with its slots), step, reason.",
  usage: "agent runs [--state S]",
  flags: [["--state S", `only runs in this state: ${STATES.join(", ")} (any case)`]],
  examples: ["agent runs", "agent runs --state running"],
};

/** "running" / "RUNNING" / "RUN_STATE_RUNNING" -> RunState.RUNNING; anything else a UserError. */
export function parseRunState(text: string): RunState {
  const name = text.toUpperCase().replace(/^RUN_STATE_/, "");
  if (!STATES.includes(name)) throw new UserError(`--state: unknown state '${text}'${didYouMean(name, STATES)}; one of ${STATES.join(", ")}`);
  return RunState[name as keyof typeof RunState];
}

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({ args: argv, options: { state: { type: "string" }, ...GLOBAL_FLAGS }, allowPositionals: true, strict: true });
  if (positionals.length) throw usageError("runs", help, `unexpected argument '${positionals[0]}'`);
  const state = values.state !== undefined ? parseRunState(values.state) : undefined;
  for (const run of await client.listRuns({ state })) console.log(runLine(run));
  return 0;
};

/** "r1\tQUEUED #2 in the queue\tstep 0\t" (the position only while QUEUED and known);
 *  "r2\tRUNNING on slots 0,1 (node 10.0.0.2 <ray node id>)\tstep 3\t" while it holds slots. */
export function runLine(run: Run): string {
  const queued = run.state === RunState.QUEUED && run.queuePosition > 0 ? ` #${run.queuePosition} in the queue` : "";
  const slots = run.slots.length > 0 ? ` on slots ${run.slots.join(",")}` : "";
  const node = run.node ? ` (node ${run.node})` : "";
  return `${run.runId}\t${runStateName(run.state)}${queued}${slots}${node}\tstep ${run.currentStep}\t${run.reason}`;
}
