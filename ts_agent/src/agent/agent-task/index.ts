/**
 * The package's entry point (package.json `exports["."]`): what a user's agent-task file imports
 * by name, `import { defineAgentTask, type AgentTask } from "@grpo-sidecar/agent"` (docs/agents.md),
 * or an agent program's, `defineAgentProgram` (docs/agent-programs.md). Only the two and the types: the loader, the tool host and the sidecar client stay
 * inside the CLI, so importing the entry loads none of the package's runtime dependencies.
 */
export { defineAgentProgram, defineAgentTask } from "./define.js";
export type {
  AgentLimits,
  AgentProgram,
  AgentProgramLimits,
  AgentScorer,
  AgentTask,
  AgentTaskRow,
  AgentTool,
  Episode,
  EpisodeMessage,
  ProgramContext,
  ToolContext,
} from "./define.js";
