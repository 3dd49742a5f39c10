"""Evaluate: the base model and zero or more LoRA adapters on one model load, graded by name.

The base model is loaded once with `from_pretrained`; adapters are attached with PEFT
(`PeftModel.from_pretrained` for the first, `load_adapter` for the rest) and switched with
`set_adapter`; the base variant runs under `disable_adapter()`. Generation is batched with left
padding (`models.generate_completions`), K samples per task. Every completion gets every
grader's score (NaN = unscorable), so the TS harness can re-grade and pair them task by task.
The result carries the run-time half of the eval's fingerprint (resolved model, weights sha256,
prompt format and chat template hash, device, dtype, batch size, library versions) and each
adapter's sha256 and step, which the agent compares with baseline.json and the run.

What the files say is checked up front (`plan_evaluation`: truncated weights, an adapter whose
rank, layers or sizes do not fit the base); what only loading or generating can tell is mapped to
a status naming the part (`inference`: a NaN adapter, out of memory).

In the sidecar an evaluation runs in the inference worker process (`inference_worker`), one job
at a time, on that process's one inference thread (`models.INFERENCE`): concurrent calls queue
instead of loading models over each other, each gives what it would give alone, and an
out-of-memory fails that call only. `stream_evaluation` is what runs there: a warning first when the
load converts a GGUF base (issue 45: no silent wait), then progress is streamed
as EvaluateProgress events, then exactly one EvaluateResult; a caller that goes away stops the
generation at the next batch (and a queued job never starts).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Callable

from py_trainer.agents.episodes import Episode, run_episodes, start_episodes
from py_trainer.agents.spec import AgentSetup, check_agent_spec
from py_trainer.agents.tool_host import ScorerError, ToolHost, ToolHostLost
from py_trainer.endpoint.program_episodes import ProgramEndpoint, run_program_episodes
from py_trainer.core.config import DEFAULT_GRADERS, EVALUATE, check_knobs, check_runtime, fill_defaults
from py_trainer.core.errors import InvalidArgument
from py_trainer.core.model_files import check_adapter_fits_base, parse_base_model
from py_trainer.core.rewards import build_scorer, check_reward_specs
from py_trainer.data.request_data import task_rows
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.agent_format import episode_template
from py_trainer.models.base_models import check_base_model, conversion_pending, model_dir_for
from py_trainer.models.inference import AdapterSource, InferenceFailed, generation_error, load_for_inference
from py_trainer.models.loading import (INFERENCE, GenerationCancelled, adapter_access, adapter_label, adapter_sha256,
                                       check_chat_template, format_prompts, generate_completions, model_fingerprint,
                                       resolve_adapter)
from py_trainer.models.variants import decode_together, generate_greedy_variants

log = logging.getLogger(__name__)


@dataclass
class EvalPlan:
    """A validated EvaluateRequest: where everything is, with defaults filled."""

    base_model: str
    adapters: list[AdapterSource]
    rows: list[pb.TaskRow]
    graders: list[dict]
    request: pb.EvaluateRequest
    adapter_runs: dict[str, tuple[str, int]]
    """variant name -> (run id, step) for each adapter given by run id: its checkpoint_step, else
    the run's steps_completed (the step its final adapter was saved at)"""


def plan_evaluation(req: pb.EvaluateRequest, registry, tool_hosts: Collection[str] = ()) -> EvalPlan:
    """Validate a request (errors name the field) and resolve model, adapters, tasks and graders.

    `registry` needs ``data_root`` and ``get(run_id)`` (a record with ``state`` and ``folder``).
    `tool_hosts`: the hosts besides loopback an agent task's tool_host may name (`check_tool_host`)."""
    out = pb.EvaluateRequest()
    out.CopyFrom(req)
    data_root = Path(registry.data_root)
    fill_defaults(out, EVALUATE)
    check_knobs(out, EVALUATE, "")
    if out.temperature == 0 and out.samples_per_task > 1:
        raise InvalidArgument("samples_per_task", "greedy decoding (temperature 0) gives identical samples; use 1")
    check_runtime(out.runtime)
    base = parse_base_model(out.base_model, data_root)  # sorted once; "" (the embedded default) is fine
    check_base_model(base, data_root, "base_model")
    if not out.HasField("tasks"):
        raise InvalidArgument("tasks", "is required")
    agent = out.HasField("agent")
    if out.skip_grading and agent:
        raise InvalidArgument("skip_grading", "does not go with agent: an agent task is graded by its scorers")
    if out.skip_grading and out.graders:
        raise InvalidArgument("graders", "must be empty with skip_grading")
    rows = task_rows(out.tasks, data_root, "tasks", need_answers=not (agent or out.skip_grading))
    if out.skip_grading:  # `agent try`: completions only, no grader runs
        graders = []
    elif agent:
        if out.graders:
            raise InvalidArgument("graders", "must be empty for an agent task: its scorers (agent.scorers) grade it")
        check_agent_spec(out.agent, "agent", tool_hosts)
        graders = [{"name": s.name} for s in out.agent.scorers]
    else:
        if not out.graders:
            for g in DEFAULT_GRADERS:
                out.graders.add(name=g["name"])
        graders = check_reward_specs(out.graders, "graders", check_weight=False)
    adapters: list[AdapterSource] = []
    adapter_runs: dict[str, tuple[str, int]] = {}
    names = {"base"}
    for i, ref in enumerate(out.adapters):
        field = f"adapters[{i}]"
        if not ref.name or not all(c.isalnum() or c in "_-" for c in ref.name):
            raise InvalidArgument(f"{field}.name", f"{ref.name!r} must be a non-empty [A-Za-z0-9_-] name")
        if ref.name in names:
            raise InvalidArgument(f"{field}.name", f"{ref.name!r} is used twice (or is the reserved 'base')")
        names.add(ref.name)
        where, what = adapter_label(ref, field)
        with adapter_access(ref, field, data_root, getattr(registry, "runs_root", None)):
            folder = resolve_adapter(ref, field, data_root, registry.get)
            check_adapter_fits_base(folder, where, what, out.base_model, data_root, model_dir_for(base, data_root))
        adapters.append(AdapterSource(ref.name, folder, where, what))
        if ref.WhichOneof("source") == "run_id":
            step = ref.checkpoint_step if ref.HasField("checkpoint_step") else registry.get(ref.run_id).steps_completed
            adapter_runs[ref.name] = (ref.run_id, step)
    if out.skip_base and not adapters:
        raise InvalidArgument("skip_base", "skips the base model but no adapters are given")
    follow_trained_prompt_format(out, [ref.run_id for ref in out.adapters if ref.WhichOneof("source") == "run_id"],
                                 registry)
    check_chat_template(out.runtime, out.base_model, data_root)
    return EvalPlan(base_model=out.base_model, adapters=adapters, rows=rows, graders=graders, request=out,
                    adapter_runs=adapter_runs)


def follow_trained_prompt_format(out: pb.EvaluateRequest, run_ids: list[str], registry) -> None:
    """runtime.prompt_format "auto" (the default) takes the format the runs were trained with when
    their requests named one ("raw" or "chat"): an adapter is measured on prompts formatted as it
    was trained on, and the base on the same prompts. Runs trained with different formats need
    runtime.prompt_format named (INVALID_ARGUMENT)."""
    if out.runtime.prompt_format not in ("", "auto"):
        return
    named = {run_id: fmt for run_id in run_ids
             if (fmt := registry.get(run_id).request.runtime.prompt_format) not in ("", "auto")}
    if len(set(named.values())) > 1:
        trained = ", ".join(f"{run_id}: {fmt}" for run_id, fmt in named.items())
        raise InvalidArgument("runtime.prompt_format", f"the adapters' runs were trained with different prompt formats "
                                                       f"({trained}); name the one to evaluate with")
    if named:
        out.runtime.prompt_format = next(iter(named.values()))


def run_evaluation(plan: EvalPlan, data_root: Path,
                   progress: Callable[[pb.EvaluateProgress], None] = lambda p: None) -> pb.EvaluateResult:
    """Generate and grade every variant on one model load."""
    t0 = time.time()
    req = plan.request
    model, tokenizer, path, device, dtype = load_for_inference(plan.base_model, data_root, req.runtime, plan.adapters)
    agent = AgentSetup.from_spec(req.agent) if req.HasField("agent") else None
    scorers = {g["name"]: None if agent else build_scorer(g) for g in plan.graders}
    prompts = [] if agent else format_prompts(tokenizer, [r.prompt for r in plan.rows], req.runtime.prompt_format)
    variants = ([] if req.skip_base else ["base"]) + [a.name for a in plan.adapters]
    labels = {a.name: (a.field, a.what) for a in plan.adapters}
    labels["base"] = ("base_model", repr(plan.base_model or "the embedded default model"))
    result = pb.EvaluateResult(base_model=path)
    result.fingerprint.CopyFrom(model_fingerprint(path, tokenizer, req.runtime.prompt_format, device, dtype))
    result.fingerprint.batch_size = req.batch_size
    result.fingerprint.top_p = req.top_p
    if agent is not None:  # episodes are written by the agent template: the model's own or ours
        result.fingerprint.prompt_format = "agent"
        result.fingerprint.chat_template_sha256 = episode_template(tokenizer).sha256
    for a in plan.adapters:
        run_id, step = plan.adapter_runs.get(a.name, ("", 0))
        result.adapters.add(name=a.name, run_id=run_id, sha256=adapter_sha256(a.folder), step=step)
    def graded_of(comps: list[list[str]]) -> list[list[tuple[str, dict, None]]]:
        return [[(c, {name: scorer(c, list(row.answers)) for name, scorer in scorers.items()}, None)
                 for c in cs] for row, cs in zip(plan.rows, comps)]

    together = {}  # greedy: every variant decoded in the same batches (models/variants.py)
    keyed = [None if v == "base" else v for v in variants]
    if agent is None and req.temperature == 0 and req.samples_per_task == 1 and decode_together(model, keyed):
        def on_batches(done: int) -> None:
            for v in variants:
                progress(pb.EvaluateProgress(variant=v, tasks_done=done, tasks_total=len(plan.rows)))

        try:
            comps = generate_greedy_variants(model, tokenizer, prompts, keyed, max_new_tokens=req.max_new_tokens,
                                             batch_size=req.batch_size, on_batch=on_batches)
        except GenerationCancelled:
            raise
        except Exception as exc:
            what = f"{'the base model and ' if 'base' in variants else ''}{len(plan.adapters)} adapter(s) decoded together"
            raise generation_error(exc, "adapters", what) from None
        together = {v: [[c] for c in cs] for v, cs in zip(variants, comps)}
    for variant in variants:
        def on_batch(done: int, _v=variant) -> None:
            progress(pb.EvaluateProgress(variant=_v, tasks_done=done, tasks_total=len(plan.rows)))

        def gen(_v=variant):
            try:
                if _v in together:
                    return graded_of(together[_v])
                if agent is not None:
                    return agent_samples(model, tokenizer, plan, agent, _v, on_batch)
                return graded_of(generate_completions(model, tokenizer, prompts, k=req.samples_per_task,
                                                      temperature=req.temperature, top_p=req.top_p,
                                                      max_new_tokens=req.max_new_tokens, seed=req.seed,
                                                      batch_size=req.batch_size, on_batch=on_batch))
            except (GenerationCancelled, ToolHostLost, ScorerError):
                raise
            except Exception as exc:
                err = generation_error(exc, *labels[_v])
                if agent is not None and isinstance(err, InferenceFailed):
                    # not the model's memory or weights: the episodes failed, the agent's field
                    err = generation_error(exc, "agent", f"the agent episodes of {labels[_v][1]}")
                raise err from None

        if variant in together:
            graded = gen()
        elif variant == "base" and plan.adapters:
            with model.disable_adapter():
                graded = gen()
        else:
            if plan.adapters:
                model.set_adapter(variant)
            graded = gen()
        vr = result.variants.add(name=variant)
        sums = {name: 0.0 for name in scorers}
        counts = {name: 0 for name in scorers}
        for row, samples in zip(plan.rows, graded):
            tr = vr.tasks.add(task_id=row.id)
            for completion, scores, episode in samples:
                s = tr.samples.add(completion=completion)
                for name in scorers:
                    v = scores[name]
                    s.scores[name] = math.nan if v is None else float(v)
                if episode is not None:
                    s.messages_json = json.dumps(episode.messages, ensure_ascii=False)
                    s.episode.CopyFrom(episode.stats)
            for name in scorers:
                vals = [s.scores[name] for s in tr.samples if math.isfinite(s.scores[name])]
                if vals:
                    sums[name] += sum(vals) / len(vals)
                    counts[name] += 1
        for name in scorers:
            vr.mean_scores[name] = sums[name] / counts[name] if counts[name] else math.nan
    result.seconds = time.time() - t0
    return result


def agent_samples(model, tokenizer, plan: EvalPlan, agent: AgentSetup, variant: str,
                  on_batch: Callable[[int], None]) -> list[list[tuple[str, dict, Episode]]]:
    """K episodes per task with one variant: (final answer, scores, episode) per sample.

    As the single-turn Evaluate generates batch_size prompts at a time, the episodes run
    batch_size tasks at a time (each with its K samples: batch_size x K rows a generate call), so
    the model's memory does not grow with the task count; `on_batch` after each batch, where a
    cancel (the caller gone, a deadline) stops it. Batch b samples from seed + b (the episode
    runner re-seeds per turn from it); episode ids count across batches."""
    req = plan.request
    k = req.samples_per_task
    out: list[list[tuple[str, dict, Episode]]] = []
    host = ToolHost(agent.tool_host, agent.tool_timeout_ms)
    endpoint = ProgramEndpoint(tokenizer) if agent.program_timeout_ms is not None else None
    try:
        for b, start in enumerate(range(0, len(plan.rows), req.batch_size)):
            rows = plan.rows[start:start + req.batch_size]
            tasks = [(r.id, r.prompt) for r in rows for _ in range(k)]
            ids = [f"{variant}-{start * k + i}" for i in range(len(tasks))]
            settings = dict(temperature=req.temperature, top_p=req.top_p, max_new_tokens=req.max_new_tokens,
                            max_total_tokens=None, seed=req.seed + b)
            if endpoint is not None:  # the user's agent program, through the endpoint (docs/agent-programs.md)
                eps = run_program_episodes(endpoint, model, tokenizer, agent, host, tasks, ids, **settings)
            else:
                eps = run_episodes(model, tokenizer, agent, host, start_episodes(tokenizer, agent, tasks, ids), **settings)
            out += [[(e.final_answer, e.scores, e) for e in eps[i * k:(i + 1) * k]] for i in range(len(rows))]
            on_batch(start + len(rows))
    finally:
        host.close()
        if endpoint is not None:
            endpoint.close()
    return out


async def stream_evaluation(plan: EvalPlan, data_root: Path) -> AsyncIterator[pb.EvaluateResponse]:
    """Run a planned evaluation on the inference thread: progress events while generating, then one
    result; first a warning when the load converts a GGUF base (a minute the user would wait unsaid)."""
    if note := conversion_pending(plan.base_model, data_root, before="the eval", later="later loads use"):
        log.warning(note)
        yield pb.EvaluateResponse(warning=pb.RunWarning(code="base_model_conversion", message=note))
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    stop = threading.Event()

    def progress(p: pb.EvaluateProgress) -> None:
        if stop.is_set():  # called between batches: the caller is gone, stop generating
            raise GenerationCancelled()
        loop.call_soon_threadsafe(queue.put_nowait, p)

    def job() -> pb.EvaluateResult:
        if stop.is_set():  # the caller left while this job waited for the inference thread
            raise GenerationCancelled()
        return run_evaluation(plan, data_root, progress)

    task = loop.run_in_executor(INFERENCE, job)
    task.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved even if nobody waits
    getter = None
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield pb.EvaluateResponse(progress=getter.result())
                continue
            getter.cancel()
            while not queue.empty():
                yield pb.EvaluateResponse(progress=queue.get_nowait())
            yield pb.EvaluateResponse(result=task.result())
            return
    finally:
        stop.set()
        if getter is not None:
            getter.cancel()
        task.cancel()  # a job still waiting for the inference thread never starts

