"""The training modes over TRL + PEFT: the run skeleton they share (`skeleton`: seed, step-0 and
end measurement, callbacks to events, adapter save, summary), GRPO (`train_grpo`), preference
(`train_preference`) and agent episodes (`train_agent`).
"""
