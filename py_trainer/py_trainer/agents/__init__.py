"""Agent tasks: multi-turn episodes with the TS agent's tools, scored by its TS scorers (docs/agents.md)."""
