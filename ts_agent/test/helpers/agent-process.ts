/**
 * The agent CLI in a process of its own (bin/agent), as a user runs it: exit code, stdout and
 * stderr, stack traces included. Only `*-e2e.test.ts` files may use it: the unit tier starts no
 * process (helpers/unit-tier.ts).
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";

import { REPO } from "./sidecar.js";

export const AGENT = join(REPO, "ts_agent", "bin", "agent");

/** bin/agent with `args` (and `env` over this process's environment); waits for it to exit. */
export function agentProcess(args: string[], env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(AGENT, args, { encoding: "utf8", env: { ...process.env, ...env }, timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
