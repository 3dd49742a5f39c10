"""GRPO on verifiable rewards: TRL's GRPOTrainer + PEFT LoRA, rewards from `task_rewards.py`.

TRL does the optimisation on the effective request (`validate.validate_grpo_request` filled every
default); what this mode adds around it:
- one TRL reward function per RewardSpec, named after it (TRL logs ``rewards/<name>/mean``) and
  weighted by TRL's `reward_weights` (its nansum equals `grpo.compose_rewards`); a raising reward
  fails the run naming the reward and the sample, it is never turned into 0;
- step-0 and end reward measured on the same fixed held-out prompts, K samples each, with the same
  sampling seed (not read off two noisy training batches);
- warnings for curves to look at (`CurveWatch`; thresholds in `curve_thresholds.json`, shared
  with the report's attribution in TS).
"""

from __future__ import annotations

import logging
import math
from typing import Callable

from py_trainer.core import stats
from py_trainer.core.atomic import write_jsonl_atomic
from py_trainer.core.config import GRPO, RUNTIME, trl_kwargs
from py_trainer.core.curve_thresholds import (CLIPPED_RATIO_WARN, KL_SPIKE_EVERY, KL_SPIKE_FACTOR, KL_SPIKE_MADS, KL_SPIKE_MIN,
                                              KL_SPIKE_WINDOW, ZERO_STD_REL_TOL, ZERO_STD_WARN, ZERO_STD_WARN_STEPS)
from py_trainer.core.rewards import RewardFunctionError, build_scorer, composed_guarded_scorer, guarded_scorer, reward_spec_dict
from py_trainer.data.request_data import split_rows
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.loading import chat_messages, format_prompts, generate_completions
from py_trainer.plots.curves import GRPO_CSV_COLUMNS, write_plot, write_steps_csv
from py_trainer.training.skeleton import EVAL_SEED_OFFSET, Emit, RunContext, held_out_reward_proto, numeric_metrics, peft_config_for

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Rewards as TRL reward functions


def trl_reward_funcs(specs: list[dict], tracker: GroupZeroStd | None = None) -> list[Callable]:
    """One TRL reward function per spec, named after it (TRL logs ``rewards/<name>/mean``).

    TRL calls ``f(prompts=..., completions=..., completion_ids=..., answers=..., ...)`` with the
    dataset's columns; each completion is scored by the `task_rewards.py` port. With a `tracker`,
    every function hands it its scores, so the sidecar judges zero std per group itself.
    """
    funcs = []
    for index, spec in enumerate(specs):
        scorer = guarded_scorer(spec["name"], build_scorer(spec))

        def reward(prompts, completions, answers, _scorer=scorer, _index=index, **_):
            out = []
            for i, (c, a) in enumerate(zip(completions, answers)):
                if isinstance(c, list):  # conversational rows: TRL hands the assistant message(s)
                    c = c[-1]["content"] if c else ""
                try:
                    out.append(_scorer(c, list(a)))
                except RewardFunctionError as err:
                    raise RewardFunctionError(f"{err} (training batch sample {i})") from err
            if tracker is not None:
                tracker.record(_index, prompts, out)
            return out

        reward.__name__ = spec["name"]
        funcs.append(reward)
    return funcs


GROUP_ZERO_STD_ULPS = 64
"""A group has no within-group variance when its reward sd <= this many float32 epsilons (2^-23:
TRL computes advantages in float32) x the batch's largest |reward| (docs/attribution.md)."""
FLOAT32_EPS = 2.0 ** -23


def group_zero_std_share(rewards: list[float], prompts: list, group_size: int) -> tuple[int, int]:
    """(groups with no within-group variance, groups) in one batch: a group is a run of consecutive
    samples of one prompt, at most `group_size` long (TRL's grouping); its sd is the sample sd of
    its rewards, zero when <= GROUP_ZERO_STD_ULPS x FLOAT32_EPS x the batch's largest |reward|.
    Groups of one sample have no sd and are not counted."""
    scale = max((abs(r) for r in rewards), default=0.0)
    tol = GROUP_ZERO_STD_ULPS * FLOAT32_EPS * scale
    zero = groups = 0
    start = 0
    for i in range(1, len(rewards) + 1):
        if i == len(rewards) or i - start >= group_size or repr(prompts[i]) != repr(prompts[start]):
            if i - start >= 2:
                groups += 1
                zero += stats.sample_sd(rewards[start:i]) <= tol
            start = i
    return zero, groups


class GroupZeroStd:
    """Collects each reward function's scores for a batch, composes them as TRL does (the weighted
    nansum) once every function has reported, and counts groups without within-group variance
    until `pop` (one logged step)."""

    def __init__(self, weights: list[float], *, group_size: int):
        self.weights, self.group_size = weights, group_size
        self.batch: dict[int, list] = {}
        self.zero = self.groups = 0

    def record(self, index: int, prompts: list, scores: list) -> None:
        self.batch[index] = scores
        if len(self.batch) < len(self.weights):
            return
        composed = []
        for j in range(len(prompts)):
            parts = [w * s[j] for w, s in ((self.weights[k], self.batch[k]) for k in range(len(self.weights)))
                     if s[j] is not None and not math.isnan(s[j])]
            composed.append(sum(parts) if parts else 0.0)
        self.batch = {}
        zero, groups = group_zero_std_share(composed, list(prompts), self.group_size)
        self.zero, self.groups = self.zero + zero, self.groups + groups

    def pop(self) -> float | None:
        """The share of groups with no within-group variance since the last pop; None without groups."""
        share = self.zero / self.groups if self.groups else None
        self.zero = self.groups = 0
        return share


def held_out_scores(model, tokenizer, rows: list[pb.TaskRow], scorer, *, k: int, g: pb.GrpoConfig,
                    step: int, seed: int, prompt_format: str = "raw") -> list[float]:
    """Mean composed reward per held-out prompt, K samples each, sampling and prompt format as in
    training."""
    prompts = format_prompts(tokenizer, [r.prompt for r in rows], prompt_format)
    comps = generate_completions(model, tokenizer, prompts, k=k, temperature=g.temperature,
                                 top_p=g.top_p, max_new_tokens=g.max_completion_length, seed=seed,
                                 max_prompt_length=g.max_prompt_length)
    per_prompt = []
    for row, cs in zip(rows, comps):
        scores = []
        for j, c in enumerate(cs):
            try:
                scores.append(scorer(c, list(row.answers)))
            except RewardFunctionError as err:
                raise RewardFunctionError(f"{err} (held-out task {row.id}, sample {j}, step {step})") from err
        per_prompt.append(stats.nan_mean([math.nan if s is None else s for s in scores]))
    return per_prompt


# ---------------------------------------------------------------------------------------------
# Warnings from the curve


def effective_zero_std(m: dict[str, float]) -> float | None:
    """Port of thresholds.ts effectiveZeroStd: the sidecar's per-group share
    (frac_reward_zero_std_group, GroupZeroStd) when logged; else, for steps logged without it, 1.0
    when the step's batch-wide reward_std is zero up to float noise relative to the reward's scale
    (TRL's isclose at atol 1e-8 logs a constant 0.2 reward with float32 noise as
    frac_reward_zero_std 0.0), else TRL's frac_reward_zero_std."""
    group = m.get("frac_reward_zero_std_group")
    if group is not None and math.isfinite(group):
        return group
    std = m.get("reward_std")
    if std is not None and math.isfinite(std) and std <= ZERO_STD_REL_TOL * max(abs(m.get("reward", 0.0)), 1.0):
        return 1.0
    zs = m.get("frac_reward_zero_std")
    return None if zs is None or not math.isfinite(zs) else zs


def kl_local_level(previous: list[float], window: int) -> float | None:
    """The local KL level a step is judged against: the median of the previous ``window`` steps'
    KL (upper median for an even count); None before ``window`` steps (thresholds.ts klLocalLevel)."""
    if len(previous) < window:
        return None
    return sorted(previous[len(previous) - window:])[window // 2]


def kl_local_spread(previous: list[float], window: int) -> float | None:
    """The median absolute deviation (upper median) of the same window's KL from `kl_local_level`;
    None when that is (thresholds.ts klLocalSpread)."""
    level = kl_local_level(previous, window)
    if level is None:
        return None
    return sorted(abs(x - level) for x in previous[len(previous) - window:])[window // 2]


def is_kl_spike(kl: float, previous: list[float]) -> bool:
    """With a full window before it: KL over KL_SPIKE_FACTOR x the local level floored at
    KL_SPIKE_MIN, and over the level by more than KL_SPIKE_MADS x the local spread (thresholds.ts
    isKlSpike): a KL rising from ~0 and the per-step noise of the demo's KL are no spike, a jump is."""
    level = kl_local_level(previous, KL_SPIKE_WINDOW)
    spread = kl_local_spread(previous, KL_SPIKE_WINDOW)
    return (level is not None and spread is not None and kl > KL_SPIKE_FACTOR * max(level, KL_SPIKE_MIN)
            and kl > level + KL_SPIKE_MADS * spread)


class CurveWatch:
    """Turns logged metrics into RunWarning events, each code at most once per run phase."""

    def __init__(self, emit: Emit):
        self.emit = emit
        self.zero_std_run = 0
        self.kls: list[float] = []
        self.fired: set[str] = set()
        self.last_spike_step = -KL_SPIKE_EVERY

    def _warn(self, code: str, step: int, message: str) -> None:
        if code in self.fired:
            return
        self.fired.add(code)
        self.emit(pb.RunEvent(warning=pb.RunWarning(code=code, step=step, message=message)))

    def observe(self, step: int, m: dict[str, float]) -> None:
        clipped = m.get("completions/clipped_ratio")
        if clipped is not None and clipped >= CLIPPED_RATIO_WARN:
            self._warn("clipped_ratio_high", step,
                       f"completions/clipped_ratio = {clipped:.2f}: completions are truncated at max_completion_length; "
                       "rewards and lengths are unreliable (raise max_completion_length or check EOS)")
        zs = effective_zero_std(m)
        self.zero_std_run = self.zero_std_run + 1 if zs is not None and zs >= ZERO_STD_WARN else 0
        if self.zero_std_run >= ZERO_STD_WARN_STEPS:
            self._warn("zero_std_plateau", step,
                       f"the share of groups with no within-group reward variance >= {ZERO_STD_WARN} for "
                       f"{self.zero_std_run} steps: most groups get identical rewards, so advantages are 0 and nothing "
                       "is learned (raise num_generations, add partial credit, or use easier prompts)")
        kl = m.get("kl")
        if kl is not None and math.isfinite(kl):
            level = kl_local_level(self.kls, KL_SPIKE_WINDOW)
            if is_kl_spike(kl, self.kls) and step - self.last_spike_step >= KL_SPIKE_EVERY:
                self.fired.discard("kl_spike")  # spikes may repeat: report at most one per window
                self.last_spike_step = step
                spread = kl_local_spread(self.kls, KL_SPIKE_WINDOW)
                self._warn("kl_spike", step, f"kl = {kl:.4g} is {kl / max(level, KL_SPIKE_MIN):.1f}x the median "
                           f"{level:.4g} of the last {KL_SPIKE_WINDOW} steps (floored at {KL_SPIKE_MIN:g}; spread "
                           f"{spread:.2g}): the policy jumped (lower learning_rate or epsilon, raise beta)")
            self.kls.append(kl)


# ---------------------------------------------------------------------------------------------
# The mode


def grpo_config(req: pb.TrainRequest, args: dict, reward_weights: list[float]):
    """TRL's GRPOConfig for the effective request: the shared TrainingArguments
    (`training.trainer_args`), every GRPO and runtime knob with a TRL name (config.py's tables),
    and one weight per reward function."""
    from trl import GRPOConfig

    return GRPOConfig(**args, **trl_kwargs(req.grpo, GRPO), **trl_kwargs(req.runtime, RUNTIME),
                      reward_weights=reward_weights)


class GrpoMode:
    """TRAIN_MODE_GRPO plugged into `training.run_training`."""

    artifacts = ["adapter", "grpo_train.jsonl", "reward-vs-step.csv", "reward-vs-step.png"]
    trl_skip = ()

    def prepare(self, run: RunContext) -> None:
        self.train_rows, self.held_rows = split_rows(run.req, run.data_root)
        if run.is_main:
            write_jsonl_atomic(run.run_dir / "grpo_train.jsonl",
                               [{"id": r.id, "prompt": r.prompt, "answers": list(r.answers)} for r in self.train_rows],
                               ensure_ascii=True)
        self.specs = [reward_spec_dict(s) for s in run.req.rewards]
        self.scorer = composed_guarded_scorer(self.specs)
        self.eval_seed = run.req.grpo.seed + EVAL_SEED_OFFSET
        self.watch = CurveWatch(run.emit)
        self.zero_std = GroupZeroStd([s["weight"] for s in self.specs], group_size=run.req.grpo.num_generations)

    def _measure(self, run: RunContext, model, step: int) -> tuple[int, list[float]]:
        return step, held_out_scores(model, run.tokenizer, self.held_rows, self.scorer,
                                     k=run.req.held_out.samples_per_prompt, g=run.req.grpo, step=step,
                                     seed=self.eval_seed, prompt_format=run.prompt_format)

    def measure_start(self, run: RunContext):
        start = self._measure(run, run.model, 0)
        log.info("step-0 held-out reward %.4f on %d prompts x %d", stats.nan_mean(start[1]), len(self.held_rows),
                 run.req.held_out.samples_per_prompt)
        return start

    def measure_end(self, run: RunContext, step: int):
        end = self._measure(run, run.trainer.model, step)
        log.info("end held-out reward %.4f", stats.nan_mean(end[1]))
        return end

    def held_out(self, run: RunContext, m) -> pb.HeldOutReward:
        step, per_prompt = m
        return held_out_reward_proto(step, per_prompt, seed=self.eval_seed, unit="prompts", metric="",
                                     samples_per_prompt=run.req.held_out.samples_per_prompt)

    def on_log(self, run: RunContext, state, logs: dict) -> None:
        # skip the end-of-train summary log; a step that reuses its generation batch (num_iterations
        # > 1) logs no reward metrics (it generated nothing) and is still a train_step
        if "train_runtime" in logs:
            return
        metrics = numeric_metrics(logs, keep_nan=("kl",))
        share = self.zero_std.pop()  # per group, from the rewards this process computed (not TRL's batch std)
        if share is not None:
            metrics["frac_reward_zero_std_group"] = share
        run.emit_step(state.global_step, state.max_steps, metrics)
        self.watch.observe(state.global_step, metrics)

    def build_trainer(self, run: RunContext, args: dict, callback):
        from datasets import Dataset
        from transformers import PrinterCallback
        from trl import GRPOTrainer

        from py_trainer.models.decoding import grow_cache_in_generate

        trainer = GRPOTrainer(
            model=run.model,
            reward_funcs=trl_reward_funcs(self.specs, self.zero_std),
            args=grpo_config(run.req, args, [s["weight"] for s in self.specs]),
            # chat: TRL's conversational format, rendered by the same template as format_prompts
            train_dataset=Dataset.from_list([
                {"prompt": chat_messages(r.prompt) if run.prompt_format == "chat" else r.prompt,
                 "answers": list(r.answers)} for r in self.train_rows]),
            processing_class=run.tokenizer,
            peft_config=peft_config_for(run),
            callbacks=[callback],
        )
        trainer.remove_callback(PrinterCallback)  # events carry the metrics; keep worker.log readable
        grow_cache_in_generate(trainer.model)  # TRL's generate calls: no torch.cat per step (decoding.py)
        return trainer

    def finish(self, run: RunContext, result: pb.RunResult, start, end) -> dict:
        write_steps_csv(run.run_dir / "reward-vs-step.csv", run.steps, GRPO_CSV_COLUMNS)
        write_plot(run.run_dir / "reward-vs-step.png", run.steps, start_reward=result.start_reward.mean,
                   end_reward=result.end_reward.mean if end else None,
                   title=f"{run.run_dir.name}: GRPO reward vs step ({run.req.base_model or 'embedded default model'})")
        return dict(train_rows=len(self.train_rows), held_out_rows=len(self.held_rows), warnings=sorted(self.watch.fired))
