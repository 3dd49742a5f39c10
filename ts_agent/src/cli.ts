/**
 * `agent`: the TypeScript agent's command line. The table below is the whole CLI: each command
 * lives in commands/<name>.ts (its handler and its `help`); the global flags and the client they
 * build in commands/flags.ts. A command's module is imported only when it runs, so `agent --help`
 * starts without loading the gRPC stack.
 *
 * Exit codes: 0 done; 1 the work failed (a sidecar error, a run that did not succeed); 2 a user
 * mistake (unknown command or flag, a missing or malformed file, a bad number), always one line
 * on stderr; 130 detached by Ctrl-C. A stack trace means a bug.
 *
 * Global flags, before or after the command name: --address HOST:PORT (default $AGENT_SIDECAR or
 * 127.0.0.1:50151), --token T (default $PY_TRAINER_TOKEN), --timeout MS, --help.
 */
import { parseArgs } from "node:util";

import { UserError, didYouMean } from "./agent/workspace.js";
import { Code } from "@connectrpc/connect";
import type { CommandHandler, CommandHelp } from "./commands/flags.js";
import { demoHelp as AGENT_DEMO_FLAGS } from "./commands/agent-task-help.js";

interface Entry {
  summary: string;
  load: () => Promise<{ command: CommandHandler; help?: CommandHelp }>;
  /** help for a command whose module has none of its own */
  help?: CommandHelp;
}

/** The command table: name -> one-line summary and its module. */
const COMMANDS: Record<string, Entry> = {
  health: { summary: "is the sidecar up? (grpc.health.v1)", load: () => import("./commands/health.js") },
  runs: { summary: "list the sidecar's runs [--state S]", load: () => import("./commands/runs.js") },
  train: { summary: "train through the sidecar (live progress, verified download)", load: () => import("./commands/train.js") },
  warmstart: {
    summary: "a warm start before RL: LoRA SFT on an agent task's demonstrations (then train --init-from)",
    load: () => import("./commands/warmstart.js"),
  },
  watch: { summary: "re-attach to a run, follow it, download it at the end", load: () => import("./commands/watch.js") },
  cancel: { summary: "cancel a run (stops after the current step, adapter kept)", load: () => import("./commands/cancel.js") },
  delete: { summary: "delete a finished run and its folder on the sidecar (asks first; --yes)", load: () => import("./commands/delete.js") },
  resume: { summary: "continue a FAILED or CANCELLED run from its last checkpoint, then watch it", load: () => import("./commands/resume.js") },
  download: { summary: "download a finished run (resumable, sha256-checked, idempotent)", load: () => import("./commands/download.js") },
  eval: { summary: "base vs a run's adapter (or --adapter PATH) on the test split -> eval.json", load: () => import("./commands/eval.js") },
  try: { summary: "one prompt through a run's base and its adapter, greedy: both completions", load: () => import("./commands/try.js") },
  baseline: {
    summary: "the base model on the test split -> agent-evals/baseline.json (set, show, history, check)",
    load: () => import("./commands/baseline.js"),
  },
  plan: { summary: "before training: required n and MDE for +5 pp at the available test size", load: () => import("./commands/plan.js") },
  report: {
    summary: "report.md for a downloaded run: curve, rewards, base vs adapter, verdict (--eval FILE: an --adapter eval)",
    load: () => import("./commands/report.js"),
  },
  sweep: { summary: "replicate one request under N seeds: train, eval, report each; the recipe across seeds", load: () => import("./commands/sweep.js") },
  export: { summary: "a run's adapter as a PEFT folder, or --merge into a full model", load: () => import("./commands/export.js") },
  "serve-policy": {
    summary: "a downloaded run's adapter on an OpenAI-compatible endpoint, for any OpenAI client (py-trainer serve-policy)",
    load: () => import("./commands/serve-policy.js"),
  },
  compare: {
    summary: "several runs' adapters and the base on the same tasks: pairwise deltas, Holm -> compare.md",
    load: () => import("./commands/compare.js"),
  },
  select: {
    summary: "choose a run's checkpoint on a validation split, then evaluate only it on test -> selection.json",
    load: () => import("./commands/select.js"),
  },
  demo: {
    summary: "baseline if missing, train, eval, report (scripts/demo.sh)",
    load: () => import("./commands/demo.js"),
    help: {
      summary: "The whole first run: health, baseline if missing, train, eval, report, and where every file is.",
      usage:
        "agent demo [--config FILE] [--run-id ID] [--tasks PATH] [--evals-dir DIR] | agent demo --agent-task FILE [--config FILE] [--data-root DIR] | agent demo --agent-program FILE --demonstrations-from TASK_FILE [...]",
      flags: [
        ...AGENT_DEMO_FLAGS,
        ["--config FILE", "a TrainRequest in proto JSON instead of the default request"],
        ["--run-id ID", "the run id to ask for (default: the sidecar assigns one)"],
        ["--tasks PATH", "task file (docs/tasks.md): its train rows on its embedded model (default: the AML task set)"],
        ["--evals-dir DIR", "where baseline.json and runs/ live (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)"],
      ],
      examples: ["make demo", "agent demo --run-id demo-1", "make demo-agent", "make demo-agent-program"],
    },
  },
};

function globalHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  return [
    "usage: agent <command> [flags]   (agent <command> --help for its flags and an example)",
    "",
    "commands:",
    ...Object.entries(COMMANDS).map(([n, e]) => `  ${n.padEnd(width)}  ${e.summary}`),
    "",
    "global flags: --address HOST:PORT (default $AGENT_SIDECAR or 127.0.0.1:50151), --token T, --timeout MS, -h/--help",
    "",
    "example:",
    "  agent train --config run.json && agent eval <run_id> && agent report <run_id>",
  ].join("\n");
}

/** node:util parseArgs' errors ("Unknown option '--conifg'. To specify ...") as one line with a did-you-mean. */
function parseArgsError(
  err: unknown,
  name: string,
  help: CommandHelp | undefined,
  flagNames: (h?: CommandHelp) => string[],
  argv: string[],
): UserError | undefined {
  const code = (err as NodeJS.ErrnoException)?.code;
  if (typeof code !== "string" || !code.startsWith("ERR_PARSE_ARGS_")) return undefined;
  const message = (err as Error).message;
  const unknown = /Unknown option '([^']+)'/.exec(message);
  if (unknown) return new UserError(`agent ${name}: unknown flag ${unknown[1]}${didYouMean(unknown[1], flagNames(help))} (see agent ${name} --help)`);
  // "--limit -3": parseArgs reads -3 as a flag and says only "argument is ambiguous"
  const ambiguous = /Option '([^']+)' argument is ambiguous/.exec(message);
  if (ambiguous) {
    const value = argv[argv.indexOf(ambiguous[1]) + 1] ?? "";
    return new UserError(`agent ${name}: ${ambiguous[1]} ${value}: not a valid value (it starts with '-'; see agent ${name} --help)`);
  }
  const first = message.split(/\.\s/)[0].replace(/\.$/, "");
  return new UserError(`agent ${name}: ${first} (see agent ${name} --help)`);
}

export async function main(argv: string[]): Promise<number> {
  // `agent` and `agent --help` need nothing but this table: answer before loading anything else
  if (argv.length === 0 || (argv.length === 1 && ["--help", "-h"].includes(argv[0]))) {
    console.log(globalHelp());
    return argv.length ? 0 : 2;
  }
  const { GLOBAL_FLAGS, clientFromFlags, flagNames, renderHelp } = await import("./commands/flags.js");
  const { values, tokens } = parseArgs({ args: argv, options: GLOBAL_FLAGS, allowPositionals: true, strict: false, tokens: true });
  const at = tokens.find((t) => t.kind === "positional");
  const name = at?.kind === "positional" ? at.value : undefined;
  const before = argv.slice(0, at ? at.index : argv.length);
  try {
    // flags before the command name must be global ones
    const stray = tokens.find((t) => t.kind === "option" && t.index < before.length && !(t.name in GLOBAL_FLAGS));
    if (stray?.kind === "option") {
      throw new UserError(`agent: unknown flag ${stray.rawName}${didYouMean(stray.rawName, flagNames(undefined))} before the command (see agent --help)`);
    }
    if (!name) {
      console.log(globalHelp());
      return values.help ? 0 : 2;
    }
    const entry = COMMANDS[name];
    if (!entry) throw new UserError(`agent: unknown command '${name}'${didYouMean(name, Object.keys(COMMANDS))} (see agent --help)`);
    const mod = await entry.load();
    const help = mod.help ?? entry.help;
    if (values.help) {
      console.log(help ? renderHelp(name, help) : `agent ${name}: ${entry.summary}`);
      return 0;
    }
    const client = clientFromFlags(values as { address?: string; token?: string; timeout?: string });
    try {
      return await mod.command(argv.slice(at!.index + 1), client);
    } catch (err) {
      throw parseArgsError(err, name, help, flagNames, argv) ?? err;
    }
  } catch (err) {
    if (err instanceof UserError) {
      console.error(err.message.startsWith("agent") ? err.message : `agent${name && name in COMMANDS ? ` ${name}` : ""}: ${err.message}`);
      return 2;
    }
    // a sidecar error names its gRPC code; anything else is a bug and keeps its stack
    const { SidecarError } = await import("./sidecar/client.js");
    if (err instanceof SidecarError) {
      console.error(`agent ${name}: ${err.codeName}: ${err.message}`);
      return exitCodeOf(err.code);
    }
    throw err;
  }
}

/** The one exit-code rule (docs/usage.md): 2 for the user's mistake (an unknown id: NOT_FOUND; a
 *  value the sidecar refuses: INVALID_ARGUMENT; an id already taken: ALREADY_EXISTS), 1 for a failure. */
export function exitCodeOf(code: Code): 1 | 2 {
  return code === Code.NotFound || code === Code.InvalidArgument || code === Code.AlreadyExists ? 2 : 1;
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
