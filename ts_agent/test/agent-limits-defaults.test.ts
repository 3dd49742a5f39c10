/** The agent task's rules the TS agent checks a file with are the contract's, written once and pinned
 * here: each AgentSpec limit's default and range in the proto comments (which tests/test_agent_rules.py
 * and tests/test_config.py hold equal to the sidecar's AGENT knob table), an agent program's rollout
 * timeout (AgentProgram.timeout_ms), the docs' limits row, and the tool-name pattern (the proto's
 * ToolSpec.name; its owner is the sidecar's agents/spec.py). */
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { LIMIT_RANGES, TOOL_NAME } from "../src/agent/agent-task/define.js";
import { DEFAULT_LIMITS, DEFAULT_ROLLOUT_TIMEOUT_MS } from "../src/agent/agent-task/tool-host.js";
import { REPO } from "./helpers/sidecar.js";

const PROTO = readFileSync(join(REPO, "proto", "grpo", "trainer", "v1", "trainer_service.proto"), "utf8");
const AGENT_SPEC = PROTO.slice(PROTO.indexOf("message AgentSpec {"), PROTO.indexOf("message AgentProgram {"));
const AGENT_PROGRAM = PROTO.slice(PROTO.indexOf("message AgentProgram {"), PROTO.indexOf("message RunRolloutRequest {"));
const FIELD: Record<keyof typeof DEFAULT_LIMITS, string> = {
  maxTurns: "max_turns",
  maxToolCalls: "max_tool_calls",
  toolTimeoutMs: "tool_timeout_ms",
  maxToolOutputChars: "max_tool_output_chars",
};

/** field -> [comment "in [lo, hi]", "Default: N"] of each optional uint32 AgentSpec field. */
function protoLimits(spec: string): Record<string, { range: [number, number]; default: number }> {
  const out: Record<string, { range: [number, number]; default: number }> = {};
  for (const m of spec.matchAll(/in \[(\d+), (\d+)\]\.\n\s*\/\/ Default: (\d+)\.\n\s*optional uint32 (\w+) =/g)) {
    out[m[4]] = { range: [Number(m[1]), Number(m[2])], default: Number(m[3]) };
  }
  return out;
}

function tsLimits(): Record<string, { range: [number, number]; default: number }> {
  const out: Record<string, { range: [number, number]; default: number }> = {};
  for (const [key, field] of Object.entries(FIELD)) {
    const k = key as keyof typeof FIELD;
    out[field] = { range: LIMIT_RANGES[k], default: DEFAULT_LIMITS[k] };
  }
  return out;
}

test("DEFAULT_LIMITS and LIMIT_RANGES equal the proto's AgentSpec defaults and ranges", () => {
  assert.deepEqual(protoLimits(AGENT_SPEC), tsLimits());
});

test("an agent program's rollout timeout: LIMIT_RANGES and DEFAULT_ROLLOUT_TIMEOUT_MS equal the proto's AgentProgram.timeout_ms", () => {
  assert.deepEqual(protoLimits(AGENT_PROGRAM), { timeout_ms: { range: LIMIT_RANGES.rolloutTimeoutMs, default: DEFAULT_ROLLOUT_TIMEOUT_MS } });
});

test("the pin can fail: a range edited in the proto alone is seen", () => {
  const drifted = protoLimits(AGENT_SPEC.replace("in [1, 32]", "in [1, 33]"));
  assert.notDeepEqual(drifted, tsLimits());
});

test("docs/agents.md's limits row states each default and range", () => {
  const docs = readFileSync(join(REPO, "docs", "agents.md"), "utf8");
  const row = docs.split("\n").find((l) => l.startsWith("| `limits` |")) ?? "";
  for (const [key, field] of Object.entries(FIELD)) {
    const { range, default: d } = tsLimits()[field];
    assert.ok(row.includes(`\`${key}\` (${d}, ${range[0]}-${range[1]})`), `${key} in ${row}`);
  }
});

test("the tool-name pattern is the sidecar's (agents/spec.py) and the proto's", () => {
  const spec = readFileSync(join(REPO, "py_trainer", "py_trainer", "agents", "spec.py"), "utf8");
  const python = /^TOOL_NAME = re\.compile\(r"([^"]+)"\)$/m.exec(spec)?.[1];
  assert.equal(TOOL_NAME.source, `^${python}$`, "define.ts TOOL_NAME against agents/spec.py TOOL_NAME");
  const toolSpec = PROTO.slice(PROTO.indexOf("message ToolSpec {"), PROTO.indexOf("message ScorerSpec {"));
  assert.ok(toolSpec.includes(`// ${python}, unique within the spec.`), "the proto's ToolSpec.name comment");
});
