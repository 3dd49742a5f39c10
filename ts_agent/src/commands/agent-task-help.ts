/** The --agent-task flags of `agent train` and `agent eval` (their help; the handlers are in agent-task.ts, loaded only when used). */
export const trainHelp: Array<[string, string]> = [
  ["--agent-task FILE", "an agent task in TypeScript (docs/agents.md): its train rows, tools and scorers"],
  ["--config FILE", "with --agent-task: a TrainRequest in proto JSON for the knobs (grpo, lora, base_model, held_out)"],
  ["--resume RUN", "with --agent-task: serve the tools again where RUN calls them and continue it from its last checkpoint (its agent process died)"],
];

export const evalHelp: Array<[string, string]> = [
  ["--agent-task FILE", "an agent task: base vs --run's adapter on its test rows, episodes judged per task"],
  ["--run ID", "with --agent-task: the trained run whose adapter is evaluated"],
  ["--samples K", "with --agent-task: episodes per task (default 1, greedy; K > 1 samples at temperature 1)"],
  ["--threshold T", "with --agent-task: exit 1 when the adapter's success is below T (a fraction)"],
  ["--out DIR", "with --agent-task: where report.md, eval.json and junit.xml go (default <evals dir>/agent-runs/<name>/<run>)"],
];

export const demoHelp: Array<[string, string]> = [
  ["--agent-task FILE", "an agent task with reference(task): demonstrations -> its embedded agent model, train, then eval base vs adapter (docs/agents.md)"],
  ["--data-root DIR", "with --agent-task: the sidecar's data root, where the demonstrations are written (default $PY_TRAINER_DATA_ROOT or the repository)"],
  ["--out DIR", "with --agent-task: where report.md, eval.json and junit.xml go (default <evals dir>/agent-runs/<name>/<run>)"],
  ["--seed N", "with --agent-task: the training seed (grpo.seed), over the config's"],
];
