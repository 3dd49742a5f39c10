"""The OpenAI-compatible endpoint: agent programs' rollouts recorded token for token, and policies served
for any OpenAI client (docs/agent-programs.md)."""
