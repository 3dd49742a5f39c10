/** Issue 32, item 4: Ctrl-C on agent demo / agent sweep says which run keeps training and the
 *  commands to follow or cancel it (it exited 130 with no message); a sweep can be continued
 *  (agent sweep --resume ID: its folder was left empty and nothing could continue it). */
import assert from "node:assert/strict";
import { test } from "node:test";

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { main } from "../src/cli.js";
import { interruptLines } from "../src/pipeline/interrupt.js";
import { captureConsole } from "./helpers/console.js";

test("the run that keeps running, with watch and cancel commands carrying the flags", () => {
  const lines = interruptLines({ command: "sweep", runId: "sw-s3", seedsLeft: [4, 5], sweepId: "sw", flags: { address: "h:1", "evals-dir": "E" } });
  assert.equal(lines[0], "agent sweep: interrupted.");
  assert.ok(lines.some((l) => l.includes("run sw-s3 keeps running")));
  assert.ok(lines.some((l) => /agent watch sw-s3 .*--address h:1/.test(l) && l.includes("--evals-dir E")));
  assert.ok(lines.some((l) => /agent cancel sw-s3 .*--address h:1/.test(l)));
  assert.ok(lines.some((l) => l.includes("seeds not started: 4, 5")));
  assert.ok(lines.some((l) => /agent sweep --resume sw --address h:1 --evals-dir E$/.test(l)));
});

test("agent sweep --resume: an unknown sweep, or a setting of its own beside it, is one line, exit 2", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sweep-resume-"));
  for (const [args, want] of [
    [["--resume", "nope"], /--resume nope: no sweep-plan\.json in /],
    [["--resume", "nope", "--seeds", "3"], /--resume takes the sweep's own settings: leave out --seeds/],
  ] as const) {
    const { value: code, err } = await captureConsole(() => main(["sweep", ...args, "--evals-dir", dir, "--address", "127.0.0.1:9"]));
    assert.equal(code, 2, err.join("\n"));
    assert.equal(err.length, 1, err.join("\n"));
    assert.match(err[0], want);
  }
});

test("before a run is named: where to find it", () => {
  assert.match(interruptLines({ command: "demo", runId: "", flags: {} }).join("\n"), /agent runs/);
});
