"""TRL's configs are built from config.py's tables: every knob with a TRL name (`Knob.trl`) reaches
GRPOConfig / DPOConfig / LoraConfig with the request's value, under that name.

The requests set every such knob away from TRL's own default, so a knob that stopped being passed
would show up as TRL's default here. Building a config trains nothing.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from google.protobuf import json_format

from _builders import preference_request, small_request
from py_trainer.core import config
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.server.validate import validate_train_request
from py_trainer.training.skeleton import lora_config, trainer_args
from py_trainer.training.train_grpo import grpo_config
from py_trainer.training.train_preference import PreferenceMode, dpo_config

SCHEDULE = {"learning_rate": 3e-3, "max_steps": 7, "per_device_train_batch_size": 12, "gradient_accumulation_steps": 2,
            "warmup_ratio": 0.25, "seed": 5, "logging_steps": 3, "save_steps": 4, "max_prompt_length": 100,
            "max_completion_length": 24}
GRPO = {"num_generations": 4, "beta": 0.05, "epsilon": 0.3, "epsilon_high": 0.28, "loss_type": "grpo",
        "scale_rewards": "batch", "temperature": 0.9, "top_p": 0.95, "mask_truncated_completions": True,
        "vllm_mode": "server", "vllm_gpu_memory_utilization": 0.5,
        "importance_sampling_level": "sequence", "num_iterations": 2, "top_k": 5, "min_p": 0.05,
        "repetition_penalty": 1.1}
# True needs CUDA and vllm / liger-kernel (their False is TRL's default too); the vLLM importance
# sampling knobs need use_vllm (test_vllm_knobs_reach_grpoconfig sets them on an effective request)
NOT_SET = {"use_vllm", "use_liger_kernel", *config.VLLM_ONLY_FIELDS}
VLLM = {"vllm_importance_sampling_correction": False, "vllm_importance_sampling_mode": "token_truncate",
        "vllm_importance_sampling_cap": 5.0}
LORA = {"r": 8, "alpha": 24.0, "dropout": 0.05, "target_modules": ["q_proj", "v_proj"]}


def trl_value(value):
    return sorted(value) if isinstance(value, (list, set)) else value


def assert_arrives(cfg, msg, table, *, skip=()):
    """Every knob of `table` with a TRL name has its value in `msg` under that name in `cfg`;
    returns the TRL names checked."""
    checked = []
    for name, knob in table.items():
        if name in skip:
            continue
        value = getattr(msg, name)
        value = list(value) if msg.DESCRIPTOR.fields_by_name[name].is_repeated else value
        for trl_name in config.trl_names(knob):
            assert trl_value(getattr(cfg, trl_name)) == trl_value(value), (name, trl_name)
            checked.append(trl_name)
    return checked


def assert_not_trl_defaults(cfg_cls, cfg, names):
    """The values differ from TRL's own defaults, so a knob that was not passed cannot pass."""
    defaults = {f.name: f.default for f in dataclasses.fields(cfg_cls)}
    same = [n for n in names if trl_value(getattr(cfg, n)) == trl_value(defaults.get(n))]
    assert same == [], f"set these away from TRL's defaults to make the check mean something: {same}"


def effective(req: pb.TrainRequest, tmp_path) -> pb.TrainRequest:
    return validate_train_request(req, tmp_path)


def args_for(req: pb.TrainRequest, tmp_path, skip=()) -> dict:
    return trainer_args(tmp_path, torch.device("cpu"), torch.float32, req.grpo, req.runtime.report_to, skip=skip)


def test_every_grpo_knob_with_a_trl_name_reaches_grpoconfig(tmp_path):
    from trl import GRPOConfig

    req = small_request("trl-names", **SCHEDULE, **GRPO)
    req.runtime.gradient_checkpointing = False  # ours is False, TRL's True
    req.lora.CopyFrom(json_format.ParseDict(LORA, pb.LoraSettings()))
    eff = effective(req, tmp_path)
    cfg = grpo_config(eff, args_for(eff, tmp_path), [1.0, 0.2])
    names = (assert_arrives(cfg, eff.grpo, config.SCHEDULE) + assert_arrives(cfg, eff.grpo, config.GRPO, skip=config.VLLM_ONLY_FIELDS)
             + assert_arrives(cfg, eff.runtime, config.RUNTIME))
    assert set(names) >= {"learning_rate", "warmup_steps", "seed", "data_seed", "num_generations", "beta",
                          "max_completion_length", "gradient_checkpointing"}
    assert cfg.warmup_steps == 0.25  # transformers 5 reads a float in [0, 1) as a ratio of max_steps
    assert cfg.reward_weights == [1.0, 0.2]
    assert_not_trl_defaults(GRPOConfig, cfg, [n for n in names if n not in NOT_SET])
    assert {n for n, k in {**config.SCHEDULE, **config.GRPO}.items() if config.trl_names(k)} - set(SCHEDULE) - set(GRPO) \
        == NOT_SET, "a knob with a TRL name is missing from this test's request"


def test_vllm_knobs_reach_grpoconfig_under_trl_names(tmp_path):
    """The vLLM importance-sampling knobs arrive under TRL 1.16's names (cap -> clip_max) when set;
    unset (a run without vLLM) they leave TRL's defaults."""
    from trl import GRPOConfig

    eff = effective(small_request("trl-vllm"), tmp_path)
    assert not any(eff.grpo.HasField(n) for n in config.VLLM_ONLY_FIELDS)
    plain = grpo_config(eff, args_for(eff, tmp_path), [1.0, 0.2])
    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    assert [getattr(plain, n) for n in ("vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
                                        "vllm_importance_sampling_clip_max")] \
        == [defaults[n] for n in ("vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
                                  "vllm_importance_sampling_clip_max")]
    for name, value in VLLM.items():  # as validate fills them when use_vllm is set
        setattr(eff.grpo, name, value)
    cfg = grpo_config(eff, args_for(eff, tmp_path), [1.0, 0.2])
    names = assert_arrives(cfg, eff.grpo, {n: config.GRPO[n] for n in VLLM})
    assert names == ["vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
                     "vllm_importance_sampling_clip_max"]
    assert_not_trl_defaults(GRPOConfig, cfg, names)
    assert set(VLLM) == set(config.VLLM_ONLY_FIELDS)


def test_every_preference_knob_with_a_trl_name_reaches_dpoconfig(tmp_path):
    from trl import DPOConfig

    sched = {k: v for k, v in SCHEDULE.items() if k != "max_completion_length"}
    req = preference_request(grpo=sched, preference={"beta": 0.3})
    eff = effective(req, tmp_path)
    cfg = dpo_config(eff, args_for(eff, tmp_path, PreferenceMode.trl_skip), max_length=77, gradient_checkpointing=True)
    names = (assert_arrives(cfg, eff.grpo, config.SCHEDULE, skip=PreferenceMode.trl_skip)
             + assert_arrives(cfg, eff.preference, config.PREFERENCE))
    assert "beta" in names and "warmup_steps" in names
    assert_not_trl_defaults(DPOConfig, cfg, names)
    # DPOConfig has no max_completion_length: the mode's max_length (prompt + completion) stands for it
    assert PreferenceMode.trl_skip == ("max_completion_length",)
    assert not hasattr(cfg, "max_completion_length") and cfg.max_length == 77
    assert cfg.loss_type == ["sigmoid"]


@pytest.mark.parametrize("modules, want", [(["q_proj", "v_proj"], {"q_proj", "v_proj"}), ([], "all-linear")])
def test_every_lora_knob_reaches_loraconfig(modules, want):
    lora = json_format.ParseDict({**LORA, "target_modules": modules}, pb.LoraSettings())
    cfg = lora_config(lora)
    assert (cfg.r, cfg.lora_alpha, cfg.lora_dropout) == (8, 24.0, 0.05)
    assert (set(cfg.target_modules) if isinstance(want, set) else cfg.target_modules) == want
    assert cfg.task_type == "CAUSAL_LM"
    if modules:
        assert_arrives(cfg, lora, config.LORA)


@pytest.mark.parametrize("kept, expected", [(0, None), (3, 3)])
def test_save_total_limit_reaches_training_arguments_with_0_as_keep_all(tmp_path, kept, expected):
    """grpo.save_total_limit (default 2): 0 keeps every checkpoint (transformers' None), so
    `agent select` can choose among all of them."""
    import torch

    from py_trainer.training.skeleton import trainer_args

    g = pb.GrpoConfig(save_total_limit=kept)
    assert trainer_args(tmp_path, torch.device("cpu"), torch.float32, g)["save_total_limit"] == expected
