"""Training from K-way human rankings (TRAIN_MODE_RANKED_PREFERENCE) and its held-out monitoring.

Training. Each ranked group of K responses becomes its C(K, 2) ordered pairs (better, worse) and
TRL's `DPOTrainer` (loss_type "sigmoid") minimises the Bradley-Terry pairwise loss
-log sigmoid(r(x, y_better) - r(x, y_worse)) on the implicit reward r(x, y) = beta * log(pi(y|x) /
pi_ref(y|x)), where pi is the base model plus a LoRA adapter and pi_ref the base model (TRL gets it
by disabling the adapter: `ref_model=None` + `peft_config`). What this module adds around TRL:
- a pair's prompt + response longer than max_length (grpo.max_prompt_length +
  grpo.max_completion_length tokens) is truncated by TRL and a pair whose prompt alone fills it is
  dropped by TRL; both are counted up front and reported as warnings, and ``pref_train.jsonl``
  holds exactly the pairs TRL trains on;
- held-out monitoring at step 0 and at every logging step, on groups never trained on.

Held-out metrics (all from the implicit reward; the step-0 model *is* the reference, so every
score is 0 there and the step-0 values are what a coin gives):
- pairwise accuracy: share of ordered pairs (over all held-out groups pooled) whose better response
  scores higher; a tie counts 1/2;
- group win rate: share of groups whose top-scored response is in the human top 2;
- win margin: mean over groups of human rank(runner-up) - human rank(pick), where pick and
  runner-up are the model's first and second by score (positive = the model's order agrees);
- preference consistency: how much the implicit reward varies across repeated samples from the
  policy for one prompt. For the first `CONSISTENCY_PROMPTS` held-out prompts we draw
  `CONSISTENCY_SAMPLES` responses from the current policy (temperature 1, top-p 1, the same seed at
  every measurement, at most as many tokens as the longest held-out response), score each with
  beta * log(pi / pi_ref), and report the mean over prompts of the sample sd (n - 1). It is 0 at
  step 0 (pi = pi_ref); it grows when the policy's own answers to one prompt span responses it
  now prefers and responses it now disprefers, i.e. its preferences are not yet consistently
  reflected in what it generates. Cheap: one generate call plus, per prompt, a policy and a
  reference pass that share the prompt's KV cache across its samples. The alternative, MC-dropout
  on the held-out scores, is degenerate at LoRA dropout 0 (the default).
For ties in the score, group win rate and win margin are their expectations under a uniformly
random tie-break (so the all-tied step 0 gives the chance values, not an artefact of order).
`RunResult.start_reward` / `end_reward` carry the held-out pairwise accuracy per group (mean over
groups, percentile bootstrap CI over groups), so the report's start-vs-end machinery applies.

Defaults (`config.PREFERENCE_SCHEDULE_DEFAULTS`, `PREFERENCE`, `PREFERENCE_LORA_DEFAULTS`): LoRA r=64, alpha=128 on q_proj, v_proj; warmup_ratio 0.2;
beta 0.1 (TRL's); learning_rate 5e-5: with alpha/r = 2 and Adam, each LoRA weight moves by about
lr per step; 5e-5 is the top of the range LoRA-DPO recipes use on billion-parameter models
(5e-6 .. 5e-5) and still moves the embedded tiny model (tests/test_preference_train.py: held-out
pairwise accuracy 0.5 -> 0.9 in 5 steps of 4 pairs, on AML groups where 5 of the 6 pairs are about
the answer format; the content pair stays near chance that early).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Sequence

from py_trainer.core import stats
from py_trainer.core.atomic import write_jsonl_atomic
from py_trainer.core.config import PREFERENCE, trl_kwargs
from py_trainer.data.preference_data import ranking_pairs
from py_trainer.data.request_data import split_groups
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.loading import format_prompts, generate_completions
from py_trainer.plots.curves import PREFERENCE_CSV_COLUMNS, write_steps_csv
from py_trainer.training.skeleton import Emit, RunContext, held_out_reward_proto, lora_config, numeric_metrics

log = logging.getLogger(__name__)

CONSISTENCY_PROMPTS = 8
CONSISTENCY_SAMPLES = 4
SCORE_TOKENS = 8192
"""Continuation tokens (rows x padded width) per forward pass when scoring responses."""
PAIRWISE_METRIC = "pairwise accuracy of the implicit reward per group (ties count 1/2)"

# ---------------------------------------------------------------------------------------------
# Pairs, implicit rewards and the held-out metrics


def expand_pairs(groups: Sequence[pb.RankedGroup]) -> list[dict]:
    """Every group's C(K, 2) ordered pairs, group by group, best pairs first."""
    pairs = []
    for gi, g in enumerate(groups):
        for b, w in ranking_pairs(list(g.ranks)):
            pairs.append({"group": gi, "prompt": g.prompt,
                          "chosen": g.responses[b].text, "rejected": g.responses[w].text,
                          "chosen_id": g.responses[b].id, "rejected_id": g.responses[w].id,
                          "chosen_rank": int(g.ranks[b]), "rejected_rank": int(g.ranks[w])})
    return pairs


# ---------------------------------------------------------------------------------------------
# Implicit rewards and the held-out metrics


def _with_eos(text: str, eos: str | None) -> str:
    # TRL's DPOTrainer appends EOS to every chosen/rejected text that lacks it; score the same text
    return text if not eos or text.endswith(eos) else text + eos


def encode_completion(tokenizer, prompt: str, completion: str, max_length: int | None) -> tuple[list[int], int]:
    """(token ids of prompt + completion, number of completion tokens) as TRL's DPOTrainer builds
    them: plain `tokenizer(text)`, EOS appended, the completion starting where the tokenised prompt
    and prompt + completion diverge, then `keep_start` truncation to max_length."""
    from trl.data_utils import common_prefix_length

    p_ids = tokenizer(prompt)["input_ids"]
    full = tokenizer(prompt + _with_eos(completion, tokenizer.eos_token))["input_ids"]
    start = common_prefix_length(p_ids, full)
    if max_length is not None:
        full = full[:max_length]
    return full, max(0, len(full) - start)


def sequence_logps(model, tokenizer, items: Sequence[tuple[str, str]], *, max_length: int | None,
                   max_tokens: int = SCORE_TOKENS) -> list[float]:
    """Sum of log pi(completion tokens | prompt) for each (prompt, completion), in nats; NaN when
    truncation leaves no completion token.

    Items that share a prompt share its forward pass: the common prefix runs once into a KV cache,
    then the continuations run as one right-padded batch of at most `max_tokens` tokens.
    """
    import torch

    encoded = [encode_completion(tokenizer, p, c, max_length) for p, c in items]
    by_prompt: dict[str, list[int]] = {}
    for i, (prompt, _) in enumerate(items):
        if encoded[i][1] > 0:
            by_prompt.setdefault(prompt, []).append(i)
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out = [math.nan] * len(items)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for idxs in by_prompt.values():
                # every item's ids start with the shared prompt tokens up to its completion start
                shared = min(len(encoded[i][0]) - encoded[i][1] for i in idxs) - 1
                chunk: list[int] = []
                for i in idxs + [-1]:
                    width = max([len(encoded[j][0]) - shared for j in chunk + ([i] if i >= 0 else [])])
                    if chunk and (i < 0 or width * (len(chunk) + 1) > max_tokens):
                        _score_chunk(model, encoded, chunk, shared, pad, device, out)
                        chunk = []
                    if i >= 0:
                        chunk.append(i)
    finally:
        if was_training:
            model.train()
    return out


def _score_chunk(model, encoded, chunk: list[int], shared: int, pad: int, device, out: list[float]) -> None:
    import torch

    prefix = encoded[chunk[0]][0][:shared]
    cache = None
    if shared > 0:
        cache = model(input_ids=torch.tensor([prefix], device=device), use_cache=True).cache
        cache.batch_repeat_interleave(len(chunk))
    conts = [encoded[i][0][shared:] for i in chunk]
    width = max(len(c) for c in conts)
    ids = torch.full((len(chunk), width), pad, dtype=torch.long)
    mask = torch.zeros((len(chunk), shared + width), dtype=torch.long)
    mask[:, :shared] = 1
    for r, c in enumerate(conts):
        ids[r, :len(c)] = torch.tensor(c)
        mask[r, shared:shared + len(c)] = 1
    pos = torch.arange(shared, shared + width).expand(len(chunk), -1)
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=pos.to(device),
                   cache=cache, use_cache=cache is not None).logits
    for r, i in enumerate(chunk):
        seq, n = encoded[i]
        first = len(seq) - n - shared  # continuation index of the first completion token
        lp = torch.log_softmax(logits[r, first - 1:len(seq) - shared - 1].float(), dim=-1)
        target = ids[r, first:len(seq) - shared].to(device)
        out[i] = float(lp.gather(-1, target.unsqueeze(-1)).sum())


def pairwise_agreement(scores: Sequence[float], ranks: Sequence[int]) -> tuple[float, int]:
    """(agreeing pairs, pairs): a pair agrees when the better-ranked response scores higher; a tie
    counts 1/2."""
    agree = 0.0
    pairs = ranking_pairs(list(ranks))
    for b, w in pairs:
        agree += 1.0 if scores[b] > scores[w] else 0.5 if scores[b] == scores[w] else 0.0
    return agree, len(pairs)


def pick_metrics(scores: Sequence[float], ranks: Sequence[int]) -> tuple[float, float]:
    """(win, margin) of one group, as expectations under a uniformly random tie-break:
    win = P(the model's top-scored response has human rank 0 or 1);
    margin = E[human rank(runner-up) - human rank(pick)]."""
    levels = sorted(set(scores), reverse=True)
    top = [i for i, s in enumerate(scores) if s == levels[0]]
    win = sum(1 for i in top if ranks[i] <= 1) / len(top)
    if len(top) >= 2:
        return win, 0.0  # pick and runner-up are two random members of the same tie: symmetric
    second = [i for i, s in enumerate(scores) if s == levels[1]]
    return win, sum(ranks[i] for i in second) / len(second) - ranks[top[0]]


@dataclass
class HeldOutMeasurement:
    """Held-out monitoring at one optimizer step."""

    step: int
    metrics: pb.PreferenceMetrics
    per_group_accuracy: list[float]
    scores: list[list[float]] = field(repr=False)
    """Implicit reward of every held-out response, per group, in response order."""

    def as_metrics(self) -> dict[str, float]:
        m = self.metrics
        return {"heldout/pairwise_accuracy": m.pairwise_accuracy, "heldout/group_win_rate": m.group_win_rate,
                "heldout/win_margin": m.win_margin, "heldout/preference_consistency": m.preference_consistency}


def _is_peft(model) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is a dependency
        return False
    return isinstance(model, PeftModel)


class HeldOutMonitor:
    """Scores held-out groups with the implicit reward; the reference log-probs are computed once,
    from the base model, before any adapter exists."""

    def __init__(self, base_model, tokenizer, groups: Sequence[pb.RankedGroup], *, beta: float,
                 max_length: int | None, seed: int, max_new_tokens: int):
        self.tokenizer = tokenizer
        self.groups = list(groups)
        self.beta = beta
        self.max_length = max_length
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        self.items = [(g.prompt, r.text) for g in self.groups for r in g.responses]
        self.ref_logps = sequence_logps(base_model, tokenizer, self.items, max_length=max_length)

    def measure(self, model, step: int) -> HeldOutMeasurement:
        """Held-out metrics of `model` (the base model = the reference at step 0, else the PEFT model)."""
        import torch

        device = next(model.parameters()).device
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            if _is_peft(model):
                pol = sequence_logps(model, self.tokenizer, self.items, max_length=self.max_length)
                flat = [self.beta * (a - b) for a, b in zip(pol, self.ref_logps)]
                per_prompt_sd = self._consistency(model)
            else:  # the reference itself: every implicit reward is exactly 0
                flat = [0.0] * len(self.items)
                per_prompt_sd = [0.0] * min(CONSISTENCY_PROMPTS, len(self.groups))
        scores, i = [], 0
        for g in self.groups:
            scores.append(flat[i:i + len(g.responses)])
            i += len(g.responses)
        agree = pairs = 0.0
        per_group, wins, margins = [], [], []
        for g, s in zip(self.groups, scores):
            s = [x if math.isfinite(x) else -math.inf for x in s]
            a, n = pairwise_agreement(s, list(g.ranks))
            agree, pairs = agree + a, pairs + n
            per_group.append(a / n)
            w, m = pick_metrics(s, list(g.ranks))
            wins.append(w)
            margins.append(m)
        metrics = pb.PreferenceMetrics(pairwise_accuracy=agree / pairs, group_win_rate=sum(wins) / len(wins),
                                       win_margin=sum(margins) / len(margins),
                                       preference_consistency=stats.nan_mean(per_prompt_sd),
                                       per_group_win=wins, per_group_margin=margins,
                                       per_prompt_consistency=per_prompt_sd)
        return HeldOutMeasurement(step=step, metrics=metrics, per_group_accuracy=per_group, scores=scores)

    def _consistency(self, model) -> list[float]:
        """The implicit-score sd (n - 1) of each consistency prompt's samples (NaN when undefined)."""
        prompts = [g.prompt for g in self.groups[:CONSISTENCY_PROMPTS]]
        samples = generate_completions(model, self.tokenizer, prompts, k=CONSISTENCY_SAMPLES, temperature=1.0,
                                       top_p=1.0, max_new_tokens=self.max_new_tokens, seed=self.seed)
        items = [(p, s) for p, ss in zip(prompts, samples) for s in ss]
        pol = sequence_logps(model, self.tokenizer, items, max_length=self.max_length)
        with model.disable_adapter():
            ref = sequence_logps(model, self.tokenizer, items, max_length=self.max_length)
        scores = [self.beta * (a - b) for a, b in zip(pol, ref)]
        k = CONSISTENCY_SAMPLES
        return [stats.nan_sample_sd(scores[j:j + k]) for j in range(0, len(scores), k)]


class GapWatch:
    """Warns once when training pairs are separated but held-out pairs are not (overfitting, or
    held-out groups unlike the training groups)."""

    TRAIN_ACC = 0.9
    HELD_OUT_ACC = 0.55

    def __init__(self, emit: Emit):
        self.emit = emit
        self.fired = False

    def observe(self, step: int, max_steps: int, m: dict[str, float]) -> None:
        train = m.get("rewards/accuracies")
        held = m.get("heldout/pairwise_accuracy")
        if self.fired or train is None or held is None or step < max_steps // 2:
            return
        if train >= self.TRAIN_ACC and held <= self.HELD_OUT_ACC:
            self.fired = True
            self.emit(pb.RunEvent(warning=pb.RunWarning(
                code="heldout_gap", step=step,
                message=f"rewards/accuracies = {train:.2f} on training pairs but heldout/pairwise_accuracy = "
                        f"{held:.2f}: the adapter memorises training pairs without generalising (more groups, "
                        "fewer steps, higher beta) or the held-out groups differ from the training groups")))


# ---------------------------------------------------------------------------------------------
# The mode


def fit_pairs(pairs: list[dict], tokenizer, max_length: int) -> tuple[list[dict], int, int]:
    """(pairs TRL will train on, pairs dropped because the prompt alone fills max_length, pairs
    truncated). Mirrors DPOTrainer's tokenisation so the dropped set is the same."""
    cache: dict[tuple[str, str], tuple[int, int]] = {}

    def info(prompt: str, text: str) -> tuple[int, int]:
        """(prompt tokens, prompt + response tokens) before truncation."""
        key = (prompt, text)
        if key not in cache:
            ids, n = encode_completion(tokenizer, prompt, text, None)
            cache[key] = (len(ids) - n, len(ids))
        return cache[key]

    kept, dropped, truncated = [], 0, 0
    for p in pairs:
        (pc, lc), (pr, lr) = info(p["prompt"], p["chosen"]), info(p["prompt"], p["rejected"])
        if min(pc, pr) >= max_length:
            dropped += 1
            continue
        truncated += int(max(lc, lr) > max_length)
        kept.append(p)
    return kept, dropped, truncated


def dpo_config(req: pb.TrainRequest, args: dict, *, max_length: int, gradient_checkpointing: bool):
    """TRL's DPOConfig for the effective request: the shared TrainingArguments
    (`training.trainer_args`, without max_completion_length: DPOConfig has `max_length` instead,
    prompt + completion) and every preference knob with a TRL name (config.py's tables)."""
    from trl import DPOConfig

    return DPOConfig(**args, **trl_kwargs(req.preference, PREFERENCE),
                     gradient_checkpointing=gradient_checkpointing,
                     loss_type=["sigmoid"],  # Bradley-Terry on the implicit reward
                     max_length=max_length)


class PreferenceMode:
    """TRAIN_MODE_RANKED_PREFERENCE plugged into `training.run_training`."""

    artifacts = ["adapter", "pref_train.jsonl", "preference-vs-step.csv"]
    trl_skip = ("max_completion_length",)

    def prepare(self, run: RunContext) -> None:
        import datasets

        datasets.disable_progress_bars()
        g = run.req.grpo
        self.max_length = g.max_prompt_length + g.max_completion_length
        self.train_groups, self.held_groups = split_groups(run.req, run.data_root)
        if run.prompt_format == "chat":  # the same rendered prompt in training and held-out scoring
            for grp in self.train_groups + self.held_groups:
                grp.prompt = format_prompts(run.tokenizer, [grp.prompt], "chat")[0]
        all_pairs = expand_pairs(self.train_groups)
        self.pairs, self.dropped, self.truncated = fit_pairs(all_pairs, run.tokenizer, self.max_length)
        if self.dropped:
            run.warn("pairs_dropped", 0,
                     f"{self.dropped} of {len(all_pairs)} pairs dropped: their prompt alone fills max_length = "
                     f"grpo.max_prompt_length + grpo.max_completion_length = {self.max_length} tokens")
        if self.truncated:
            run.warn("pairs_truncated", 0,
                     f"{self.truncated} of {len(all_pairs)} pairs have a response cut at max_length = {self.max_length} "
                     "tokens: those comparisons only see the start of the response (raise grpo.max_completion_length)")
        if not self.pairs:
            raise ValueError(f"no training pair fits in max_length = {self.max_length} tokens "
                             "(grpo.max_prompt_length + grpo.max_completion_length)")
        if run.is_main:
            write_jsonl_atomic(run.run_dir / "pref_train.jsonl", self.pairs)
        self.watch = GapWatch(run.emit)

    def measure_start(self, run: RunContext) -> HeldOutMeasurement:
        g = run.req.grpo
        longest = max(encode_completion(run.tokenizer, grp.prompt, r.text, None)[1]
                      for grp in self.held_groups for r in grp.responses)
        self.monitor = HeldOutMonitor(run.model, run.tokenizer, self.held_groups, beta=run.req.preference.beta,
                                      max_length=self.max_length, seed=g.seed + 7919,
                                      max_new_tokens=min(longest, g.max_completion_length))
        start = self.monitor.measure(run.model, 0)
        if not run.resume_from:  # a resumed run already logged its step 0
            run.emit_step(0, g.max_steps, start.as_metrics())
        log.info("step-0 held-out pairwise accuracy %.3f on %d groups", start.metrics.pairwise_accuracy,
                 len(self.held_groups))
        self.last = start
        return start

    def on_log(self, run: RunContext, state, logs: dict) -> None:
        if "rewards/accuracies" not in logs or not run.is_main:  # the end-of-train summary log; other ranks
            return
        metrics = numeric_metrics(logs)
        self.last = self.monitor.measure(run.trainer.model, state.global_step)
        metrics.update(self.last.as_metrics())
        run.emit_step(state.global_step, state.max_steps, metrics)
        self.watch.observe(state.global_step, state.max_steps, metrics)

    def build_trainer(self, run: RunContext, args: dict, callback):
        from datasets import Dataset
        from trl import DPOTrainer

        # activation memory only matters on an accelerator; on CPU it costs ~20% time for nothing
        cfg = dpo_config(run.req, args, max_length=self.max_length, gradient_checkpointing=run.device.type == "cuda")
        return DPOTrainer(
            model=run.model,
            ref_model=None,  # with peft_config: the reference is the base model, adapter disabled
            args=cfg,
            train_dataset=Dataset.from_list([{"prompt": p["prompt"], "chosen": p["chosen"], "rejected": p["rejected"]}
                                             for p in self.pairs]),
            processing_class=run.tokenizer,
            peft_config=lora_config(run.req.lora),
            callbacks=[callback],
        )

    def measure_end(self, run: RunContext, step: int) -> HeldOutMeasurement:
        if self.last.step == step:
            return self.last
        end = self.monitor.measure(run.trainer.model, step)  # the last step was not a logging step
        run.emit_step(step, run.req.grpo.max_steps, end.as_metrics())
        return end

    def held_out(self, run: RunContext, m: HeldOutMeasurement) -> pb.HeldOutReward:
        return held_out_reward_proto(m.step, m.per_group_accuracy, seed=run.req.grpo.seed, unit="held-out groups",
                                     metric=PAIRWISE_METRIC, samples_per_prompt=0)

    def finish(self, run: RunContext, result: pb.RunResult, start: HeldOutMeasurement,
               end: HeldOutMeasurement | None) -> dict:
        from google.protobuf import json_format

        if end is not None:
            result.preference_metrics.CopyFrom(end.metrics)
            log.info("end held-out pairwise accuracy %.3f (step 0: %.3f)", end.metrics.pairwise_accuracy,
                     start.metrics.pairwise_accuracy)
        write_steps_csv(run.run_dir / "preference-vs-step.csv", run.steps, PREFERENCE_CSV_COLUMNS)

        def as_dict(m: HeldOutMeasurement | None):
            return json_format.MessageToDict(m.metrics, preserving_proto_field_name=True,
                                             always_print_fields_with_no_presence=True) if m else None

        return dict(train_groups=len(self.train_groups), train_pairs=len(self.pairs), pairs_dropped=self.dropped,
                    pairs_truncated=self.truncated, held_out_groups=len(self.held_groups),
                    start_preference_metrics=as_dict(start), end_preference_metrics=as_dict(end),
                    held_out_scores_end=end.scores if end else None,
                    warnings=["heldout_gap"] if self.watch.fired else [])
