/**
 * The TS unit tier starts no process (as pytest's conftest does for Python): `make test-fast`
 * loads this module before each unit-tier test file (`node --import tsx --import
 * ./test/helpers/unit-tier.ts --test ...`), and every way node:child_process starts a process
 * then throws, naming the test file and the command. A test that needs a process (bin/agent, a
 * sidecar, py-trainer) belongs in a `*-e2e.test.ts` file, which `make test` runs and `make
 * test-fast` does not.
 *
 * The runner's own process (the one given --test, which starts a process per test file) is left
 * alone; only the per-file processes are guarded.
 */
import childProcess from "node:child_process";
import { syncBuiltinESMExports } from "node:module";
import { relative } from "node:path";

const STARTERS = ["spawn", "spawnSync", "exec", "execSync", "execFile", "execFileSync", "fork"] as const;

const isRunner = process.execArgv.includes("--test");
const file = process.argv[1] ?? "";

if (!isRunner && file.endsWith(".test.ts")) {
  const name = relative(process.cwd(), file);
  for (const starter of STARTERS) {
    (childProcess as unknown as Record<string, unknown>)[starter] = (command: unknown) => {
      throw new Error(
        `${name} starts a process (child_process.${starter}: ${String(command)}) but is a unit-tier test: ` +
          "move the test into a *-e2e.test.ts file (make test runs it) or run the code in-process",
      );
    };
  }
  syncBuiltinESMExports(); // `import { spawn } from "node:child_process"` sees the guard too
}
