/**
 * `agent`: the TypeScript agent's command line.
 *
 *   agent health                      is the sidecar up? (grpc.health.v1)
 *   agent runs                        list the sidecar's runs
 *   agent train --config FILE         train through the sidecar (live progress, adapter download)
 *   agent eval <run_id>               base vs the run's adapter on the test split -> eval.json
 *   agent baseline set [--force]      the base model on the test split -> agent-evals/baseline.json
 *   agent report <run_id>             report.md: curve, held-out reward, base vs adapter, verdict, TCO
 *   agent demo                        baseline if missing, train, eval, report (scripts/demo.sh)
 *
 * Global flags: --address HOST:PORT (default $AGENT_SIDECAR or 127.0.0.1:50151), --token T
 * (default $PY_TRAINER_TOKEN), --timeout MS.
 */
import { parseArgs } from "node:util";

import { command as demo } from "./agent/demo-command.js";
import { command as baseline } from "./agent/eval/baseline-command.js";
import { command as evalCommand } from "./agent/eval/eval-command.js";
import { command as report } from "./agent/report/report-command.js";
import { command as train } from "./agent/train/train-command.js";
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

const COMMANDS: Record<string, Handler> = { health, runs, train, eval: evalCommand, baseline, report, demo };

export async function main(argv: string[]): Promise<number> {
  const commands = COMMANDS;
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
