/**
 * SIGTERM to `agent sweep` (issue 30, item 9): it left the current seed's run training on the
 * sidecar and said nothing about it. Now, as for Ctrl-C, it names the run and prints the command
 * that cancels it (and the sweep's --resume), then exits 143.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { onInterrupt } from "../src/pipeline/interrupt.js";

test("SIGTERM during a sweep prints the run left training and the command that cancels it; exit 143", () => {
  const printed: string[] = [];
  const exits: number[] = [];
  const { error } = console;
  const { exit } = process;
  console.error = (line: string) => void printed.push(line);
  process.exit = ((code: number) => void exits.push(code)) as typeof process.exit;
  const stop = onInterrupt(() => ({ command: "sweep", runId: "sw-s4", seedsLeft: [5], sweepId: "sw", flags: { address: "10.0.0.5:50151" } }));
  try {
    process.emit("SIGTERM", "SIGTERM");
  } finally {
    stop();
    console.error = error;
    process.exit = exit;
  }
  assert.deepEqual(exits, [143]);
  assert.equal(printed[0], "agent sweep: terminated (SIGTERM).");
  assert.ok(printed.includes("  cancel it:  agent cancel sw-s4 --address 10.0.0.5:50151"), printed.join("\n"));
  assert.ok(
    printed.some((l) => l.startsWith("continue the sweep") && l.includes("agent sweep --resume sw")),
    printed.join("\n"),
  );
  assert.equal(process.listenerCount("SIGTERM"), 0); // removed once the sweep is done with it
});
