"""The warm start: LoRA SFT on demonstration episodes with TRL's SFTTrainer (TRAIN_MODE_SFT).

Why: GRPO learns nothing when every episode of a group gets the same reward (a base that never
calls a tool); the anchors start RL from an SFT checkpoint (SkyRL, OpenPipe ART, ToolRL). This
mode is that checkpoint, on the run skeleton every mode shares (`skeleton.run_training`); a GRPO
run then starts from its adapter (`TrainRequest.init_adapter`, `skeleton.peft_config_for`).

What it trains on: the demonstration episodes of `dataset.jsonl_path` (`agents.demonstrations`),
rendered under the request's AgentSpec and tokenized by the episode runner's own pieces
(`agent_format.transcript_ids`), handed to SFTTrainer pre-tokenized as ``input_ids`` and
``assistant_masks``: TRL's labels are the assistant's tokens only (its text, tool-call blocks and
stop token); the system, user and tool turns are context. No hand-written loop.

What it measures: the agent mode's held-out episodes (`AgentMode._measure`) on
`held_out.dataset`'s tasks, at step 0 (the base) and at the end (the warm start), with the TS
agent's tool host and scorers and the sampling of `grpo.temperature / top_p /
max_completion_length`, so a GRPO run from this adapter with the same seed and held-out tasks
starts where this one ended. Every step logs TRL's SFT metrics (``loss`` on the assistant tokens,
``mean_token_accuracy``, ``num_tokens``).
"""

from __future__ import annotations

import logging

from py_trainer.agents.demonstrations import load_demonstrations, sft_rows
from py_trainer.agents.spec import AgentSetup
from py_trainer.agents.tool_host import ToolHost
from py_trainer.core.atomic import write_jsonl_atomic
from py_trainer.core.config import SFT, trl_kwargs
from py_trainer.data.request_data import task_rows
from py_trainer.plots.curves import write_steps_csv
from py_trainer.training.skeleton import EVAL_SEED_OFFSET, RunContext, lora_config, numeric_metrics, run_seed
from py_trainer.training.train_agent import AgentMode

log = logging.getLogger(__name__)

SFT_CSV_COLUMNS = ("step", "loss", "mean_token_accuracy", "num_tokens", "learning_rate", "grad_norm")


class SftMode(AgentMode):
    """TRAIN_MODE_SFT plugged into `training.run_training` (held-out measurement: `AgentMode`'s)."""

    artifacts = ["adapter", "sft_train.jsonl", "loss-vs-step.csv", "episodes"]
    trl_skip = ("max_completion_length",)  # grpo.max_completion_length bounds the held-out episodes only

    def prepare(self, run: RunContext) -> None:
        self.setup = AgentSetup.from_spec(run.req.agent)
        self.episodes = load_demonstrations(run.req.dataset, run.data_root, self.setup)
        self.rows = sft_rows(run.tokenizer, self.episodes)
        if run.is_main:
            write_jsonl_atomic(run.run_dir / "sft_train.jsonl", self.episodes, ensure_ascii=True)
        self.held_rows = task_rows(run.req.held_out.dataset, run.data_root, "held_out.dataset",
                                   need_answers=False)[:run.req.held_out.num_prompts]
        self.host = ToolHost(self.setup.tool_host, self.setup.tool_timeout_ms)
        self.eval_seed = run_seed(run.req) + EVAL_SEED_OFFSET
        self.run = run

    def on_log(self, run: RunContext, state, logs: dict) -> None:
        if "train_runtime" in logs:
            return
        run.emit_step(state.global_step, state.max_steps, numeric_metrics(logs))

    def build_trainer(self, run: RunContext, args: dict, callback):
        from datasets import Dataset
        from transformers import PrinterCallback
        from trl import SFTConfig, SFTTrainer

        s = run.req.sft
        config = SFTConfig(**args, **trl_kwargs(s, SFT), logging_steps=1, save_steps=s.max_steps,
                           packing=False, padding_free=False, remove_unused_columns=True)
        trainer = SFTTrainer(model=run.model, args=config, train_dataset=Dataset.from_list(self.rows),
                             processing_class=run.tokenizer, peft_config=lora_config(run.req.lora),
                             callbacks=[callback])
        trainer.remove_callback(PrinterCallback)
        return trainer

    def finish(self, run: RunContext, result, start, end) -> dict:
        self.host.close()
        write_steps_csv(run.run_dir / "loss-vs-step.csv", run.steps, SFT_CSV_COLUMNS)
        losses = [s["loss"] for s in run.steps if "loss" in s]
        return dict(demonstrations=len(self.rows), held_out_rows=len(self.held_rows),
                    assistant_tokens=sum(sum(r["assistant_masks"]) for r in self.rows),
                    first_loss=losses[0] if losses else None, last_loss=losses[-1] if losses else None)
