/** Issue 32, item 4: Ctrl-C on agent demo / agent sweep says which run keeps training and the
 *  commands to follow or cancel it (it exited 130 with no message). */
import assert from "node:assert/strict";
import { test } from "node:test";

import { interruptLines } from "../src/commands/interrupt.js";

test("the run that keeps running, with watch and cancel commands carrying the flags", () => {
  const lines = interruptLines({ command: "sweep", runId: "sw-s3", seedsLeft: [4, 5], flags: { address: "h:1", "evals-dir": "E" } });
  assert.equal(lines[0], "agent sweep: interrupted.");
  assert.ok(lines.some((l) => l.includes("run sw-s3 keeps running")));
  assert.ok(lines.some((l) => /agent watch sw-s3 .*--address h:1/.test(l) && l.includes("--evals-dir E")));
  assert.ok(lines.some((l) => /agent cancel sw-s3 .*--address h:1/.test(l)));
  assert.ok(lines.some((l) => l.includes("seeds not started: 4, 5")));
});

test("before a run is named: where to find it", () => {
  assert.match(interruptLines({ command: "demo", runId: "", flags: {} }).join("\n"), /agent runs/);
});
