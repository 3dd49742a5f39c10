/** The TS tool host's default limits are the contract's: each AgentSpec limit's "Default:" comment in
 * the proto (which tests/test_config.py holds equal to the sidecar's knob table). */
import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { DEFAULT_LIMITS } from "../src/agent/agent-task/tool-host.js";
import { REPO } from "./helpers/sidecar.js";

test("DEFAULT_LIMITS equal the proto's AgentSpec defaults", () => {
  const proto = readFileSync(join(REPO, "proto", "grpo", "trainer", "v1", "trainer_service.proto"), "utf8");
  const spec = proto.slice(proto.indexOf("message AgentSpec {"), proto.indexOf("message ToolSpec {"));
  const defaults: Record<string, number> = {};
  for (const m of spec.matchAll(/Default: (\d+)\.\n\s*optional uint32 (\w+) =/g)) defaults[m[2]] = Number(m[1]);
  assert.deepEqual(defaults, { max_turns: DEFAULT_LIMITS.maxTurns, max_tool_calls: DEFAULT_LIMITS.maxToolCalls,
    tool_timeout_ms: DEFAULT_LIMITS.toolTimeoutMs, max_tool_output_chars: DEFAULT_LIMITS.maxToolOutputChars });
});
