/**
 * `agent`: the TypeScript agent's command line.
 *
 *   agent health                      is the sidecar up? (grpc.health.v1)
 *   agent runs                        list the sidecar's runs
 *   agent train --config FILE         train through the sidecar (live progress, adapter download)
 *
 * Global flags: --address HOST:PORT (default $AGENT_SIDECAR or 127.0.0.1:50151), --token T
 * (default $PY_TRAINER_TOKEN), --timeout MS.
 */
import { parseArgs } from "node:util";

import { SidecarClient, SidecarError, runStateName } from "./sidecar/client.js";

type Handler = (argv: string[], client: SidecarClient) => Promise<number>;

const GLOBAL_OPTIONS = {
  address: { type: "string" },
  token: { type: "string" },
  timeout: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

export function clientFromFlags(values: { address?: string; token?: string; timeout?: string }): SidecarClient {
  return new SidecarClient({
    address: values.address ?? process.env.AGENT_SIDECAR ?? "127.0.0.1:50151",
    token: values.token ?? process.env.PY_TRAINER_TOKEN,
    timeoutMs: values.timeout ? Number(values.timeout) : undefined,
  });
}

const health: Handler = async (_argv, client) => {
  const status = await client.checkHealth("");
  console.log(`sidecar ${client.options.address}: ${status}`);
  return status === "SERVING" ? 0 : 1;
};

const runs: Handler = async (_argv, client) => {
  for (const run of await client.listRuns()) {
    console.log(`${run.runId}\t${runStateName(run.state)}\tstep ${run.currentStep}\t${run.reason}`);
  }
  return 0;
};

async function loadCommands(): Promise<Record<string, Handler>> {
  const commands: Record<string, Handler> = { health, runs };
  // Later commands live in their own modules and are loaded only when present.
  for (const [name, mod] of [
    ["train", "./agent/train/train-command.js"],
    ["eval", "./agent/eval/eval-command.js"],
    ["baseline", "./agent/eval/baseline-command.js"],
    ["report", "./agent/report/report-command.js"],
    ["demo", "./agent/demo-command.js"],
  ] as const) {
    try {
      const m = (await import(mod)) as { command: Handler };
      commands[name] = m.command;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ERR_MODULE_NOT_FOUND") throw err;
    }
  }
  return commands;
}

export async function main(argv: string[]): Promise<number> {
  const commands = await loadCommands();
  const { values, positionals } = parseArgs({ args: argv, options: GLOBAL_OPTIONS, allowPositionals: true, strict: false });
  const name = positionals[0];
  if (!name || values.help || !(name in commands)) {
    console.error(`usage: agent <${Object.keys(commands).join("|")}> [--address HOST:PORT] [--token T] ...`);
    return name && !values.help ? 2 : 0;
  }
  const client = clientFromFlags(values as { address?: string; token?: string; timeout?: string });
  try {
    return await commands[name](argv.slice(argv.indexOf(name) + 1), client);
  } catch (err) {
    if (err instanceof SidecarError) {
      console.error(`agent ${name}: ${err.codeName}: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

const isMain = process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isMain) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
