/**
 * The package's entry point (package.json `exports["."]`): what a user's agent-task file imports
 * by name, `import { defineAgentTask, type AgentTask } from "@grpo-sidecar/agent"` (docs/agents.md).
 * Only `defineAgentTask` and the types: the loader, the tool host and the sidecar client stay
 * inside the CLI, so importing the entry loads none of the package's runtime dependencies.
 */
export { defineAgentTask } from "./define.js";
export type { AgentLimits, AgentScorer, AgentTask, AgentTaskRow, AgentTool, Episode, EpisodeMessage, ToolContext } from "./define.js";
