/** The help of the agent flags: --agent-task of `agent train` and `agent demo`, --agent-program of train, eval, plan and sweep
 *  (the handlers are in agent-task.ts, loaded only when used). */

/** --agent-program (agent-task.ts agentProgramArgv). */
export const agentProgramHelp: [string, string] = [
  "--agent-program FILE",
  "an agent program (docs/agent-programs.md: your own agent, its own loop and tools, with its OpenAI base URL pointed at the sidecar's endpoint): read as --agent-task FILE, refused for a file whose default export has no run",
];

export const trainHelp: Array<[string, string]> = [
  [
    "--agent-task FILE",
    "an agent task in TypeScript (docs/agents.md): its train rows, tools and scorers (or an agent program's rollouts); this process serves them while the run trains",
  ],
  agentProgramHelp,
  [
    "--force",
    "with --agent-task: train even when the preflight (the base's episodes sampled on a few train tasks first) finds no group whose rewards differ: GRPO would have nothing to learn",
  ],
  [
    "--init-from RUN",
    "with --agent-task: GRPO from RUN's adapter (a warm start: agent warmstart) on RUN's base; agent eval then scores base, warm start and warm start + GRPO",
  ],
  ["--accept-changed-task", "with --resume: go on although FILE changed since RUN trained on it (recorded in runs/<RUN>/agent-task-changes.jsonl)"],
  [
    "--resume RUN",
    "with --agent-task: continue agent run RUN from its last checkpoint, serving FILE's tools again (refused when FILE is not the file RUN recorded, naming what changed); `agent resume RUN` does the same with the recorded file",
  ],
];

export const demoHelp: Array<[string, string]> = [
  [
    "--agent-task FILE",
    "an agent task with reference(task): demonstrations -> its embedded agent model, baseline.json, train, eval base vs adapter, report (docs/agents.md)",
  ],
  [
    "--agent-program FILE --demonstrations-from TASK_FILE",
    "an agent program (docs/agent-programs.md), its embedded agent model built from TASK_FILE's reference demonstrations, then as --agent-task",
  ],
  ["--data-root DIR", "with --agent-task: the sidecar's data root, where the demonstrations are written (default $PY_TRAINER_DATA_ROOT or the repository)"],
  ["--seed N", "with --agent-task: the training seed (grpo.seed), over the config's"],
  ["--force", "with --agent-task: train even when the preflight finds no group whose rewards differ"],
];
