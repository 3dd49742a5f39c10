"""Sampling K responses per prompt for annotators to rank (the SampleGroups RPC, `py-trainer data sample`).

Sampling (`sample_groups`): K responses per prompt from a base model (+ adapter), each with its own
seed (a hash of the request seed, the prompt and the response index, so a prompt gets the same
responses wherever it sits in the request), by one of three strategies: a top-p ladder at one
temperature; a different instruction suffix per response (the group's prompt stays the original);
or over-generating N and keeping the top K by a registry scorer (ties: earlier draw first, exact
duplicates only when nothing else is left). Groups come out with empty ranks, ready to annotate.

In the sidecar, sampling runs in the inference worker process (`inference_worker`, shared with
Evaluate, one job at a time), each step on its one inference thread (`models.INFERENCE`), so
concurrent calls never load models over each other and an out-of-memory fails that call only;
every draw seeds itself, so a group is the same however calls interleave. A caller that goes
away stops the sampling at the next draw. Loading and generation failures are statuses naming
the part (`inference`), as in Evaluate.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import threading
from pathlib import Path
from typing import AsyncIterator, Callable, Iterator

from py_trainer.core.atomic import write_jsonl_atomic
from py_trainer.core.config import (MAX_K, MAX_OVERGENERATE, MAX_SAMPLE_PROMPTS, SAMPLE, check_knobs,
                                    check_runtime, fill_defaults, finite)
from py_trainer.core.errors import InvalidArgument
from py_trainer.core.model_files import check_adapter_fits_base
from py_trainer.core.rewards import checked_scorer
from py_trainer.data.preference_data import group_to_json
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.base_models import check_base_model, conversion_pending, model_dir_for
from py_trainer.models.inference import AdapterSource, generation_error, load_for_inference
from py_trainer.models.loading import (INFERENCE, GenerationCancelled, adapter_access, adapter_label, check_chat_template,
                                       format_prompts, generate_completions, resolve_adapter)

log = logging.getLogger(__name__)

LADDER_TOP = 0.95
LADDER_BOTTOM = 0.65
"""Default top-p ladder: K values evenly spaced from 0.95 down to 0.65 (K=4: 0.95, 0.85, 0.75, 0.65)."""


def validate_sample_request(request: pb.SampleGroupsRequest, data_root: Path,
                            registry=None) -> tuple[pb.SampleGroupsRequest, AdapterSource | None]:
    """(effective request with defaults filled, the adapter or None), or raise naming the field.

    adapter.run_id needs the sidecar's run `registry` (its adapter/ folder must exist);
    adapter.path is a PEFT folder under the data root.
    """
    req = pb.SampleGroupsRequest()
    req.CopyFrom(request)
    data_root = Path(data_root)
    if req.base_model:
        check_base_model(req.base_model, data_root, "base_model")
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
        valid = ", ".join(v.name for v in pb.SamplingStrategy.DESCRIPTOR.values if v.number)
        raise InvalidArgument("strategy", f"unknown strategy {req.strategy}; valid: {valid}")
    fill_defaults(req, SAMPLE)
    check_knobs(req, SAMPLE, "")

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
            if not 0 < finite(f"top_p_ladder[{i}]", p) <= 1:
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
            raise InvalidArgument("scorer", "is required for SAMPLING_STRATEGY_OVERGENERATE_TOP_K "
                                            "(the reward that picks the top k, e.g. {name: format})")
        checked_scorer(req.scorer, "scorer")
    else:
        if req.overgenerate_n:
            raise InvalidArgument("overgenerate_n", "only applies to SAMPLING_STRATEGY_OVERGENERATE_TOP_K")
        if req.HasField("scorer"):
            raise InvalidArgument("scorer", "only applies to SAMPLING_STRATEGY_OVERGENERATE_TOP_K")
    check_runtime(req.runtime)
    check_chat_template(req.runtime, req.base_model, data_root)

    adapter = None
    if req.HasField("adapter"):
        where, what = adapter_label(req.adapter, "adapter")
        with adapter_access(req.adapter, "adapter", data_root, getattr(registry, "runs_root", None)):
            folder = resolve_adapter(req.adapter, "adapter", data_root, registry.get if registry is not None else None)
            check_adapter_fits_base(folder, where, what, req.base_model, data_root,
                                    model_dir_for(req.base_model, data_root))
        adapter = AdapterSource("default", folder, where, what)
    return req, adapter


def response_seed(seed: int, prompt: str, index: int) -> int:
    """The seed of response `index` of `prompt` (31 bits): independent of the prompt's position."""
    h = hashlib.sha256(f"{seed}\x00{index}\x00{prompt}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


_STRATEGY_NAMES = {pb.SAMPLING_STRATEGY_TOP_P_LADDER: "top_p_ladder",
                   pb.SAMPLING_STRATEGY_PROMPT_SUFFIX: "prompt_suffix",
                   pb.SAMPLING_STRATEGY_OVERGENERATE_TOP_K: "overgenerate_top_k"}


def sample_groups(req: pb.SampleGroupsRequest, data_root: Path, adapter: AdapterSource | None = None,
                  should_stop: Callable[[], bool] = lambda: False) -> Iterator[pb.RankedGroup]:
    """Yield one unannotated RankedGroup per prompt, in prompt order (`req` already validated).

    Blocking (loads the model, then generates); each response is one generate call with its own
    seed. GenerationCancelled once `should_stop()` turns true (checked before every draw).
    """
    import torch

    model, tokenizer, _, device, _ = load_for_inference(req.base_model, data_root, req.runtime,
                                                        [adapter] if adapter is not None else [])
    field, what = (adapter.field, adapter.what) if adapter is not None else \
        ("base_model", repr(req.base_model or "the embedded default model"))
    scorer = checked_scorer(req.scorer, "scorer") if req.strategy == pb.SAMPLING_STRATEGY_OVERGENERATE_TOP_K else None
    strategy = _STRATEGY_NAMES[req.strategy]

    def draw(prompt_text: str, top_p: float, seed: int) -> str:
        if should_stop():
            raise GenerationCancelled()
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            text = format_prompts(tokenizer, [prompt_text], req.runtime.prompt_format)
            try:
                return generate_completions(model, tokenizer, text, k=1, temperature=req.temperature, top_p=top_p,
                                            max_new_tokens=req.max_new_tokens, seed=seed)[0][0]
            except Exception as exc:
                raise generation_error(exc, field, what) from None

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
    ranks) to `out_path`, atomically. Returns the number of groups written."""
    req, adapter = validate_sample_request(request, data_root, registry)
    groups = [group_to_json(grp) for grp in sample_groups(req, data_root, adapter)]
    write_jsonl_atomic(Path(out_path), groups)
    return len(groups)


async def sample_groups_stream(request: pb.SampleGroupsRequest, registry) -> AsyncIterator[pb.SampleGroupsResponse]:
    """SampleGroups in this process: validate (InvalidArgument naming the field), then `stream_groups`."""
    req, adapter = validate_sample_request(request, registry.data_root, registry)
    async for resp in stream_groups(req, registry.data_root, adapter):
        yield resp


def conversion_note(req: pb.SampleGroupsRequest, data_root: Path) -> str:
    """The line saying sampling first converts the request's GGUF base (`conversion_pending`), or ""."""
    return conversion_pending(req.base_model, data_root, before="sampling", later="later loads use")


async def stream_groups(req: pb.SampleGroupsRequest, data_root: Path,
                        adapter: AdapterSource | None) -> AsyncIterator[pb.SampleGroupsResponse]:
    """Sample a validated request on the inference thread, yielding each group as soon as it is sampled;
    first a warning when the load converts a GGUF base (a minute the user would wait unsaid)."""
    if note := conversion_note(req, data_root):
        log.warning(note)
        yield pb.SampleGroupsResponse(warning=pb.RunWarning(code="base_model_conversion", message=note))
    stop = threading.Event()
    it = sample_groups(req, data_root, adapter, should_stop=stop.is_set)
    done = object()
    loop = asyncio.get_running_loop()
    step = None
    try:
        while True:
            step = loop.run_in_executor(INFERENCE, next, it, done)
            group = await step
            if group is done:
                return
            yield pb.SampleGroupsResponse(group=group)
    finally:
        stop.set()
        if step is not None and not step.done():
            step.cancel()  # not started yet: never starts; running: stops at its next draw
            step.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            it.close()
        except ValueError:  # still running on the inference thread; it stops at its next draw
            pass
