"""Models and what generates with them: the one loader (`loading`), GGUF and hub bases
(`base_models`), the embedded builders (`tiny_model`, `tiny_agent_model`), generation for
Evaluate and SampleGroups (`inference`), the agent chat template (`agent_format`), and TRL's fused
LM head on CPU (`fused_head`).
"""
