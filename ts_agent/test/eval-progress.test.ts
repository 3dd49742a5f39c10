/**
 * Issue 45 item 4: eval progress printed only on a terminal; off one (a log file, CI, a pipe) a
 * long eval was silent until each variant ended. Off a TTY: plain lines, the first progress, then
 * at most one every 10 s, and each variant's end.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { progressPrinter } from "../src/agent/eval/evaluate.js";

test("off a TTY: the first line, then one every 10 s at most, and each variant's end", () => {
  const out: string[] = [];
  let now = 0;
  const p = progressPrinter("eval", { tty: false, now: () => now, write: (l) => out.push(l) });
  const at = (s: number, variant: string, done: number) => {
    now = s * 1000;
    p({ variant, tasksDone: done, tasksTotal: 100 } as Parameters<typeof p>[0]);
  };
  at(0, "base", 1);
  at(1, "base", 2);
  at(5, "base", 20);
  at(11, "base", 50);
  at(12, "base", 60);
  at(15, "base", 100);
  at(16, "adapter", 1);
  at(17, "adapter", 100);
  assert.deepEqual(out, [
    "eval: base 1/100 tasks",
    "eval: base 50/100 tasks",
    "eval: base 100/100 tasks",
    "eval: adapter 1/100 tasks",
    "eval: adapter 100/100 tasks",
  ]);
});
