"""Training from K-way human rankings (TRAIN_MODE_RANKED_PREFERENCE), its held-out monitoring, and
sampling K responses per prompt for annotators (the SampleGroups RPC).

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

Defaults (see `TRAIN_DEFAULTS`): LoRA r=64, alpha=128 on q_proj, v_proj; warmup_ratio 0.2;
beta 0.1 (TRL's); learning_rate 5e-5: with alpha/r = 2 and Adam, each LoRA weight moves by about
lr per step; 5e-5 is the top of the range LoRA-DPO recipes use on billion-parameter models
(5e-6 .. 5e-5) and still moves the embedded tiny model (tests/test_preference_train.py: held-out
pairwise accuracy 0.5 -> 0.9 in 5 steps of 4 pairs, on AML groups where 5 of the 6 pairs are about
the answer format; the content pair stays near chance that early).

Sampling (`sample_groups`): K responses per prompt from a base model (+ adapter), each with its own
seed (a hash of the request seed, the prompt and the response index, so a prompt gets the same
responses wherever it sits in the request), by one of three strategies: a top-p ladder at one
temperature; a different instruction suffix per response (the group's prompt stays the original);
or over-generating N and keeping the top K by a registry scorer (ties: earlier draw first, exact
duplicates only when nothing else is left). Groups come out with empty ranks, ready to annotate.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator, Callable, Iterator, Sequence

from google.protobuf import json_format

from py_trainer.errors import FailedPrecondition, InvalidArgument, NotFound
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.preference_data import group_to_json, load_ranked_groups, ranking_pairs
from py_trainer.runs import REQUEST_FILE, write_atomic, write_json_atomic

log = logging.getLogger(__name__)

Emit = Callable[[pb.RunEvent], None]

TRAIN_DEFAULTS = {
    "learning_rate": 5e-5,
    "max_steps": 100,
    "per_device_train_batch_size": 8,  # pairs per device step
    "gradient_accumulation_steps": 1,
    "warmup_ratio": 0.2,
    "seed": 0,
    "logging_steps": 5,  # held-out monitoring runs at every logging step
    "save_steps": 50,
    "max_prompt_length": 512,
    "max_completion_length": 512,  # TRL DPOConfig.max_length = prompt + completion = 1024, TRL's default
}
PREFERENCE_DEFAULTS = {"beta": 0.1}
MAX_HELD_OUT_GROUPS_DEFAULT = 16
"""Default num_held_out_groups: 16, or a fifth of the dataset (at least 1) when it is smaller."""
GRPO_ONLY_FIELDS = ("num_generations", "beta", "epsilon", "epsilon_high", "loss_type", "scale_rewards",
                    "temperature", "top_p", "mask_truncated_completions")
CONSISTENCY_PROMPTS = 8
CONSISTENCY_SAMPLES = 4
SCORE_TOKENS = 8192
"""Continuation tokens (rows x padded width) per forward pass when scoring responses."""

SAMPLE_DEFAULTS = {"temperature": 1.0, "max_new_tokens": 64, "seed": 0}
LADDER_TOP = 0.95
LADDER_BOTTOM = 0.65
"""Default top-p ladder: K values evenly spaced from 0.95 down to 0.65 (K=4: 0.95, 0.85, 0.75, 0.65)."""
MAX_K = 64
MAX_SAMPLE_PROMPTS = 10_000
MAX_OVERGENERATE = 256


# ---------------------------------------------------------------------------------------------
# Request validation


from py_trainer.train_config import _default, _finite  # noqa: E402  (one definition of each)


def validate_preference_request(req: pb.TrainRequest, data_root: Path) -> None:
    """Fill the ranked-preference defaults into `req` in place, or raise naming the field.

    Used fields: dataset (ranked groups), preference, lora, and from grpo only learning_rate,
    max_steps, per_device_train_batch_size, gradient_accumulation_steps, warmup_ratio, seed,
    logging_steps, save_steps, max_prompt_length, max_completion_length. GRPO-only knobs, rewards
    and held_out are refused rather than silently ignored.
    """
    from py_trainer.train_config import PREFERENCE_LORA_DEFAULTS, validate_lora

    g = req.grpo
    for name in GRPO_ONLY_FIELDS:
        if g.HasField(name):
            hint = " (use preference.beta)" if name == "beta" else ""
            raise InvalidArgument(f"grpo.{name}", f"does not apply to TRAIN_MODE_RANKED_PREFERENCE{hint}")
    if req.rewards:
        raise InvalidArgument("rewards", "GRPO only: ranked-preference training learns from the rankings")
    if req.HasField("held_out"):
        raise InvalidArgument("held_out", "GRPO only: use preference.held_out / preference.num_held_out_groups")
    for name, value in TRAIN_DEFAULTS.items():
        _default(g, name, value)
    f = "grpo."
    if not 0 < _finite(f + "learning_rate", g.learning_rate) <= 1:
        raise InvalidArgument(f + "learning_rate", f"must be in (0, 1], got {g.learning_rate}")
    if not 1 <= g.max_steps <= 1_000_000:
        raise InvalidArgument(f + "max_steps", f"must be in [1, 1000000], got {g.max_steps}")
    if not 1 <= g.per_device_train_batch_size <= 4096:
        raise InvalidArgument(f + "per_device_train_batch_size", f"must be in [1, 4096], got {g.per_device_train_batch_size}")
    if not 1 <= g.gradient_accumulation_steps <= 1024:
        raise InvalidArgument(f + "gradient_accumulation_steps", f"must be in [1, 1024], got {g.gradient_accumulation_steps}")
    if not 0 <= _finite(f + "warmup_ratio", g.warmup_ratio) < 1:
        raise InvalidArgument(f + "warmup_ratio", f"must be in [0, 1), got {g.warmup_ratio}")
    if g.seed >= 2**32:
        raise InvalidArgument(f + "seed", f"must be < 2^32, got {g.seed}")
    if not 1 <= g.logging_steps <= g.max_steps:
        raise InvalidArgument(f + "logging_steps", f"must be in [1, max_steps], got {g.logging_steps}")
    if g.save_steps < 1:
        raise InvalidArgument(f + "save_steps", f"must be >= 1, got {g.save_steps}")
    if not 1 <= g.max_prompt_length <= 131_072:
        raise InvalidArgument(f + "max_prompt_length", f"must be in [1, 131072], got {g.max_prompt_length}")
    if not 1 <= g.max_completion_length <= 32_768:
        raise InvalidArgument(f + "max_completion_length", f"must be in [1, 32768], got {g.max_completion_length}")

    validate_lora(req.lora, PREFERENCE_LORA_DEFAULTS)

    p = req.preference
    _default(p, "beta", PREFERENCE_DEFAULTS["beta"])
    if not 0 < _finite("preference.beta", p.beta) <= 100:
        raise InvalidArgument("preference.beta", f"must be in (0, 100], got {p.beta}")
    groups = load_ranked_groups(req.dataset, data_root, "dataset", need_ranks=True)
    if p.HasField("held_out"):
        held = load_ranked_groups(p.held_out, data_root, "preference.held_out", need_ranks=True)
        _default(p, "num_held_out_groups", min(MAX_HELD_OUT_GROUPS_DEFAULT, len(held)))
        if not 1 <= p.num_held_out_groups <= len(held):
            raise InvalidArgument("preference.num_held_out_groups",
                                  f"must be in [1, {len(held)}] (preference.held_out has {len(held)} groups), "
                                  f"got {p.num_held_out_groups}")
    else:
        _default(p, "num_held_out_groups", max(1, min(MAX_HELD_OUT_GROUPS_DEFAULT, len(groups) // 5)))
        if p.num_held_out_groups < 1:
            raise InvalidArgument("preference.num_held_out_groups", "must be >= 1")
        if len(groups) - p.num_held_out_groups < 1:
            raise InvalidArgument("preference.num_held_out_groups",
                                  f"{p.num_held_out_groups} held-out groups leave no training groups "
                                  f"(dataset has {len(groups)})")


def split_groups(req: pb.TrainRequest, data_root: Path) -> tuple[list[pb.RankedGroup], list[pb.RankedGroup]]:
    """(training groups, held-out groups) exactly as validation described them."""
    groups = load_ranked_groups(req.dataset, data_root, "dataset", need_ranks=True)
    n = req.preference.num_held_out_groups
    if req.preference.HasField("held_out"):
        return groups, load_ranked_groups(req.preference.held_out, data_root, "preference.held_out")[:n]
    return groups[:-n], groups[-n:]


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


def _sample_sd(xs: Sequence[float]) -> float:
    xs = [x for x in xs if math.isfinite(x)]
    if len(xs) < 2:
        return math.nan
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _nanmean(xs: Sequence[float]) -> float:
    good = [x for x in xs if math.isfinite(x)]
    return sum(good) / len(good) if good else math.nan


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
                consistency = self._consistency(model)
            else:  # the reference itself: every implicit reward is exactly 0
                flat = [0.0] * len(self.items)
                consistency = 0.0
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
                                       win_margin=sum(margins) / len(margins), preference_consistency=consistency)
        return HeldOutMeasurement(step=step, metrics=metrics, per_group_accuracy=per_group, scores=scores)

    def _consistency(self, model) -> float:
        from py_trainer.generation import generate_completions

        prompts = [g.prompt for g in self.groups[:CONSISTENCY_PROMPTS]]
        samples = generate_completions(model, self.tokenizer, prompts, k=CONSISTENCY_SAMPLES, temperature=1.0,
                                       top_p=1.0, max_new_tokens=self.max_new_tokens, seed=self.seed)
        items = [(p, s) for p, ss in zip(prompts, samples) for s in ss]
        pol = sequence_logps(model, self.tokenizer, items, max_length=self.max_length)
        with model.disable_adapter():
            ref = sequence_logps(model, self.tokenizer, items, max_length=self.max_length)
        scores = [self.beta * (a - b) for a, b in zip(pol, ref)]
        k = CONSISTENCY_SAMPLES
        return _nanmean([_sample_sd(scores[j:j + k]) for j in range(0, len(scores), k)])


def held_out_reward(m: HeldOutMeasurement, seed: int) -> pb.HeldOutReward:
    """The held-out pairwise accuracy per group as the contract's HeldOutReward."""
    from py_trainer.worker import BOOTSTRAP_RESAMPLES, bootstrap_mean_ci

    lo, hi = bootstrap_mean_ci(m.per_group_accuracy, seed)
    return pb.HeldOutReward(
        step=m.step, mean=_nanmean(m.per_group_accuracy), ci_low=lo, ci_high=hi,
        ci_method=f"percentile bootstrap over held-out groups ({BOOTSTRAP_RESAMPLES} resamples); metric: "
                  "pairwise accuracy of the implicit reward per group (ties count 1/2)",
        num_prompts=len(m.per_group_accuracy), samples_per_prompt=0, per_prompt=m.per_group_accuracy)


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
# The run


STEP_CSV_COLUMNS = ("step", "loss", "rewards/accuracies", "rewards/margins", "rewards/chosen", "rewards/rejected",
                    "logps/chosen", "logps/rejected", "heldout/pairwise_accuracy", "heldout/group_win_rate",
                    "heldout/win_margin", "heldout/preference_consistency", "learning_rate", "grad_norm")


def _write_steps_csv(path: Path, steps: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(STEP_CSV_COLUMNS)
    for s in steps:
        w.writerow(["" if s.get(c) is None else repr(s[c]) for c in STEP_CSV_COLUMNS])
    write_atomic(path, buf.getvalue())


def _fit_pairs(pairs: list[dict], tokenizer, max_length: int) -> tuple[list[dict], int, int]:
    """(pairs TRL will train on, pairs dropped because the prompt alone fills max_length, pairs
    truncated). Mirrors DPOTrainer's tokenisation so the dropped set is the same."""
    cache: dict[tuple[str, str], tuple[int, int]] = {}
    from trl.data_utils import common_prefix_length

    def info(prompt: str, text: str) -> tuple[int, int]:
        key = (prompt, text)
        if key not in cache:
            p_ids = tokenizer(prompt)["input_ids"]
            full = tokenizer(prompt + _with_eos(text, tokenizer.eos_token))["input_ids"]
            cache[key] = (common_prefix_length(p_ids, full), len(full))
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


def run_preference_training(run_dir: Path, data_root: Path, emit: Emit, should_stop: Callable[[], bool]) -> int:
    """Train one ranked-preference run; emit its events; return the proposed terminal RunState
    (SUCCEEDED, or CANCELLED when should_stop() turned true). Raises on failure."""
    import datasets
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed
    from trl import DPOConfig, DPOTrainer

    from py_trainer.generation import pick_device, pick_dtype
    from py_trainer.worker import (RunStopped, file_artifacts, run_event_callback, trainer_args, relative_change_ci, resolve_model_path,
                                   save_adapter_atomic)

    t0 = time.time()
    run_dir, data_root = Path(run_dir), Path(data_root)
    req = json_format.Parse((run_dir / REQUEST_FILE).read_text(), pb.TrainRequest())
    g, lora, rt, pref = req.grpo, req.lora, req.runtime, req.preference
    max_length = g.max_prompt_length + g.max_completion_length
    train_groups, held_groups = split_groups(req, data_root)

    device = pick_device(rt.device)
    dtype = pick_dtype(rt.precision, device)
    set_seed(g.seed)
    datasets.disable_progress_bars()
    model_path = resolve_model_path(req.base_model, data_root)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(device)
    total_params = sum(p.numel() for p in model.parameters())

    all_pairs = expand_pairs(train_groups)
    pairs, dropped, truncated = _fit_pairs(all_pairs, tokenizer, max_length)
    if dropped:
        emit(pb.RunEvent(warning=pb.RunWarning(
            code="pairs_dropped", step=0,
            message=f"{dropped} of {len(all_pairs)} pairs dropped: their prompt alone fills max_length = "
                    f"grpo.max_prompt_length + grpo.max_completion_length = {max_length} tokens")))
    if truncated:
        emit(pb.RunEvent(warning=pb.RunWarning(
            code="pairs_truncated", step=0,
            message=f"{truncated} of {len(all_pairs)} pairs have a response cut at max_length = {max_length} "
                    "tokens: those comparisons only see the start of the response (raise grpo.max_completion_length)")))
    if not pairs:
        raise ValueError(f"no training pair fits in max_length = {max_length} tokens")
    write_atomic(run_dir / "pref_train.jsonl", "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))

    if should_stop():
        raise RunStopped()
    longest = max(encode_completion(tokenizer, grp.prompt, r.text, None)[1] for grp in held_groups for r in grp.responses)
    monitor = HeldOutMonitor(model, tokenizer, held_groups, beta=pref.beta, max_length=max_length,
                             seed=g.seed + 7919, max_new_tokens=min(longest, g.max_completion_length))
    start = monitor.measure(model, 0)
    steps: list[dict] = [dict(start.as_metrics(), step=0)]
    emit(pb.RunEvent(train_step=pb.TrainStep(step=0, max_steps=g.max_steps, metrics=start.as_metrics())))
    log.info("step-0 held-out pairwise accuracy %.3f on %d groups", start.metrics.pairwise_accuracy, len(held_groups))

    last: list[HeldOutMeasurement] = [start]
    watch = GapWatch(emit)
    trainer_ref: list = []

    def on_log(state, logs: dict) -> None:
        if "rewards/accuracies" not in logs:  # skip the end-of-train summary log
            return
        metrics = {k: float(v) for k, v in logs.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
        m = monitor.measure(trainer_ref[0].model, state.global_step)
        last[0] = m
        metrics.update(m.as_metrics())
        steps.append(dict(metrics, step=state.global_step))
        emit(pb.RunEvent(train_step=pb.TrainStep(step=state.global_step, max_steps=state.max_steps,
                                                 metrics=metrics)))
        watch.observe(state.global_step, state.max_steps, metrics)

    cfg = DPOConfig(
        **trainer_args(run_dir, device, dtype, g),
        # activation memory only matters on an accelerator; on CPU it costs ~20% time for nothing
        gradient_checkpointing=device.type == "cuda",
        beta=pref.beta,
        loss_type=["sigmoid"],  # Bradley-Terry on the implicit reward
        max_length=max_length,
    )
    trainer = DPOTrainer(
        model=model,
        ref_model=None,  # with peft_config: the reference is the base model, adapter disabled
        args=cfg,
        train_dataset=Dataset.from_list([{"prompt": p["prompt"], "chosen": p["chosen"], "rejected": p["rejected"]}
                                         for p in pairs]),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                               target_modules=list(lora.target_modules), task_type="CAUSAL_LM"),
        callbacks=[run_event_callback(emit, should_stop, on_log)],
    )
    trainer_ref.append(trainer)
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    trainer.train()
    stopped = should_stop()
    done_steps = trainer.state.global_step

    save_adapter_atomic(trainer.model, run_dir / "adapter")
    result = pb.RunResult(start_reward=held_out_reward(start, g.seed), steps_completed=done_steps,
                          total_params=total_params, trainable_params=trainable)
    end = None
    if not stopped:
        end = last[0] if last[0].step == done_steps else monitor.measure(trainer.model, done_steps)
        if end is not last[0]:  # the last step was not a logging step: report where training ended
            steps.append(dict(end.as_metrics(), step=done_steps))
            emit(pb.RunEvent(train_step=pb.TrainStep(step=done_steps, max_steps=g.max_steps, metrics=end.as_metrics())))
        result.preference_metrics.CopyFrom(end.metrics)
        result.end_reward.CopyFrom(held_out_reward(end, g.seed))
        rel, lo, hi = relative_change_ci(start.per_group_accuracy, end.per_group_accuracy, g.seed)
        result.relative_change, result.relative_change_ci_low, result.relative_change_ci_high = rel, lo, hi
        log.info("end held-out pairwise accuracy %.3f (step 0: %.3f)", end.metrics.pairwise_accuracy,
                 start.metrics.pairwise_accuracy)
    _write_steps_csv(run_dir / "preference-vs-step.csv", steps)
    result.train_seconds = time.time() - t0
    summary = json_format.MessageToDict(result, preserving_proto_field_name=True)
    summary.update(
        run_id=run_dir.name, state="CANCELLED" if stopped else "SUCCEEDED", base_model=model_path,
        train_groups=len(train_groups), train_pairs=len(pairs), pairs_dropped=dropped, pairs_truncated=truncated,
        held_out_groups=len(held_groups),
        start_preference_metrics=json_format.MessageToDict(start.metrics, preserving_proto_field_name=True,
                                                           always_print_fields_with_no_presence=True),
        end_preference_metrics=(json_format.MessageToDict(end.metrics, preserving_proto_field_name=True,
                                                          always_print_fields_with_no_presence=True)
                                if end else None),
        held_out_scores_end=end.scores if end else None,
        warnings=["heldout_gap"] if watch.fired else [])
    write_json_atomic(run_dir / "summary.json", summary)
    result.artifacts.extend(file_artifacts(run_dir, ["adapter", "pref_train.jsonl", "preference-vs-step.csv",
                                                     "summary.json"]))
    emit(pb.RunEvent(result=result))
    return pb.RUN_STATE_CANCELLED if stopped else pb.RUN_STATE_SUCCEEDED


# ---------------------------------------------------------------------------------------------
# Sampling groups for annotators


def validate_sample_request(request: pb.SampleGroupsRequest, data_root: Path,
                            registry=None) -> tuple[pb.SampleGroupsRequest, Path | None]:
    """(effective request with defaults filled, adapter folder or None), or raise naming the field.

    adapter.run_id needs the sidecar's run `registry` (its adapter/ folder must exist);
    adapter.path is a PEFT folder under the data root.
    """
    from py_trainer.paths import resolve_under
    from py_trainer.train_config import _check_base_model, _validate_runtime

    req = pb.SampleGroupsRequest()
    req.CopyFrom(request)
    data_root = Path(data_root)
    if req.base_model:
        _check_base_model(req.base_model, data_root, "base_model")
    if not req.prompts:
        raise InvalidArgument("prompts", "needs at least one prompt")
    if len(req.prompts) > MAX_SAMPLE_PROMPTS:
        raise InvalidArgument("prompts", f"at most {MAX_SAMPLE_PROMPTS} prompts per request, got {len(req.prompts)}")
    for i, p in enumerate(req.prompts):
        if not p.strip():
            raise InvalidArgument(f"prompts[{i}]", "is empty")
    if not 2 <= req.k <= MAX_K:
        raise InvalidArgument("k", f"must be in [2, {MAX_K}] (a group needs at least 2 responses), got {req.k}")
    if req.strategy == pb.SAMPLING_STRATEGY_UNSPECIFIED:
        req.strategy = pb.SAMPLING_STRATEGY_TOP_P_LADDER
    if req.strategy not in (pb.SAMPLING_STRATEGY_TOP_P_LADDER, pb.SAMPLING_STRATEGY_PROMPT_SUFFIX,
                            pb.SAMPLING_STRATEGY_OVERGENERATE_TOP_K):
        raise InvalidArgument("strategy", f"unknown strategy {req.strategy}")
    for name, value in SAMPLE_DEFAULTS.items():
        _default(req, name, value)
    if not 0 < _finite("temperature", req.temperature) <= 10:
        raise InvalidArgument("temperature", f"must be in (0, 10], got {req.temperature}")
    if not 1 <= req.max_new_tokens <= 32_768:
        raise InvalidArgument("max_new_tokens", f"must be in [1, 32768], got {req.max_new_tokens}")
    if req.seed >= 2**32:
        raise InvalidArgument("seed", f"must be < 2^32, got {req.seed}")

    ladder = req.strategy == pb.SAMPLING_STRATEGY_TOP_P_LADDER
    suffix = req.strategy == pb.SAMPLING_STRATEGY_PROMPT_SUFFIX
    over = req.strategy == pb.SAMPLING_STRATEGY_OVERGENERATE_TOP_K
    if ladder:
        if not req.top_p_ladder:
            step = (LADDER_TOP - LADDER_BOTTOM) / (req.k - 1)
            req.top_p_ladder.extend([round(LADDER_TOP - i * step, 6) for i in range(req.k)])
        if len(req.top_p_ladder) != req.k:
            raise InvalidArgument("top_p_ladder", f"needs exactly k = {req.k} values, got {len(req.top_p_ladder)}")
        for i, p in enumerate(req.top_p_ladder):
            if not 0 < _finite(f"top_p_ladder[{i}]", p) <= 1:
                raise InvalidArgument(f"top_p_ladder[{i}]", f"must be in (0, 1], got {p}")
    elif req.top_p_ladder:
        raise InvalidArgument("top_p_ladder", "only applies to SAMPLING_STRATEGY_TOP_P_LADDER")
    if suffix:
        if len(req.prompt_suffixes) != req.k:
            raise InvalidArgument("prompt_suffixes",
                                  f"needs exactly k = {req.k} suffixes (one per response), got {len(req.prompt_suffixes)}")
        if len(set(req.prompt_suffixes)) != len(req.prompt_suffixes):
            raise InvalidArgument("prompt_suffixes", "must all differ (a different instruction per response)")
    elif req.prompt_suffixes:
        raise InvalidArgument("prompt_suffixes", "only applies to SAMPLING_STRATEGY_PROMPT_SUFFIX")
    if over:
        if not req.overgenerate_n:
            req.overgenerate_n = 2 * req.k
        if not req.k <= req.overgenerate_n <= MAX_OVERGENERATE:
            raise InvalidArgument("overgenerate_n", f"must be in [k = {req.k}, {MAX_OVERGENERATE}], got {req.overgenerate_n}")
        if not req.HasField("scorer"):
            req.scorer.name = "format"
        _build_scorer(req.scorer)
    else:
        if req.overgenerate_n:
            raise InvalidArgument("overgenerate_n", "only applies to SAMPLING_STRATEGY_OVERGENERATE_TOP_K")
        if req.HasField("scorer"):
            raise InvalidArgument("scorer", "only applies to SAMPLING_STRATEGY_OVERGENERATE_TOP_K")
    _validate_runtime(req.runtime)

    adapter_dir = None
    if req.HasField("adapter"):
        src = req.adapter.WhichOneof("source")
        if src == "run_id":
            if registry is None:
                raise InvalidArgument("adapter.run_id", "needs the sidecar's run registry; pass adapter.path instead")
            try:
                rec = registry.get(req.adapter.run_id)
            except (NotFound, InvalidArgument) as err:
                raise type(err)("adapter.run_id", err.message) from None
            if rec.state != pb.RUN_STATE_SUCCEEDED:
                raise FailedPrecondition("adapter.run_id", f"run {req.adapter.run_id!r} is "
                                                           f"{pb.RunState.Name(rec.state)}, not SUCCEEDED")
            adapter_dir = Path(rec.folder) / "adapter"
            if not (adapter_dir / "adapter_config.json").is_file():
                raise NotFound("adapter.run_id", f"run {req.adapter.run_id!r} has no adapter/")
        elif src == "path":
            adapter_dir = resolve_under(data_root, req.adapter.path, "adapter.path")
            if not (adapter_dir / "adapter_config.json").is_file():
                raise NotFound("adapter.path", f"{req.adapter.path!r} has no adapter_config.json "
                                               "(not a PEFT adapter folder)")
        else:
            raise InvalidArgument("adapter", "needs `run_id` or `path`")
    return req, adapter_dir


def _build_scorer(spec: pb.RewardSpec):
    """The scorer a RewardSpec names (registry or plugin), as evaluate.py builds graders."""
    from py_trainer.grpo import RewardInputError
    from py_trainer.reward_plugins import build_scorer
    from py_trainer.train_config import _split_reward_error, reward_spec_dict

    try:
        return build_scorer(reward_spec_dict(spec))
    except RewardInputError as err:
        sub, msg = _split_reward_error(err)
        raise InvalidArgument(f"scorer.{sub}", msg) from None


def response_seed(seed: int, prompt: str, index: int) -> int:
    """The seed of response `index` of `prompt` (31 bits): independent of the prompt's position."""
    h = hashlib.sha256(f"{seed}\x00{index}\x00{prompt}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


_STRATEGY_NAMES = {pb.SAMPLING_STRATEGY_TOP_P_LADDER: "top_p_ladder",
                   pb.SAMPLING_STRATEGY_PROMPT_SUFFIX: "prompt_suffix",
                   pb.SAMPLING_STRATEGY_OVERGENERATE_TOP_K: "overgenerate_top_k"}


def sample_groups(req: pb.SampleGroupsRequest, data_root: Path, adapter_dir: Path | None = None) -> Iterator[pb.RankedGroup]:
    """Yield one unannotated RankedGroup per prompt, in prompt order (`req` already validated).

    Blocking (loads the model, then generates); each response is one generate call with its own seed.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from py_trainer.generation import generate_completions, pick_device, pick_dtype
    from py_trainer.worker import resolve_model_path

    device = pick_device(req.runtime.device)
    dtype = pick_dtype(req.runtime.precision, device)
    model_path = resolve_model_path(req.base_model, Path(data_root))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(device)
    if adapter_dir is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter_dir))
    model.eval()
    scorer = _build_scorer(req.scorer) if req.strategy == pb.SAMPLING_STRATEGY_OVERGENERATE_TOP_K else None
    strategy = _STRATEGY_NAMES[req.strategy]

    def draw(prompt_text: str, top_p: float, seed: int) -> str:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            return generate_completions(model, tokenizer, [prompt_text], k=1, temperature=req.temperature, top_p=top_p,
                                        max_new_tokens=req.max_new_tokens, seed=seed)[0][0]

    for prompt in req.prompts:
        picked: list[tuple[str, dict]] = []
        if req.strategy == pb.SAMPLING_STRATEGY_TOP_P_LADDER:
            for i, top_p in enumerate(req.top_p_ladder):
                s = response_seed(req.seed, prompt, i)
                picked.append((draw(prompt, top_p, s), {"seed": s, "top_p": top_p}))
        elif req.strategy == pb.SAMPLING_STRATEGY_PROMPT_SUFFIX:
            for i, suffix in enumerate(req.prompt_suffixes):
                s = response_seed(req.seed, prompt, i)
                picked.append((draw(prompt + suffix, 1.0, s), {"seed": s, "suffix": suffix}))
        else:
            draws = []
            for j in range(req.overgenerate_n):
                s = response_seed(req.seed, prompt, j)
                text = draw(prompt, 1.0, s)
                score = scorer(text, [])
                score = -math.inf if score is None or not math.isfinite(score) else float(score)
                draws.append((score, j, s, text))
            order = sorted(draws, key=lambda d: (-d[0], d[1]))
            distinct, repeats, seen = [], [], set()
            for d in order:  # best distinct texts first; exact repeats only to fill up to k
                (repeats if d[3] in seen else distinct).append(d)
                seen.add(d[3])
            for score, j, s, text in (distinct + repeats)[: req.k]:
                picked.append((text, {"seed": s, "draw": j, "score": score if math.isfinite(score) else None}))
        group = pb.RankedGroup(prompt=prompt)
        for i, (text, _) in enumerate(picked):
            group.responses.add(id=f"r{i}", text=text)
        meta = {"strategy": strategy, "base_model": req.base_model or "embedded default model",
                "adapter": (req.adapter.run_id or req.adapter.path) if req.HasField("adapter") else "",
                "temperature": req.temperature, "max_new_tokens": req.max_new_tokens,
                "responses": [dict(info, id=f"r{i}") for i, (_, info) in enumerate(picked)]}
        if req.strategy == pb.SAMPLING_STRATEGY_OVERGENERATE_TOP_K:
            meta.update(overgenerate_n=req.overgenerate_n, scorer=req.scorer.name)
        group.metadata.update(meta)
        yield group


def sample_groups_to_jsonl(request: pb.SampleGroupsRequest, out_path: Path, data_root: Path, *,
                           registry=None) -> int:
    """Validate `request`, sample every group and write them as ranked-group JSONL (empty
    preferences) to `out_path`, atomically. Returns the number of groups written."""
    req, adapter_dir = validate_sample_request(request, data_root, registry)
    lines = [json.dumps(group_to_json(grp), ensure_ascii=False) + "\n"
             for grp in sample_groups(req, data_root, adapter_dir)]
    write_atomic(Path(out_path), "".join(lines))
    return len(lines)


async def sample_groups_stream(request: pb.SampleGroupsRequest, registry) -> AsyncIterator[pb.SampleGroupsResponse]:
    """The SampleGroups RPC: validate (InvalidArgument naming the field), then generate in a worker
    thread and yield each group as soon as it is sampled."""
    req, adapter_dir = validate_sample_request(request, registry.data_root, registry)
    it = sample_groups(req, registry.data_root, adapter_dir)
    done = object()
    try:
        while True:
            group = await asyncio.to_thread(next, it, done)
            if group is done:
                return
            yield pb.SampleGroupsResponse(group=group)
    finally:
        try:
            it.close()
        except ValueError:  # still running in its thread after a cancelled RPC; it ends on its own
            pass
