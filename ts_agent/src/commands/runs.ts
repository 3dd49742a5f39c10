/** `agent runs`: list the sidecar's runs, one tab-separated line each (id, state, step, reason). */
import { runStateName } from "../sidecar/client.js";
import type { CommandHandler } from "./flags.js";

export const command: CommandHandler = async (_argv, client) => {
  for (const run of await client.listRuns()) {
    console.log(`${run.runId}\t${runStateName(run.state)}\tstep ${run.currentStep}\t${run.reason}`);
  }
  return 0;
};
