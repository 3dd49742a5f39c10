/** A tool's parameters schema is refused up front when it is not JSON Schema (ajv, against the
 * meta-schema of its draft), nested too deep or too big (issue 55 item 3): one line naming
 * `tools.<name>.parameters` and why, exit 2 (a UserError). The bounds are the sidecar's
 * (agents/spec.py) and the proto's, pinned here; the sidecar checks the same (tests/test_agent_tool_schemas.py)
 * and checks each call's arguments against the schema before the tool runs. */
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { SCHEMA_MAX_CHARS, SCHEMA_MAX_DEPTH, checkAgentTask, defineAgentTask } from "../src/agent/agent-task/define.js";
import { UserError } from "../src/agent/workspace.js";
import { REPO } from "./helpers/sidecar.js";

function taskWith(parameters: unknown) {
  return defineAgentTask({
    name: "t",
    tasks: [{ id: "a", prompt: "p" }],
    tools: { lookup: { description: "", parameters: parameters as Record<string, unknown>, run: () => "ok" } },
    scorers: { s: { score: () => 1 } },
  });
}

function refusal(parameters: unknown): string {
  try {
    checkAgentTask(taskWith(parameters), "f.ts");
  } catch (err) {
    assert.ok(err instanceof UserError, String(err));
    assert.equal(err.message.split("\n").length, 1, err.message);
    return err.message;
  }
  assert.fail("accepted");
}

function deep(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++) schema = { type: "object", properties: { a: schema } };
  return schema;
}

test("a schema that is not JSON Schema is refused naming tools.<name>.parameters and why", () => {
  const line = refusal({ type: "objekt", properties: 5, required: "product" });
  assert.match(line, /^f\.ts: tools\.lookup\.parameters: is not a JSON Schema \(\/\w+: .+\)$/);
  assert.match(refusal({ type: "object", properties: { a: { type: "strnig" } } }), /is not a JSON Schema \(\/properties\/a\/type: /);
  assert.match(refusal({ $schema: "http://example.com/mine" }), /\$schema "http:\/\/example\.com\/mine" is not one of/);
});

test("a schema nested 100k deep, a cyclic one and a big one are refused", () => {
  assert.equal(refusal(deep(100_000)), `f.ts: tools.lookup.parameters: is nested over ${SCHEMA_MAX_DEPTH} levels deep`);
  const cyclic: Record<string, unknown> = { type: "object" };
  cyclic.properties = { self: cyclic };
  assert.match(refusal(cyclic), /is nested over 32 levels deep/);
  assert.match(refusal({ type: "object", description: "x".repeat(SCHEMA_MAX_CHARS) }), /is 10034 characters of JSON, over 10000/);
});

test("draft 2020-12 and draft-07 schemas at the bounds are accepted", () => {
  checkAgentTask(taskWith({}), "f.ts");
  checkAgentTask(taskWith(deep(SCHEMA_MAX_DEPTH / 2 - 1)), "f.ts");
  checkAgentTask(taskWith({ type: "object", description: "x".repeat(SCHEMA_MAX_CHARS - 40) }), "f.ts");
  checkAgentTask(
    taskWith({
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      definitions: { n: { type: "integer" } },
      properties: { a: { $ref: "#/definitions/n" } },
    }),
    "f.ts",
  );
  checkAgentTask(
    taskWith({
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: { n: { type: "integer" } },
      properties: { a: { $ref: "#/$defs/n" } },
      required: ["a"],
    }),
    "f.ts",
  );
});

test("the schema bounds are the sidecar's (agents/spec.py) and the proto's", () => {
  const spec = readFileSync(join(REPO, "py_trainer", "py_trainer", "agents", "spec.py"), "utf8");
  const python = (name: string) => Number(new RegExp(`^${name} = ([0-9_]+)$`, "m").exec(spec)?.[1].replaceAll("_", ""));
  assert.deepEqual([SCHEMA_MAX_CHARS, SCHEMA_MAX_DEPTH], [python("SCHEMA_MAX_CHARS"), python("SCHEMA_MAX_DEPTH")]);
  const proto = readFileSync(join(REPO, "proto", "grpo", "trainer", "v1", "trainer_service.proto"), "utf8");
  const toolSpec = proto.slice(proto.indexOf("message ToolSpec {"), proto.indexOf("message ScorerSpec {")).replaceAll("\n  //", "");
  assert.ok(toolSpec.includes(`at most ${SCHEMA_MAX_CHARS} characters and ${SCHEMA_MAX_DEPTH} levels of nesting`), toolSpec);
  const docs = readFileSync(join(REPO, "docs", "agents.md"), "utf8");
  assert.ok(docs.includes(`at most ${SCHEMA_MAX_CHARS} characters of JSON and ${SCHEMA_MAX_DEPTH} levels of nesting`), "docs/agents.md");
});
