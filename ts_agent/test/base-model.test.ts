/** base_model parsed once on the TS side (agent/core/base-model.ts): its kinds, the prefix equal to
 * the sidecar's (py_trainer core/model_files.py EMBEDDED_PREFIX, whose parse_base_model owns the
 * rule), and no other source file writing the prefix itself. */
import { strict as assert } from "node:assert";
import { readFileSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { test } from "node:test";

import { EMBEDDED_PREFIX, embeddedBaseModel, parseBaseModel } from "../src/agent/core/base-model.js";
import { baselineSetCommand } from "../src/agent/verdict/milestone.js";
import { REPO } from "./helpers/sidecar.js";

test("each kind, and embeddedBaseModel is parseBaseModel's inverse", () => {
  assert.deepEqual(parseBaseModel(""), { kind: "default", text: "" });
  assert.deepEqual(parseBaseModel("embedded:tasks/t.jsonl"), { kind: "embedded", text: "embedded:tasks/t.jsonl", path: "tasks/t.jsonl" });
  assert.deepEqual(parseBaseModel("Qwen/Qwen2.5-0.5B"), { kind: "other", text: "Qwen/Qwen2.5-0.5B" });
  assert.deepEqual(parseBaseModel(embeddedBaseModel("a/b.jsonl")), { kind: "embedded", text: "embedded:a/b.jsonl", path: "a/b.jsonl" });
});

test("the prefix is the sidecar's", () => {
  const py = readFileSync(join(REPO, "py_trainer", "py_trainer", "core", "model_files.py"), "utf8");
  assert.equal(/^EMBEDDED_PREFIX = "([^"]*)"$/m.exec(py)?.[1], EMBEDDED_PREFIX);
});

test("baselineSetCommand reads the base through the parse", () => {
  assert.equal(baselineSetCommand("mytasks/animals.jsonl", embeddedBaseModel("mytasks/animals.jsonl")), "agent baseline set --tasks mytasks/animals.jsonl");
  assert.equal(
    baselineSetCommand("mytasks/animals.jsonl", "Qwen/Qwen2.5-0.5B"),
    "agent baseline set --tasks mytasks/animals.jsonl --base-model Qwen/Qwen2.5-0.5B",
  );
  assert.equal(baselineSetCommand("agent-evals/tasks/aml_typology.jsonl", ""), "agent baseline set");
});

/** Files that still write the prefix until their owner applies the one-line change (see the report
 *  of issue 52 item 5); empty this list when they do. */
const PENDING = new Set<string>();

test("no other source file writes the embedded: prefix", () => {
  const src = join(REPO, "ts_agent", "src");
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== "gen") walk(p);
      } else if (e.name.endsWith(".ts")) {
        const rel = relative(join(REPO, "ts_agent"), p);
        if (rel === "src/agent/core/base-model.ts" || PENDING.has(rel)) continue;
        readFileSync(p, "utf8")
          .split("\n")
          .forEach((line, i) => {
            const code = line.trim();
            if (/^(\*|\/\/|\/\*)/.test(code)) return; // a comment may name the form
            if (code.split("//")[0].includes("embedded:")) offenders.push(`${rel}:${i + 1}`);
          });
      }
    }
  };
  walk(src);
  assert.deepEqual(offenders, []);
});
