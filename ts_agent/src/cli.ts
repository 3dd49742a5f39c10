/**
 * `agent`: the TypeScript agent's command line. The table below is the whole CLI: each command
 * lives in commands/<name>.ts; the global flags and the client they build in commands/flags.ts.
 *
 * Global flags, before or after the command name: --address HOST:PORT (default $AGENT_SIDECAR or
 * 127.0.0.1:50151), --token T (default $PY_TRAINER_TOKEN), --timeout MS, --help.
 */
import { parseArgs } from "node:util";

import { command as baseline } from "./commands/baseline.js";
import { command as demo } from "./commands/demo.js";
import { command as evalCommand } from "./commands/eval.js";
import { GLOBAL_FLAGS, clientFromFlags, type CommandHandler } from "./commands/flags.js";
import { command as health } from "./commands/health.js";
import { command as report } from "./commands/report.js";
import { command as runs } from "./commands/runs.js";
import { command as train } from "./commands/train.js";
import { SidecarError } from "./sidecar/client.js";

/** The command table: name -> handler, with its one-line usage. */
const COMMANDS: Record<string, CommandHandler> = {
  health: health, //       agent health                  is the sidecar up? (grpc.health.v1)
  runs: runs, //           agent runs                    list the sidecar's runs
  train: train, //         agent train --config FILE     train through the sidecar (live progress, adapter download)
  eval: evalCommand, //    agent eval <run_id>           base vs the run's adapter on the test split -> eval.json
  baseline: baseline, //   agent baseline set [--force]  the base model on the test split -> agent-evals/baseline.json
  report: report, //       agent report <run_id>         report.md: curve, held-out reward, base vs adapter, verdict, TCO
  demo: demo, //           agent demo                    baseline if missing, train, eval, report (scripts/demo.sh)
};

export async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, options: GLOBAL_FLAGS, allowPositionals: true, strict: false });
  const name = positionals[0];
  if (!name || values.help || !(name in COMMANDS)) {
    console.error(`usage: agent <${Object.keys(COMMANDS).join("|")}> [--address HOST:PORT] [--token T] ...`);
    return name && !values.help ? 2 : 0;
  }
  const client = clientFromFlags(values as { address?: string; token?: string; timeout?: string });
  try {
    return await COMMANDS[name](argv.slice(argv.indexOf(name) + 1), client);
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
