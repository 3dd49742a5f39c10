/**
 * The package entry point as a user's own project sees it (docs/agents.md): the package packed as
 * `npm pack` packs it (its prepack build and its `files` list), installed from the tarball into a
 * project outside the repo, and an agent task file there that imports `defineAgentTask` by the
 * package's name. It runs under plain node (ESM) and under tsx, tsc type-checks it, and the agent's
 * own loader takes it (`bin/agent eval --agent-task FILE` against no sidecar: a file that loads and
 * passes the checks gets as far as the connection, exit 1; one that does not load is exit 2).
 *
 * The pack runs in a staging folder that links this checkout's src/ and node_modules/, because
 * prepack's build starts with `rm -rf dist` and other tests run bin/agent from ts_agent/dist.
 * The install is offline: the tarball's dependencies come from this checkout's node_modules (linked
 * folders, the versions package-lock.json pins) with an empty npm cache and --offline, so the test
 * never reaches the registry; a user's `npm install <tarball>` fetches the same ones from it.
 */
import { strict as assert } from "node:assert";
import { spawnSync } from "node:child_process";
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { AGENT } from "./helpers/agent-process.js";
import { REPO } from "./helpers/sidecar.js";

const TS_AGENT = join(REPO, "ts_agent");
const PKG = JSON.parse(readFileSync(join(TS_AGENT, "package.json"), "utf8")) as { name: string; dependencies: Record<string, string> };
const BIN = join(TS_AGENT, "node_modules", ".bin");
// a test run by `npm test` inherits npm_config_* settings meant for the repo's own npm
const ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("npm_")));

/** Run a command to its end; assert it exits 0; its stdout. */
function run(command: string, args: string[], cwd: string): string {
  const r = spawnSync(command, args, { cwd, encoding: "utf8", env: ENV, timeout: 60_000 });
  assert.equal(r.status, 0, `${command} ${args.join(" ")}\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

const TASK_FILE = `import { defineAgentTask, type AgentTaskRow, type Episode } from "${PKG.name}";

const tasks: AgentTaskRow[] = [{ id: "hi-1", prompt: "Say hi to Ada.", name: "Ada", split: "test" }];

export default defineAgentTask({
  name: "user-task",
  tasks,
  tools: {
    greet: {
      description: "A greeting for a name.",
      parameters: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
      run: ({ name }) => \`hi \${String(name)}\`,
    },
  },
  scorers: { greeted: { score: (ep: Episode) => (ep.finalAnswer.includes(String(ep.task.name)) ? 1 : 0) } },
});
`;

/** The packages `names` need at run time, theirs included (from this checkout's node_modules): an
 *  offline install links each one, and npm does not fetch a linked folder's own dependencies. */
function dependencyClosure(names: string[]): string[] {
  const seen = new Set<string>();
  const queue = [...names];
  while (queue.length) {
    const name = queue.shift()!;
    if (seen.has(name)) continue;
    seen.add(name);
    const pkg = JSON.parse(readFileSync(join(TS_AGENT, "node_modules", name, "package.json"), "utf8")) as { dependencies?: Record<string, string> };
    queue.push(...Object.keys(pkg.dependencies ?? {}));
  }
  return [...seen].sort();
}

test("a project outside the repo installs the packed package and imports defineAgentTask by its name", { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "package-entry-"));

  const stage = join(dir, "stage");
  mkdirSync(stage);
  for (const f of ["package.json", "tsconfig.json", "tsconfig.build.json"]) copyFileSync(join(TS_AGENT, f), join(stage, f));
  cpSync(join(TS_AGENT, "bin"), join(stage, "bin"), { recursive: true });
  symlinkSync(join(TS_AGENT, "src"), join(stage, "src"));
  symlinkSync(join(TS_AGENT, "node_modules"), join(stage, "node_modules"));
  const [packed] = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", dir, "--loglevel=error"], stage)) as Array<{
    filename: string;
    files: Array<{ path: string }>;
  }>;
  const files = packed.files.map((f) => f.path);
  for (const f of ["package.json", "bin/agent", "dist/cli.js", "dist/agent/agent-task/index.js", "dist/agent/agent-task/index.d.ts"])
    assert.ok(files.includes(f), `${f} not in the tarball`);
  assert.ok(!files.some((f) => f.startsWith("src/")), "the sources stay out of the tarball");

  const project = join(dir, "project");
  mkdirSync(project);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "my-agent", private: true, type: "module" }));
  const deps = dependencyClosure(Object.keys(PKG.dependencies)).map((d) => join(TS_AGENT, "node_modules", d));
  // --install-links: each dependency folder installed as a copy, not a symlink (a symlinked folder's
  // real path already sees its siblings, and npm then leaves one of them, ajv, out of the project)
  run(
    "npm",
    [
      "install",
      join(dir, packed.filename),
      ...deps,
      "--install-links",
      "--offline",
      "--cache",
      join(dir, "npm-cache"),
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
    ],
    project,
  );

  // plain node, ESM: the entry exposes defineAgentTask and defineAgentProgram alone (the types vanish at run time)
  writeFileSync(
    join(project, "plain.mjs"),
    `import * as entry from "${PKG.name}";\n` +
      `const task = entry.defineAgentTask({ name: "plain", tasks: [], tools: {}, scorers: {} });\n` +
      `console.log(JSON.stringify({ exports: Object.keys(entry), name: task.name }));\n`,
  );
  const plain = () => JSON.parse(run("node", ["plain.mjs"], project));
  assert.deepEqual(plain(), { exports: ["defineAgentProgram", "defineAgentTask"], name: "plain" });

  // tsx: the user's task file, imported as their own code would
  writeFileSync(join(project, "my.agent.ts"), TASK_FILE);
  writeFileSync(
    join(project, "show.ts"),
    `import task from "./my.agent.js";\nconsole.log(JSON.stringify({ name: task.name, tools: Object.keys(task.tools ?? {}) }));\n`,
  );
  assert.deepEqual(JSON.parse(run(join(BIN, "tsx"), ["show.ts"], project)), { name: "user-task", tools: ["greet"] });

  // tsc: the types resolve through the exports map, and they are the real ones, not `any`
  writeFileSync(
    join(project, "wrong.ts"),
    `import { defineAgentTask } from "${PKG.name}";\n` +
      `// @ts-expect-error: an agent task needs tasks, tools and scorers\ndefineAgentTask({ name: "incomplete" });\n`,
  );
  writeFileSync(
    join(project, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { module: "nodenext", strict: true, noEmit: true, skipLibCheck: false }, include: ["*.ts"] }),
  );
  run(join(BIN, "tsc"), ["-p", "."], project);

  // the agent's own loader (tsx, then the field checks): loaded, then no sidecar to talk to
  const load = spawnSync(AGENT, ["eval", "--agent-task", join(project, "my.agent.ts"), "--run", "none", "--address", "127.0.0.1:1"], {
    encoding: "utf8",
    env: ENV,
    timeout: 60_000,
  });
  assert.equal(load.status, 1, load.stdout + load.stderr);
  assert.match(load.stderr, /sidecar at 127\.0\.0\.1:1 is unavailable/);

  // the entry pulls in none of the gRPC client's dependencies (protobuf, connect): only ajv, which
  // checks a task's tool schemas (define.ts)
  for (const d of Object.keys(PKG.dependencies).filter((d) => d !== "ajv")) rmSync(join(project, "node_modules", d), { recursive: true, force: true });
  assert.deepEqual(plain(), { exports: ["defineAgentProgram", "defineAgentTask"], name: "plain" });
});
