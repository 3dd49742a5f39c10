"""TrainRequest checks: the effective request (every default filled) or an error naming the field.

One place for what a training request means, used by the server's Train RPC and by standalone
runs (`py-trainer train --config`) alike; the worker process reads the effective request these
checks stored and never validates again. Defaults and ranges come from `config.py`'s tables;
this module adds the checks that span fields or need the data: the batch divisible by the group
size, held-out size against the dataset, the mode's refusals of knobs that do not apply to it.
Nothing here imports TRL: the training modes (`train_grpo.py`, `train_preference.py`) only wire
the effective request into TRL.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Collection
from pathlib import Path

from py_trainer.agents.demonstrations import load_demonstrations
from py_trainer.agents.spec import AgentSetup, check_agent_spec
from py_trainer.core.config import (DEFAULT_REWARDS, GRPO, GRPO_ONLY_FIELDS, HELD_OUT, MAX_HELD_OUT_GROUPS_DEFAULT,
                                    PREFERENCE, PREFERENCE_LORA_DEFAULTS, PREFERENCE_SCHEDULE_DEFAULTS, SCHEDULE, SFT,
                                    VLLM_ONLY_FIELDS,
                                    check_knobs, check_lora, check_runtime, check_schedule, fill_defaults,
                                    set_default)
from py_trainer.core.devices import cuda_available
from py_trainer.core.errors import FailedPrecondition, InvalidArgument, RequestError
from py_trainer.core.model_files import check_adapter_fits_base, check_target_modules
from py_trainer.core.paths import validate_run_id
from py_trainer.core.rewards import check_reward_specs
from py_trainer.data.request_data import load_ranked_groups, task_rows
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.base_models import check_base_model, model_dir_for
from py_trainer.models.loading import check_chat_template, resolve_adapter


def validate_train_request(req: pb.TrainRequest, data_root: Path, *, this_machine: bool = True,
                           tool_hosts: Collection[str] = (), find_run=None) -> pb.TrainRequest:
    """Return the effective request (a copy, every default filled) or raise naming the field.

    The effective request is what runs: stored as the run's ``request.json``, echoed in
    `Run.request`, read back by the worker. No second config struct exists. `this_machine` False:
    the workers run on a cluster, whose executor checks devices and ranks per node
    (`ray_executor.check_fits`), not this machine. `tool_hosts`: the hosts besides loopback an
    agent task's tool_host may name (the serve flag's and the caller's own address). `find_run`:
    the registry's lookup of a run by id, for an init_adapter given by run_id (`check_init_adapter`).
    """
    out = pb.TrainRequest()
    out.CopyFrom(req)
    data_root = Path(data_root)
    if out.run_id:
        validate_run_id(out.run_id)
    if out.base_model:
        check_base_model(out.base_model, data_root, "base_model")
    if out.mode == pb.TRAIN_MODE_UNSPECIFIED:
        out.mode = pb.TRAIN_MODE_GRPO
    if out.mode not in MODE_CHECKS:
        raise InvalidArgument("mode", f"unknown mode {out.mode}")
    if not out.HasField("dataset"):
        raise InvalidArgument("dataset", "is required")
    if out.HasField("agent"):
        if out.mode not in (pb.TRAIN_MODE_GRPO, pb.TRAIN_MODE_SFT):
            raise InvalidArgument("agent", "agent tasks train with GRPO or SFT only (TRAIN_MODE_GRPO, TRAIN_MODE_SFT)")
        check_agent_spec(out.agent, "agent", tool_hosts)
    check_runtime(out.runtime, data_root, training=True, this_machine=this_machine)
    check_chat_template(out.runtime, out.base_model, data_root)
    if out.HasField("init_adapter"):
        check_init_adapter(out, data_root, find_run)
    MODE_CHECKS[out.mode](out, data_root)
    check_target_modules(out.lora, out.base_model, data_root, model_dir_for(out.base_model, data_root))
    return out


# ---------------------------------------------------------------------------------------------
# TRAIN_MODE_GRPO


def validate_grpo_request(out: pb.TrainRequest, data_root: Path) -> None:
    """Fill every GRPO default into `out` in place, or raise naming the field (an agent spec was
    checked by `validate_train_request`, which knows the tool hosts allowed)."""
    agent = out.HasField("agent")
    if agent:
        if out.rewards:
            raise InvalidArgument("rewards", "must be empty for an agent task: its scorers (agent.scorers) are the reward")
    elif not out.rewards:
        for spec in DEFAULT_REWARDS:
            out.rewards.add(name=spec["name"], weight=spec["weight"])
    if not agent:
        check_reward_specs(out.rewards, "rewards", check_weight=True)
    g = out.grpo
    check_schedule(g)
    check_trl_knobs(g)
    if (g.per_device_train_batch_size * g.gradient_accumulation_steps) % g.num_generations:
        raise InvalidArgument(
            "grpo.per_device_train_batch_size",
            f"per_device_train_batch_size * gradient_accumulation_steps = "
            f"{g.per_device_train_batch_size * g.gradient_accumulation_steps} must be divisible by "
            f"num_generations = {g.num_generations} (each prompt's group must be complete)")
    if g.use_vllm:
        if not cuda_available() or out.runtime.device == "cpu":
            raise FailedPrecondition("grpo.use_vllm", "vLLM generation needs a CUDA device")
        if importlib.util.find_spec("vllm") is None:
            raise FailedPrecondition("grpo.use_vllm", "the vllm package is not installed (pip install vllm)")
    if not out.HasField("init_adapter"):  # else the adapter's own LoRA config is trained (lora stays unset)
        check_lora(out.lora)
    rows = task_rows(out.dataset, data_root, "dataset", need_answers=not agent)
    ho = out.held_out
    fill_defaults(ho, HELD_OUT)
    check_knobs(ho, HELD_OUT, "held_out.")
    if ho.HasField("dataset"):
        held = task_rows(ho.dataset, data_root, "held_out.dataset", need_answers=not agent)
        if len(held) < ho.num_prompts:
            raise InvalidArgument("held_out.num_prompts",
                                  f"{ho.num_prompts} requested but held_out.dataset has {len(held)} rows")
        train_n = len(rows)
    else:
        train_n = len(rows) - ho.num_prompts
        if train_n < 1:
            raise InvalidArgument("held_out.num_prompts",
                                  f"{ho.num_prompts} held-out prompts leave no training rows (dataset has {len(rows)})")
    prompts_per_step = g.per_device_train_batch_size * g.gradient_accumulation_steps // g.num_generations
    if train_n < prompts_per_step:
        raise InvalidArgument("dataset", f"{train_n} training rows, but one step needs {prompts_per_step} prompts")


def check_trl_knobs(g: pb.GrpoConfig) -> None:
    """Fill and check GRPO's knobs; what this machine cannot honour is FAILED_PRECONDITION naming
    the field: the vLLM importance-sampling knobs set without grpo.use_vllm (they only act on vLLM's
    rollouts; left unset, TRL's default, in the effective request), use_liger_kernel without the
    liger-kernel package."""
    use_vllm = g.HasField("use_vllm") and g.use_vllm
    if not use_vllm:
        for name in VLLM_ONLY_FIELDS:
            if g.HasField(name):
                raise FailedPrecondition(f"grpo.{name}", "only applies to vLLM rollouts: set grpo.use_vllm "
                                                          "(needs CUDA and the vllm package) or leave it unset")
    fill_defaults(g, GRPO, only=tuple(n for n in GRPO if use_vllm or n not in VLLM_ONLY_FIELDS))
    check_knobs(g, GRPO, "grpo.")
    if g.use_liger_kernel and importlib.util.find_spec("liger_kernel") is None:
        raise FailedPrecondition("grpo.use_liger_kernel", "the liger-kernel package is not installed "
                                                          "(pip install liger-kernel)")


# ---------------------------------------------------------------------------------------------
# TRAIN_MODE_RANKED_PREFERENCE


def validate_preference_request(req: pb.TrainRequest, data_root: Path) -> None:
    """Fill the ranked-preference defaults into `req` in place, or raise naming the field.

    Used fields: dataset (ranked groups), preference, lora, and from grpo only the schedule knobs
    (`config.SCHEDULE`). GRPO-only knobs, rewards and held_out are refused rather than silently
    ignored.
    """
    g = req.grpo
    for name in GRPO_ONLY_FIELDS:
        if g.HasField(name):
            hint = " (use preference.beta)" if name == "beta" else ""
            raise InvalidArgument(f"grpo.{name}", f"does not apply to TRAIN_MODE_RANKED_PREFERENCE{hint}")
    if req.rewards:
        raise InvalidArgument("rewards", "GRPO only: ranked-preference training learns from the rankings")
    if req.HasField("held_out"):
        raise InvalidArgument("held_out", "GRPO only: use preference.held_out / preference.num_held_out_groups")
    check_schedule(g, PREFERENCE_SCHEDULE_DEFAULTS)
    check_lora(req.lora, PREFERENCE_LORA_DEFAULTS)
    p = req.preference
    fill_defaults(p, PREFERENCE)
    check_knobs(p, PREFERENCE, "preference.", only=("beta",))
    groups = load_ranked_groups(req.dataset, data_root, "dataset", need_ranks=True)
    if p.HasField("held_out"):
        held = load_ranked_groups(p.held_out, data_root, "preference.held_out", need_ranks=True)
        set_default(p, "num_held_out_groups", min(MAX_HELD_OUT_GROUPS_DEFAULT, len(held)))
        if not 1 <= p.num_held_out_groups <= len(held):
            raise InvalidArgument("preference.num_held_out_groups",
                                  f"must be in [1, {len(held)}] (preference.held_out has {len(held)} groups), "
                                  f"got {p.num_held_out_groups}")
    else:
        set_default(p, "num_held_out_groups", max(1, min(MAX_HELD_OUT_GROUPS_DEFAULT, len(groups) // 5)))
        if p.num_held_out_groups < 1:
            raise InvalidArgument("preference.num_held_out_groups", "must be >= 1")
        if len(groups) - p.num_held_out_groups < 1:
            raise InvalidArgument("preference.num_held_out_groups",
                                  f"{p.num_held_out_groups} held-out groups leave no training groups "
                                  f"(dataset has {len(groups)})")


# ---------------------------------------------------------------------------------------------
# TRAIN_MODE_SFT (the warm start) and init_adapter (GRPO from it)

SFT_SAMPLING_FIELDS = ("temperature", "top_p", "max_completion_length")
"""The GrpoConfig knobs an SFT run reads: how its held-out episodes sample, as the GRPO run that
starts from it will; every other GrpoConfig knob is refused in TRAIN_MODE_SFT."""


def validate_sft_request(out: pb.TrainRequest, data_root: Path) -> None:
    """Fill the warm start's defaults into `out` in place, or raise naming the field. Used: agent
    (required), dataset (demonstration episodes, `agents.demonstrations`), held_out (its dataset of
    tasks required: the held-out episodes), sft, lora, and grpo's SFT_SAMPLING_FIELDS."""
    if not out.HasField("agent"):
        raise InvalidArgument("agent", "is required for TRAIN_MODE_SFT: its tools and system prompt write the "
                                       "demonstrations' prompts, its tool host and scorers run the held-out episodes")
    if out.rewards:
        raise InvalidArgument("rewards", "must be empty for TRAIN_MODE_SFT (the held-out episodes use agent.scorers)")
    if out.HasField("preference"):
        raise InvalidArgument("preference", "does not apply to TRAIN_MODE_SFT")
    g = out.grpo
    for name in (*SCHEDULE, *GRPO):
        if name not in SFT_SAMPLING_FIELDS and g.HasField(name):
            raise InvalidArgument(f"grpo.{name}", "does not apply to TRAIN_MODE_SFT (use sft.*; grpo.temperature, "
                                                  "top_p and max_completion_length set the held-out sampling)")
    fill_defaults(g, {**SCHEDULE, **GRPO}, only=SFT_SAMPLING_FIELDS)
    check_knobs(g, {**SCHEDULE, **GRPO}, "grpo.", only=SFT_SAMPLING_FIELDS)
    fill_defaults(out.sft, SFT)
    check_knobs(out.sft, SFT, "sft.")
    check_lora(out.lora)
    load_demonstrations(out.dataset, data_root, AgentSetup.from_spec(out.agent))
    ho = out.held_out
    if not ho.HasField("dataset"):
        raise InvalidArgument("held_out.dataset", "is required for TRAIN_MODE_SFT: the tasks whose episodes are "
                                                  "measured at step 0 and at the end")
    fill_defaults(ho, HELD_OUT)
    check_knobs(ho, HELD_OUT, "held_out.")
    held = task_rows(ho.dataset, data_root, "held_out.dataset", need_answers=False)
    if len(held) < ho.num_prompts:
        raise InvalidArgument("held_out.num_prompts", f"{ho.num_prompts} requested but held_out.dataset has {len(held)} rows")


def check_init_adapter(out: pb.TrainRequest, data_root: Path, find_run) -> None:
    """init_adapter names a usable adapter for a GRPO run, or INVALID_ARGUMENT naming the field:
    the mode, a `lora` set beside it (the adapter's own config is trained), an unknown run, a run
    without an adapter, a missing folder, an adapter made for another base."""
    if out.mode != pb.TRAIN_MODE_GRPO:
        raise InvalidArgument("init_adapter", f"only a GRPO run starts from an adapter, not {pb.TrainMode.Name(out.mode)}")
    if out.HasField("lora"):
        raise InvalidArgument("lora", "must be unset with init_adapter: the adapter's own LoRA config is trained")
    ref = out.init_adapter
    try:
        folder = resolve_adapter(ref, "init_adapter", data_root, find_run)
        where = f"init_adapter.{ref.WhichOneof('source')}"
        check_adapter_fits_base(folder, where, f"init_adapter {folder.name}", out.base_model, data_root,
                                model_dir_for(out.base_model, data_root))
    except RequestError as err:  # NOT_FOUND / FAILED_PRECONDITION in Evaluate: here the request is wrong
        raise InvalidArgument(err.field, err.message) from None


MODE_CHECKS = {pb.TRAIN_MODE_GRPO: validate_grpo_request,
               pb.TRAIN_MODE_RANKED_PREFERENCE: validate_preference_request,
               pb.TRAIN_MODE_SFT: validate_sft_request}
"""The modes a TrainRequest may name; `worker.MODES` trains the same ones."""
