/**
 * Ctrl-C (or SIGTERM) during `agent demo` or `agent sweep` (issue 32, item 4): the run on the sidecar keeps
 * training (a dropped stream never stops a run), so the agent says which run keeps going and the
 * commands to follow or cancel it before it exits 130 (it exited with no message). A sweep has
 * several runs on the sidecar at once: each is named with its commands.
 */
import { repeatFlags, sidecarFlags } from "./next-commands.js";

export interface Interrupted {
  command: "demo" | "sweep";
  /** the run training now ("" before the sidecar named it) */
  runId: string;
  /** sweep: every run of it on the sidecar now (waiting or training), in place of runId */
  runIds?: string[];
  /** sweep: the seeds not started yet, and the sweep's id (to continue it) */
  seedsLeft?: number[];
  sweepId?: string;
  flags: { address?: string; token?: string; "evals-dir"?: string };
}

/** What Ctrl-C prints (stderr). */
export function interruptLines(s: Interrupted): string[] {
  const out = [`agent ${s.command}: interrupted.`];
  if (s.runIds && s.runIds.length > 1) {
    out.push(`runs ${s.runIds.join(", ")} keep running on the sidecar (queued ones start as slots free).`);
    for (const id of s.runIds)
      out.push(`  follow ${id}:  agent watch ${id}${repeatFlags(s.flags)}`, `  cancel ${id}:  agent cancel ${id}${sidecarFlags(s.flags)}`);
  } else if (s.runIds?.length === 0) {
    out.push("no run of the sweep is on the sidecar now.");
  } else if (s.runIds?.[0] ?? s.runId) {
    const runId = s.runIds?.[0] ?? s.runId;
    out.push(
      `run ${runId} keeps running on the sidecar.`,
      `  follow it:  agent watch ${runId}${repeatFlags(s.flags)}`,
      `  cancel it:  agent cancel ${runId}${sidecarFlags(s.flags)}`,
    );
  } else {
    out.push(`no run was started, or the sidecar had not named it yet; see: agent runs${sidecarFlags(s.flags)}`);
  }
  if (s.seedsLeft?.length) out.push(`seeds not started: ${s.seedsLeft.join(", ")}`);
  if (s.sweepId)
    out.push(`continue the sweep (follows its runs on the sidecar, trains the seeds not started): agent sweep --resume ${s.sweepId}${repeatFlags(s.flags)}`);
  return out;
}

/** Print interruptLines(state()) and exit on SIGINT (130) or SIGTERM (143; issue 30, item 9: a
 *  SIGTERM'd sweep said nothing of the run it left training) until the returned function is called. */
export function onInterrupt(state: () => Interrupted): () => void {
  const handler = (signal: NodeJS.Signals) => {
    const lines = interruptLines(state());
    if (signal === "SIGTERM") lines[0] = lines[0].replace("interrupted.", "terminated (SIGTERM).");
    for (const line of lines) console.error(line);
    process.exit(signal === "SIGTERM" ? 143 : 130);
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
  return () => {
    process.off("SIGINT", handler);
    process.off("SIGTERM", handler);
  };
}
