"""py_trainer: the Python gRPC sidecar that trains LoRA adapters with GRPO (TRL + PEFT)."""

__version__ = "0.1.0"
