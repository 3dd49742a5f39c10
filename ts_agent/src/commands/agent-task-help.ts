/** The --agent-task flags of `agent train` and `agent demo` (their help; the handlers are in agent-task.ts, loaded only when used). */
export const trainHelp: Array<[string, string]> = [
  ["--agent-task FILE", "an agent task in TypeScript (docs/agents.md): its train rows, tools and scorers; this process serves them while the run trains"],
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
  ["--data-root DIR", "with --agent-task: the sidecar's data root, where the demonstrations are written (default $PY_TRAINER_DATA_ROOT or the repository)"],
  ["--seed N", "with --agent-task: the training seed (grpo.seed), over the config's"],
  ["--force", "with --agent-task: train even when the preflight finds no group whose rewards differ"],
];
