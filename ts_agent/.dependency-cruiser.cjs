/**
 * The TS layers, checked by `npm run arch` (dependency-cruiser; `make arch` and `make test` run it).
 * Each floor may import its own floor and the floors below it, never one above (LAYERS, bottom first):
 *   ground    sidecar/ (the gRPC client), agent/workspace.ts (places on disk, atomic writes), gen/
 *   core      agent/core/: statistics, task rewards, the task format, the eval log's schema,
 *             the base-vs-adapter comparison; agent/code-revision.ts (which code made a log)
 *   task-sets task-sets/: the generators of the shipped task files (scripts: nothing in src/
 *             imports them; they read only core and ground)
 *   eval      agent/eval/ (tasks, Evaluate, grading, baseline) and agent/train/ (a training run);
 *             these two never import each other
 *   verdict   agent/verdict/: the milestone and what it judges
 *   replicate agent/replicate/: seeds of one recipe, judged per seed
 *   report    agent/report/: report.md and its sections
 *   actions   agent/run-comparison/ (`agent compare`), agent/checkpoint-selection/ (`agent select`)
 *   commands  commands/ (flags, refusals, printing) and parity/ (the TS side of `make parity`)
 *   top       cli.ts, bench/ (stand-alone scripts nobody imports)
 * test/arch-e2e.test.ts shows that an upward import fails this check.
 *
 * TypeScript 7 has no JS compiler API, so the sources are parsed with swc (`parser: "swc"`).
 */
const LAYERS = [
  ["ground", ["^src/sidecar/", "^src/agent/workspace\\.ts$", "^src/gen/"]],
  ["core", ["^src/agent/core/", "^src/agent/code-revision\\.ts$"]],
  ["task-sets", ["^src/task-sets/"]],
  ["eval", ["^src/agent/eval/", "^src/agent/train/", "^src/agent/agent-task/"]],
  ["verdict", ["^src/agent/verdict/"]],
  ["replicate", ["^src/agent/replicate/"]],
  ["report", ["^src/agent/report/"]],
  ["actions", ["^src/agent/run-comparison/", "^src/agent/checkpoint-selection/"]],
  ["commands", ["^src/commands/", "^src/parity/"]],
  ["top", ["^src/cli\\.ts$", "^src/bench/"]],
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
      comment: "agent/, sidecar/ and parity/ are libraries: they never import a command or the CLI.",
      from: { path: "^src/(agent|sidecar|parity)/" },
      to: { path: "^src/(commands/|cli\\.ts$)" },
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
