/** `agent health`: is the sidecar up? (grpc.health.v1). Exit 0 only when it is SERVING. */
import { parseArgs } from "node:util";

import { GLOBAL_FLAGS, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Is the sidecar up? (grpc.health.v1; exit 0 only when SERVING)",
  usage: "agent health",
  flags: [],
  examples: ["agent health --address 127.0.0.1:50151"],
};

export const command: CommandHandler = async (argv, client) => {
  const { positionals } = parseArgs({ args: argv, options: GLOBAL_FLAGS, allowPositionals: true, strict: true });
  if (positionals.length) throw usageError("health", help, `unexpected argument '${positionals[0]}'`);
  const status = await client.checkHealth("");
  console.log(`sidecar ${client.options.address}: ${status}`);
  return status === "SERVING" ? 0 : 1;
};
