/** Local run folders written by hand, as `agent train` leaves them. */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A temp evals dir with runs/r1/run.json of a SUCCEEDED run: the evals dir and the run's folder. */
export function runFolder(): { dir: string; run: string } {
  const dir = mkdtempSync(join(tmpdir(), "evals-select-"));
  mkdirSync(join(dir, "runs", "r1"), { recursive: true });
  writeFileSync(join(dir, "runs", "r1", "run.json"), JSON.stringify({ runId: "r1", state: "RUN_STATE_SUCCEEDED" }));
  return { dir, run: join(dir, "runs", "r1") };
}
