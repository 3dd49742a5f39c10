/** `agent health`: is the sidecar up? (grpc.health.v1). Exit 0 only when it is SERVING. */
import type { CommandHandler } from "./flags.js";

export const command: CommandHandler = async (_argv, client) => {
  const status = await client.checkHealth("");
  console.log(`sidecar ${client.options.address}: ${status}`);
  return status === "SERVING" ? 0 : 1;
};
