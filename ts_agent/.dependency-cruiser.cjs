/**
 * The TS layers, checked by `npm run arch` (dependency-cruiser; `make test` runs it):
 *   cli.ts -> commands/ -> agent/, sidecar/ -> gen/ (generated, not checked)
 * parity/ is a library beside agent/. bench/ holds stand-alone scripts nobody imports.
 *
 * TypeScript 7 has no JS compiler API, so the sources are parsed with swc (`parser: "swc"`).
 */
/** @type {import("dependency-cruiser").IConfiguration} */
module.exports = {
  forbidden: [
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
