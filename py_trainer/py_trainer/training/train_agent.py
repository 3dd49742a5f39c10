"""GRPO on agent episodes: TRL's GRPOTrainer + PEFT LoRA, the rollouts from the episode runner.

A request with `agent` set trains on multi-turn episodes instead of single completions. TRL does
the update; what this mode changes (docs/agents.md, docs/architecture.md "Agents"):
- TRL's experimental `rollout_func` hands each batch's prompts (G copies of each task, TRL's
  grouping) to `agents.episodes.run_episodes`, which runs every episode with the policy being
  trained, the TS agent's tools and its scorers, and returns the token ids with ``env_mask`` (TRL
  masks the tool turns out of the loss with it);
- one TRL reward function per scorer, reading the score the episode already has (TRL logs
  ``rewards/<scorer>/mean`` and weights them with `reward_weights`): the reward is the scorers'
  weighted sum, and TRL's group-relative advantage is taken over the G episodes of one task;
- the held-out measurement at step 0 and at the end runs the same episodes on held-out tasks;
- every step logs the episodes' turns, tool-call rate and tool errors, and the run folder keeps
  sample transcripts (`episodes/step-<n>.jsonl`) at the first step and every `SAMPLE_EVERY`
  steps, and the held-out episodes at step 0 and at the end.
Why `rollout_func` and not TRL's `tools=`/`environment_factory=`: the same runner must serve
Evaluate (outside any trainer), and TRL's tool loop needs a tokenizer-side response parser the
embedded models do not have.
"""

from __future__ import annotations

import logging

from py_trainer.agents.episodes import Episode, run_episodes, start_episodes
from py_trainer.agents.spec import AgentSetup
from py_trainer.agents.tool_host import ToolHost
from py_trainer.core import stats
from py_trainer.core.atomic import write_jsonl_atomic
from py_trainer.endpoint.program_episodes import ProgramEndpoint, ProgramEpisode, run_program_episodes
from py_trainer.data.request_data import split_rows
from py_trainer.training.skeleton import EVAL_SEED_OFFSET, RunContext, peft_config_for
from py_trainer.training.train_grpo import CurveWatch, GroupZeroStd, GrpoMode, grpo_config

log = logging.getLogger(__name__)

SAMPLE_EVERY = 10
"""Sample transcripts are kept at step 1 and every this many steps."""
SAMPLES_KEPT = 8
"""Episodes kept per sample file."""
ROLLOUT_SEED_STRIDE = 1_000_003


class EpisodeCounts:
    """The episodes' counts since the last logged step, as per-step metrics."""

    def __init__(self):
        self.episodes: list[Episode] = []

    def add(self, episodes: list[Episode]) -> None:
        self.episodes += episodes

    def pop(self) -> dict[str, float]:
        eps, self.episodes = self.episodes, []
        if not eps:
            return {}
        n = len(eps)
        calls = sum(e.stats.tool_calls for e in eps)
        return {
            "episodes/turns": sum(e.stats.turns for e in eps) / n,
            "tools/call_frequency": calls / n,
            "tools/failure_frequency": sum(e.stats.tool_errors for e in eps) / calls if calls else 0.0,
            "episodes/unknown_tool_calls": sum(e.stats.unknown_tool_calls for e in eps) / n,
            "episodes/malformed_calls": sum(e.stats.malformed_calls for e in eps) / n,
            "episodes/limit_hit": sum(e.stats.ended_by not in ("answer", "error") for e in eps) / n,
            **program_counts(eps),
        }


def program_counts(eps: list[Episode]) -> dict[str, float]:
    """An agent program's per-step counts (docs/agent-programs.md): the share of rollouts that
    failed, and the rows per rollout its calls split into beyond the one trained."""
    programs = [e for e in eps if isinstance(e, ProgramEpisode)]
    if not programs:
        return {}
    n = len(programs)
    return {"episodes/failed": sum(bool(e.error) for e in programs) / n,
            "episodes/rows_dropped": sum(max(e.rows - 1, 0) for e in programs) / n}


def scorer_reward_funcs(setup: AgentSetup, tracker: GroupZeroStd) -> list:
    """One TRL reward function per scorer: the score each episode got from the TS agent."""
    funcs = []
    for index, name in enumerate(setup.scorer_names):
        def reward(prompts, completions, agent_scores, _name=name, _index=index, **_):
            out = [s[_name] for s in agent_scores]
            tracker.record(_index, prompts, out)
            return out

        reward.__name__ = name
        funcs.append(reward)
    return funcs


class AgentMode(GrpoMode):
    """TRAIN_MODE_GRPO with `agent` set, plugged into `training.run_training`."""

    def prepare(self, run: RunContext) -> None:
        self.train_rows, self.held_rows = split_rows(run.req, run.data_root, need_answers=False)
        if run.is_main:
            write_jsonl_atomic(run.run_dir / "grpo_train.jsonl",
                               [{"id": r.id, "prompt": r.prompt, "answers": list(r.answers)} for r in self.train_rows],
                               ensure_ascii=True)
        self.setup = AgentSetup.from_spec(run.req.agent)
        self.host = ToolHost(self.setup.tool_host, self.setup.tool_timeout_ms)
        self.specs = [{"name": n, "weight": w} for n, w in zip(self.setup.scorer_names, self.setup.scorer_weights)]
        self.eval_seed = run.req.grpo.seed + EVAL_SEED_OFFSET
        self.watch = CurveWatch(run.emit)
        self.zero_std = GroupZeroStd(self.setup.scorer_weights, group_size=run.req.grpo.num_generations)
        self.counts = EpisodeCounts()
        self.task_of = {}
        for r in self.train_rows:
            self.task_of.setdefault(r.prompt, r.id)
        self.rollouts = 0
        self.run = run
        self.endpoint: ProgramEndpoint | None = None

    def _episodes(self, model, run: RunContext, tasks: list[tuple[str, str]], prefix: str, seed: int) -> list[Episode]:
        g = run.req.grpo
        ids = [f"{prefix}-{i}" for i in range(len(tasks))]
        settings = dict(temperature=g.temperature, top_p=g.top_p, max_new_tokens=g.max_completion_length,
                        max_total_tokens=g.max_completion_length, seed=seed)
        if self.setup.program_timeout_ms is not None:  # the user's agent program (docs/agent-programs.md)
            if self.endpoint is None:
                self.endpoint = ProgramEndpoint(run.tokenizer)
            return run_program_episodes(self.endpoint, model, run.tokenizer, self.setup, self.host, tasks, ids,
                                        **settings)
        eps = start_episodes(run.tokenizer, self.setup, tasks, ids)
        return run_episodes(model, run.tokenizer, self.setup, self.host, eps, **settings)

    def _keep(self, run: RunContext, name: str, episodes: list[Episode], limit: int | None = SAMPLES_KEPT) -> None:
        if run.is_main:
            (run.run_dir / "episodes").mkdir(exist_ok=True)
            write_jsonl_atomic(run.run_dir / "episodes" / name, [e.record() for e in episodes[:limit]],
                               ensure_ascii=True)

    def _measure(self, run: RunContext, model, step: int) -> tuple[int, list[float]]:
        k = run.req.held_out.samples_per_prompt
        tasks = [(r.id, r.prompt) for r in self.held_rows for _ in range(k)]
        eps = self._episodes(model, run, tasks, f"held-out-{step}", self.eval_seed)
        self._keep(run, f"held-out-step-{step:06d}.jsonl", eps, limit=None)
        rewards = [self.setup.reward(e.scores) for e in eps]
        return step, [stats.nan_mean(rewards[i * k:(i + 1) * k]) for i in range(len(self.held_rows))]

    def rollout(self, prompts: list[str], trainer) -> dict:
        """TRL's rollout_func: one episode per prompt (TRL already repeats each task G times)."""
        step = trainer.state.global_step + 1
        tasks = [(self.task_of[p], p) for p in prompts]
        eps = self._episodes(trainer.model, self.run, tasks, f"step-{step}-{self.rollouts}",
                             self.run.req.grpo.seed * ROLLOUT_SEED_STRIDE + self.rollouts)
        self.rollouts += 1
        self.counts.add(eps)
        if step == 1 or step % SAMPLE_EVERY == 0:
            self._keep(self.run, f"step-{step:06d}.jsonl", eps)
        return {"prompt_ids": [e.prompt_ids for e in eps], "completion_ids": [e.completion_ids for e in eps],
                "logprobs": None, "env_mask": [e.env_mask for e in eps], "agent_scores": [e.scores for e in eps]}

    def on_log(self, run: RunContext, state, logs: dict) -> None:
        if "train_runtime" not in logs:
            logs = {**logs, **self.counts.pop()}
        super().on_log(run, state, logs)

    def build_trainer(self, run: RunContext, args: dict, callback):
        from datasets import Dataset
        from transformers import PrinterCallback
        from trl import GRPOTrainer

        trainer = GRPOTrainer(
            model=run.model,
            reward_funcs=scorer_reward_funcs(self.setup, self.zero_std),
            args=grpo_config(run.req, args, self.setup.scorer_weights),
            train_dataset=Dataset.from_list([{"prompt": r.prompt} for r in self.train_rows]),
            processing_class=run.tokenizer,
            peft_config=peft_config_for(run),
            callbacks=[callback],
            rollout_func=self.rollout,
        )
        trainer.remove_callback(PrinterCallback)
        return trainer

    def finish(self, run: RunContext, result, start, end) -> dict:
        self.host.close()
        if self.endpoint is not None:
            self.endpoint.close()
        return super().finish(run, result, start, end)
