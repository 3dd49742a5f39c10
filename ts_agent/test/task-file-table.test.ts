/**
 * Issue 32, item 7: the agent and the sidecar accept exactly the same task files. The table of
 * bad (and good) files in tests/data/bad_task_files.json is read here against the agent's loader
 * and by tests/test_task_file.py against the sidecar's: each bad file is refused by both with the
 * table's message at the table's line, each good one loads with the table's task count.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { loadTaskFile } from "../src/agent/eval/tasks.js";
import { UserError } from "../src/agent/workspace.js";
import { REPO } from "./helpers/sidecar.js";

interface Case {
  name: string;
  lines?: string[];
  file_base64?: string;
  meta?: unknown;
  line?: number | null;
  message?: string;
  meta_file?: boolean;
  tasks?: number;
}
const TABLE = JSON.parse(readFileSync(join(REPO, "tests", "data", "bad_task_files.json"), "utf8")) as { bad: Case[]; good: Case[] };

function write(root: string, c: Case): string {
  const dir = join(root, c.name.replace(/\W+/g, "-"));
  mkdirSync(dir);
  const path = join(dir, "tickets.jsonl");
  writeFileSync(path, c.file_base64 !== undefined ? Buffer.from(c.file_base64, "base64") : c.lines!.join("\n") + "\n");
  if (c.meta !== undefined) writeFileSync(join(dir, "tickets.meta.json"), typeof c.meta === "string" ? c.meta : JSON.stringify(c.meta));
  return path;
}

describe("the shared table of task files: the agent's loader", () => {
  const root = mkdtempSync(join(tmpdir(), "task-table-"));
  for (const c of TABLE.bad) {
    test(`refuses: ${c.name}`, () => {
      const path = write(root, c);
      const where = c.meta_file ? path.replace(/\.jsonl$/, ".meta.json") : path;
      const prefix = c.line === null || c.line === undefined ? `${where}: ` : `${where}:${c.line}: `;
      assert.throws(
        () => loadTaskFile(path),
        (err: Error) => {
          assert.ok(err instanceof UserError, String(err));
          assert.ok(err.message.startsWith(prefix), `${err.message} (wanted ${prefix})`);
          assert.ok(err.message.includes(c.message!), err.message);
          assert.doesNotMatch(err.message, / at\)$/);
          return true;
        },
      );
    });
  }
  for (const c of TABLE.good) {
    test(`accepts: ${c.name}`, () => {
      assert.equal(loadTaskFile(write(root, c)).rows.length, c.tasks);
    });
  }
});
