/**
 * The TS layers, checked by `npm run arch` (dependency-cruiser; `make arch` and `make test` run it).
 * Each floor may import its own floor and the floors below it, never one above (LAYERS, bottom first):
 *   ground    sidecar/ (the gRPC client), agent/workspace.ts (places on disk, atomic writes), gen/
 *   core      agent/core/: statistics, task rewards, the task format, the eval log's schema,
 *             the base-vs-adapter comparison; agent/code-revision.ts (which code made a log)
 *   task-sets task-sets/: the generators of the shipped task files (scripts: nothing in src/
 *             imports them; they read only core and ground)
 *   eval-train agent/eval/ (tasks, Evaluate, grading, baseline), agent/train/ (a training run)
 *             and agent/agent-task/ (agent tasks trained and evaluated); eval/ and train/ never
 *             import each other
 *   verdict   agent/verdict/: the milestone and what it judges
 *   replicate agent/replicate/: seeds of one recipe, judged per seed
 *   report    agent/report/: report.md and its sections
 *   actions   agent/run-comparison/ (`agent compare`), agent/checkpoint-selection/ (`agent select`)
 *   pipeline  pipeline/: what several commands run (follow a run, evaluate an adapter, baseline.json
 *             at the start of demo and sweep, the demo request, a sweep's run, a run's own task
 *             file, what Ctrl-C prints), so that no command imports another
 *   commands  commands/ (flags, refusals, printing; one file per command, importing no other
 *             command but flags.ts and agent-task-help.ts)
 *   top       cli.ts, bench/ and parity/ (the TS side of `make parity`): entry points and
 *             stand-alone scripts nobody imports
 * test/arch-e2e.test.ts shows that an upward import fails this check.
 *
 * TypeScript 7 has no JS compiler API, so the sources are parsed with swc (`parser: "swc"`).
 */
const LAYERS = [
  ["ground", ["^src/sidecar/", "^src/agent/workspace\\.ts$", "^src/gen/"]],
  ["core", ["^src/agent/core/", "^src/agent/code-revision\\.ts$"]],
  ["task-sets", ["^src/task-sets/"]],
  ["eval-train", ["^src/agent/eval/", "^src/agent/train/", "^src/agent/agent-task/"]],
  ["verdict", ["^src/agent/verdict/"]],
  ["replicate", ["^src/agent/replicate/"]],
  ["report", ["^src/agent/report/"]],
  ["actions", ["^src/agent/run-comparison/", "^src/agent/checkpoint-selection/"]],
  ["pipeline", ["^src/pipeline/"]],
  ["commands", ["^src/commands/"]],
  ["top", ["^src/cli\\.ts$", "^src/bench/", "^src/parity/"]],
];

/** One rule per floor: nothing on it imports a floor above it. */
const layerRules = LAYERS.slice(0, -1).map(([name, paths], i) => ({
  name: `layer-${name}-not-up`,
  severity: "error",
  comment: `The ${name} floor imports only its own floor and those below (${LAYERS.slice(0, i).map(([n]) => n).join(", ") || "none"}): ` +
    `move the shared thing down instead of importing ${LAYERS.slice(i + 1).map(([n]) => n).join(", ")}.`,
  from: { path: paths },
  to: { path: LAYERS.slice(i + 1).flatMap(([, p]) => p) },
}));

/** @type {import("dependency-cruiser").IConfiguration} */
module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: "every-file-on-a-floor",
      severity: "error",
      comment: "A new folder or top-level file under src/ gets a floor in LAYERS (.dependency-cruiser.cjs) and a row in docs/architecture.md.",
      from: { path: "^src/", pathNot: LAYERS.flatMap(([, p]) => p) },
      to: {},
    },
    {
      name: "eval-and-train-apart",
      severity: "error",
      comment: "agent/eval/ and agent/train/ share a floor but not each other: what both need lives in agent/core/.",
      from: { path: "^src/agent/(eval|train)/" },
      to: { path: "^src/agent/(eval|train)/", pathNot: "^src/agent/$1/" },
    },
    {
      name: "no-circular",
      severity: "error",
      comment: "A circle of imports has no bottom floor: move the shared thing down instead.",
      from: { path: "^src/", pathNot: "^src/gen/" },
      to: { circular: true },
    },
    {
      name: "library-not-to-commands",
      severity: "error",
      comment: "agent/, sidecar/, pipeline/ and parity/ are libraries: they never import a command or the CLI.",
      from: { path: "^src/(agent|sidecar|pipeline|parity)/" },
      to: { path: "^src/(commands/|cli\\.ts$)" },
    },
    {
      name: "no-command-imports-a-command",
      severity: "error",
      comment: "A command file is thin: what two commands share lives on the pipeline floor (or in agent/), not in another command (flags.ts and agent-task-help.ts are shared flags and help; agent-task.ts is reached only by the commands' --agent-task hooks).",
      from: { path: "^src/commands/" },
      to: { path: "^src/commands/", pathNot: "^src/commands/(flags|agent-task-help|agent-task)\\.ts$" },
    },
    {
      name: "nothing-imports-task-sets",
      severity: "error",
      comment: "task-sets/ generates the checked-in task files; the commands read those files through agent/eval/tasks.ts, never a generator.",
      from: { path: "^src/", pathNot: "^src/task-sets/" },
      to: { path: "^src/task-sets/" },
    },
    {
      name: "nothing-imports-bench",
      severity: "error",
      comment: "bench/ holds stand-alone benchmark scripts; nothing may depend on them.",
      from: {},
      to: { path: "^src/bench/" },
    },
    {
      name: "not-to-unresolvable",
      severity: "error",
      comment: "An import that does not resolve would hide an edge from the rules above.",
      from: { path: "^src/", pathNot: "^src/gen/" },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    parser: "swc",
    // Generated code (src/gen, `make proto`) is a leaf: imports of it count, its insides are not checked.
    doNotFollow: { path: ["node_modules", "^src/gen/"] },
    // Resolve package subpaths (e.g. @bufbuild/protobuf/wkt) through their "exports" map, as Node does.
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default"],
    },
  },
};
