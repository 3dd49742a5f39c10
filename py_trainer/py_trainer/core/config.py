"""Every knob of the contract, once: one table per message of ``name -> Knob(default, range, help)``.

As in TRL (``_BaseConfig`` shared by GRPOConfig and DPOConfig), the schedule knobs both training
modes use are written once (`SCHEDULE`, with GRPO's defaults) and the ranked-preference mode
overrides only their defaults (`PREFERENCE_SCHEDULE_DEFAULTS`). The validators below are built
from the tables: `fill_defaults` sets every unset optional knob, `check_knobs` checks each one
against its range and raises `InvalidArgument` naming the field as the user wrote it
(``grpo.num_generations: must be in [2, 256] (GRPO needs a group), got 1``). A knob's TRL
column (`Knob.trl`) names the field of TRL's config it sets, so the training modes build
GRPOConfig / DPOConfig / LoraConfig from the tables (`trl_kwargs`) instead of copying knobs by
hand (tests/test_trl_config.py checks each one arrives). `py-trainer defaults` prints the tables,
and tests/test_config.py holds the proto comments ("Default: ...") equal to them. Cross-field
checks (batch divisible by the group size, held-out size vs dataset) live in `validate.py`.

Units: learning rate per optimizer step; lengths in tokens; warmup as a fraction of max_steps;
rewards as fractions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from py_trainer.core.devices import cuda_available, cuda_device_count
from py_trainer.core.errors import FailedPrecondition, InvalidArgument
from py_trainer.core.paths import resolve_under

# ---------------------------------------------------------------------------------------------
# Knobs and their ranges


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(x)


@dataclass(frozen=True)
class Range:
    """A numeric range; `lo`/`hi` of None are unbounded. `note` is appended to the error."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    note: str = ""
    text: str = ""

    def describe(self) -> str:
        if self.text:
            return self.text
        if self.hi is None:
            return f"{'>' if self.lo_open else '>='} {_num(self.lo)}"
        return (f"in {'(' if self.lo_open else '['}{_num(self.lo)}, {_num(self.hi)}"
                f"{')' if self.hi_open else ']'}")

    def contains(self, x: float) -> bool:
        if self.lo is not None and (x <= self.lo if self.lo_open else x < self.lo):
            return False
        if self.hi is not None and (x >= self.hi if self.hi_open else x > self.hi):
            return False
        return True


@dataclass(frozen=True)
class Choices:
    values: tuple[str, ...]

    def describe(self) -> str:
        return f"one of {self.values}"

    def contains(self, x: str) -> bool:
        return x in self.values


@dataclass(frozen=True)
class Knob:
    """One optional field of a message: its default, its allowed values, and what it does."""

    default: Any
    allowed: Range | Choices | None
    help: str
    default_doc: str = ""
    """How a computed default (default None) is written in the proto comment."""
    trl: str | tuple[str, ...] = ""
    """The field(s) of TRL's config (GRPOConfig / DPOConfig, which extend transformers'
    TrainingArguments; PEFT's LoraConfig for LoraSettings) this knob sets, value unchanged
    (`trl_kwargs`); empty = the knob is ours alone (validation, measurement, the worker)."""


def render_default(value: Any) -> str:
    """A default as the proto comments and `py-trainer defaults` write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render_default(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


SEED_RANGE = Range(0, 2**32, hi_open=True, text="< 2^32")
MAX_ROWS = 200_000

# ---------------------------------------------------------------------------------------------
# The tables (one per message; TrainRequest.grpo = SCHEDULE + GRPO)

SCHEDULE: dict[str, Knob] = {
    # Sized for the embedded tiny model (hidden 128): measured 0.11 -> 0.50 held-out reward in 30
    # steps on a learnable objective at 2e-3, nothing at 5e-4, collapse (KL ~6) at 5e-3. LoRA on a
    # 0.5-7B model wants 1e-5..2e-4; TRL's own 1e-6 is for full fine-tuning.
    "learning_rate": Knob(2e-3, Range(0, 1, lo_open=True), "AdamW peak learning rate per optimizer step",
                          trl="learning_rate"),
    "max_steps": Knob(60, Range(1, 1_000_000), "optimizer steps to train", trl="max_steps"),
    "per_device_train_batch_size": Knob(16, Range(1, 4096),
                                        "completions (GRPO) or pairs (ranked preference) per device per step",
                                        trl="per_device_train_batch_size"),
    "gradient_accumulation_steps": Knob(1, Range(1, 1024), "micro-batches per optimizer step",
                                        trl="gradient_accumulation_steps"),
    # Adam's first steps move every LoRA weight by ~lr, signal or not. transformers 5 dropped
    # warmup_ratio: its warmup_steps reads a float in [0, 1) as a ratio of max_steps, so the value
    # passes unchanged under the new name (the range keeps it below 1).
    "warmup_ratio": Knob(0.1, Range(0, 1, hi_open=True), "linear warmup as a fraction of max_steps",
                         trl="warmup_steps"),
    "seed": Knob(0, SEED_RANGE, "seeds torch, data order and the held-out sampling", trl=("seed", "data_seed")),
    "logging_steps": Knob(1, Range(1, None, text="in [1, max_steps]"),
                          "steps between logged train_step events (and held-out monitoring in ranked preference)",
                          trl="logging_steps"),
    "save_steps": Knob(20, Range(1, None), "steps between checkpoints", trl="save_steps"),
    # ours, not TRL's name-for-name: 0 (keep all) is transformers' None (training.trainer_args)
    "save_total_limit": Knob(2, Range(0, 100_000), "checkpoints kept, newest first; 0 = keep every checkpoint"),
    "max_prompt_length": Knob(256, Range(1, 131_072), "prompt tokens held-out scoring keeps (left-truncated); "
                                                       "TRL trains on whole prompts"),
    # GRPOConfig's field; DPOConfig has none: ranked preference sets its max_length to
    # max_prompt_length + max_completion_length (train_preference.py)
    "max_completion_length": Knob(32, Range(1, 32_768), "tokens generated per completion (GRPO) or kept per response",
                                  trl="max_completion_length"),
}

GRPO: dict[str, Knob] = {
    "num_generations": Knob(8, Range(2, 256, note="GRPO needs a group"), "completions per prompt (the group, G)",
                            trl="num_generations"),
    # > 0 so TRL logs `kl` (its own default is 0); DeepSeekMath used 0.04
    "beta": Knob(0.04, Range(0, None), "KL coefficient against the reference model (0 = no KL term, no kl metric)",
                 trl="beta"),
    "epsilon": Knob(0.2, Range(0, 1, lo_open=True, hi_open=True), "lower clip range of the importance ratio",
                    trl="epsilon"),
    "epsilon_high": Knob(0.2, Range(0, 10, lo_open=True, hi_open=True), "upper clip range (DAPO's clip-higher)",
                         trl="epsilon_high"),
    "loss_type": Knob("dapo", Choices(("grpo", "dr_grpo", "dapo", "bnpo")), "TRL's loss normalisation (TRL's default)",
                      trl="loss_type"),
    "scale_rewards": Knob("group", Choices(("group", "batch", "none")), "advantage scaling: group std, batch std or none",
                          trl="scale_rewards"),
    "temperature": Knob(1.0, Range(0, 10, lo_open=True), "sampling temperature of the rollouts", trl="temperature"),
    "top_p": Knob(1.0, Range(0, 1, lo_open=True), "nucleus sampling of the rollouts", trl="top_p"),
    "mask_truncated_completions": Knob(False, None, "exclude completions cut at max_completion_length from the loss",
                                       trl="mask_truncated_completions"),
    "use_vllm": Knob(False, None, "generate rollouts with vLLM (needs CUDA and the vllm package)", trl="use_vllm"),
    "vllm_mode": Knob("colocate", Choices(("colocate", "server")), "vLLM in the training process or a trl vllm-serve",
                      trl="vllm_mode"),
    "vllm_gpu_memory_utilization": Knob(0.3, Range(0, 1, lo_open=True), "GPU memory share of vLLM in colocate mode",
                                        trl="vllm_gpu_memory_utilization"),
    # TRL 1.16's knobs, passed through by name with TRL's defaults (TRL's min_p default is None:
    # 0.0 keeps every token, the same sampling)
    "importance_sampling_level": Knob("token", Choices(("token", "sequence")),
                                      "token (GRPO) or sequence (GSPO: one length-normalised ratio per completion)",
                                      trl="importance_sampling_level"),
    "num_iterations": Knob(1, Range(1, 64), "policy updates per generation batch (mu)", trl="num_iterations"),
    "vllm_importance_sampling_correction": Knob(True, None, "correct vLLM's sampling logprobs against the trainer's "
                                                "(only with use_vllm)", trl="vllm_importance_sampling_correction"),
    "vllm_importance_sampling_mode": Knob("sequence_mask", Choices(("token_truncate", "token_mask", "sequence_truncate",
                                                                    "sequence_mask")),
                                          "how the vLLM importance ratio is truncated or masked (only with use_vllm)",
                                          trl="vllm_importance_sampling_mode"),
    "vllm_importance_sampling_cap": Knob(3.0, Range(1, None), "upper bound C of the vLLM importance ratio "
                                         "(only with use_vllm)", trl="vllm_importance_sampling_clip_max"),
    "top_k": Knob(0, Range(0, 1_000_000), "top-k filtering of the rollouts (0 = off)", trl="top_k"),
    "min_p": Knob(0.0, Range(0, 1), "min-p sampling of the rollouts (0 = off)", trl="min_p"),
    "repetition_penalty": Knob(1.0, Range(0, 10, lo_open=True), "repetition penalty of the rollouts (1 = none)",
                               trl="repetition_penalty"),
    "use_liger_kernel": Knob(False, None, "Liger kernels for the model and the GRPO loss (needs liger-kernel)",
                             trl="use_liger_kernel"),
}
GRPO_ONLY_FIELDS = tuple(GRPO)
VLLM_ONLY_FIELDS = ("vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
                    "vllm_importance_sampling_cap")
"""Knobs that only mean something with use_vllm: refused when set without it, left unset (TRL's
default) in the effective request of a run that does not use vLLM."""

PREFERENCE_SCHEDULE_DEFAULTS: dict[str, Any] = {
    # with alpha/r = 2 and Adam, each LoRA weight moves by about lr per step; 5e-5 is the top of the
    # range LoRA-DPO recipes use on billion-parameter models and still moves the embedded model
    "learning_rate": 5e-5,
    "max_steps": 100,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "warmup_ratio": 0.2,
    "seed": 0,
    "logging_steps": 5,
    "save_steps": 50,
    "max_prompt_length": 512,
    "max_completion_length": 512,  # DPOConfig.max_length = prompt + completion = 1024, TRL's default
}

MAX_HELD_OUT_GROUPS_DEFAULT = 16
PREFERENCE: dict[str, Knob] = {
    "beta": Knob(0.1, Range(0, 100, lo_open=True), "DPO beta in the implicit reward beta * log(pi / pi_ref) (TRL's)",
                 trl="beta"),
    # None: computed from the data (16, or a fifth of the dataset when that is smaller)
    "num_held_out_groups": Knob(None, Range(1, None), "held-out groups for monitoring",
                                default_doc="min(16, groups in preference.held_out), else min(16, dataset groups / 5), "
                                            "at least 1"),
}

LORA: dict[str, Knob] = {
    "r": Knob(16, Range(1, 1024), "LoRA rank", trl="r"),
    "alpha": Knob(32.0, Range(0, None, lo_open=True), "LoRA alpha (scale = alpha / r)", trl="lora_alpha"),
    "dropout": Knob(0.0, Range(0, 1, hi_open=True), "LoRA dropout", trl="lora_dropout"),
    "target_modules": Knob([], None, "module names to adapt; empty = all linear layers (GRPO)", trl="target_modules"),
}
PREFERENCE_LORA_DEFAULTS: dict[str, Any] = {"r": 64, "alpha": 128.0, "dropout": 0.0,
                                            "target_modules": ["q_proj", "v_proj"]}

HELD_OUT: dict[str, Knob] = {
    "num_prompts": Knob(32, Range(1, 10_000), "held-out prompts for the step-0 and end reward"),
    "samples_per_prompt": Knob(4, Range(1, 64), "samples per held-out prompt (K)"),
}

RUNTIME: dict[str, Knob] = {
    "device": Knob("auto", Choices(("auto", "cpu", "cuda")), "auto = cuda when available"),
    "precision": Knob("", Choices(("fp32", "bf16", "fp16")), "empty = fp32 on CPU, bf16 on CUDA"),
    "num_processes": Knob(1, Range(1, 64), "ranks over all nodes; >1 launches the worker through accelerate launch"),
    "num_nodes": Knob(1, Range(1, 64), "machines the ranks span, num_processes / num_nodes each (Ray, or Slurm)"),
    # GRPO passes it to GRPOConfig; ranked preference checkpoints exactly when on CUDA (train_preference.py)
    "gradient_checkpointing": Knob(False, None, "trade compute for memory (also disables the KV cache in generation)",
                                   trl="gradient_checkpointing"),
    "prompt_format": Knob("auto", Choices(("auto", "raw", "chat")),
                          "raw text, or one user message through the chat template; auto = chat when there is one"),
    "accelerate_config": Knob("", None, "accelerate config file under the data root (DeepSpeed / FSDP), passed through"),
    "attn_implementation": Knob("", None, "transformers attn_implementation; empty = the model's default"),
    "report_to": Knob(["tensorboard"], None, "transformers' report_to: tensorboard = event files in the run "
                                             "folder's tensorboard/; none = only our events"),
}
# transformers' integration names (TrainingArguments.report_to); each but "none" needs its package
REPORT_TO_CHOICES = ("none", "tensorboard", "wandb", "mlflow", "comet_ml", "clearml", "dvclive", "neptune",
                     "trackio", "swanlab", "azure_ml", "codecarbon", "flyte", "dagshub")

EVALUATE: dict[str, Knob] = {
    "samples_per_task": Knob(1, Range(1, 64), "samples per task (K)"),
    "temperature": Knob(0.0, Range(0, 10, note="0 = greedy"), "0 = greedy decoding"),
    "top_p": Knob(1.0, Range(0, 1, lo_open=True), "nucleus sampling (ignored when greedy)"),
    "max_new_tokens": Knob(32, Range(1, 32_768), "tokens generated per completion"),
    "seed": Knob(0, None, "sampling seed"),
    "batch_size": Knob(64, Range(1, 4096), "prompts per generate() call"),
}

MAX_K, MAX_SAMPLE_PROMPTS, MAX_OVERGENERATE = 64, 10_000, 256
SAMPLE: dict[str, Knob] = {
    "temperature": Knob(1.0, Range(0, 10, lo_open=True), "sampling temperature"),
    "max_new_tokens": Knob(64, Range(1, 32_768), "tokens generated per response"),
    "seed": Knob(0, SEED_RANGE, "seed of the per-response seeds"),
}

AGENT: dict[str, Knob] = {
    "max_turns": Knob(4, Range(1, 32), "model turns per episode"),
    "max_tool_calls": Knob(4, Range(0, 64), "tool calls per episode"),
    "tool_timeout_ms": Knob(5000, Range(1, 600_000), "per-tool-call timeout (ms)"),
    "max_tool_output_chars": Knob(2000, Range(1, 100_000), "a tool's output is cut to this many characters"),
}
AGENT_PROGRAM: dict[str, Knob] = {"timeout_ms": Knob(120_000, Range(1, 3_600_000), "one rollout of an agent program (ms)")}

# TRAIN_MODE_SFT (train_sft.py), TRL SFTConfig's names; sized for LoRA on a 135M-0.5B model (issue 53's probe)
SFT: dict[str, Knob] = {
    "max_steps": Knob(100, Range(1, 1_000_000), "optimizer steps to train", trl="max_steps"),
    "learning_rate": Knob(2e-4, Range(0, 1, lo_open=True), "AdamW peak lr, linear decay to 0", trl="learning_rate"),
    "per_device_train_batch_size": Knob(8, Range(1, 4096), "demonstrations per step", trl="per_device_train_batch_size"),
    "max_length": Knob(1024, Range(1, 131_072), "tokens kept per demonstration (cut at the end)", trl="max_length"),
    "seed": Knob(0, SEED_RANGE, "seeds torch, data order and the held-out sampling", trl=("seed", "data_seed")),
}

DEFAULT_REWARDS = ({"name": "exact_match", "weight": 1.0}, {"name": "format", "weight": 0.2})
DEFAULT_GRADERS = ({"name": "exact_match"},)

# message name in the proto -> (table, defaults of the ranked-preference mode where they differ)
TABLES: dict[str, tuple[dict[str, Knob], Mapping[str, Any]]] = {
    "GrpoConfig": ({**SCHEDULE, **GRPO}, PREFERENCE_SCHEDULE_DEFAULTS),
    "LoraSettings": (LORA, PREFERENCE_LORA_DEFAULTS),
    "HeldOutSettings": (HELD_OUT, {}),
    "PreferenceSettings": (PREFERENCE, {}),
    "RuntimeSettings": (RUNTIME, {}),
    "EvaluateRequest": (EVALUATE, {}),
    "SampleGroupsRequest": (SAMPLE, {}),
    "AgentSpec": (AGENT, {}),
    "AgentProgram": (AGENT_PROGRAM, {}),
    "SftConfig": (SFT, {}),
}


def default_text(knob: Knob, preference_default: Any = None, has_preference: bool = False) -> str:
    """"Default: X" (one mode) or "Default: X (GRPO), Y (ranked preference)"."""
    if knob.default is None:
        return f"Default: {knob.default_doc}"
    text = f"Default: {render_default(knob.default)}"
    if has_preference and preference_default != knob.default:
        text += f" (GRPO), {render_default(preference_default)} (ranked preference)"
    return text


# ---------------------------------------------------------------------------------------------
# Validators built from the tables


def finite(field: str, x: float) -> float:
    """`x`, or InvalidArgument naming `field` when it is NaN or infinite."""
    if not math.isfinite(x):
        raise InvalidArgument(field, f"must be a finite number, got {x}")
    return x


def set_default(msg, name: str, value) -> None:
    """Set an optional scalar field when the request left it unset."""
    if not msg.HasField(name):
        setattr(msg, name, value)


def fill_defaults(msg, table: Mapping[str, Knob], overrides: Mapping[str, Any] | None = None,
                  only: tuple[str, ...] | None = None) -> None:
    """Set every unset knob of `msg` (optional scalars; empty repeated fields) to its default."""
    overrides = overrides or {}
    for name, knob in table.items():
        if only is not None and name not in only:
            continue
        value = overrides.get(name, knob.default)
        if value is None:
            continue
        if isinstance(value, list):
            if not getattr(msg, name):
                getattr(msg, name).extend(value)
        elif msg.DESCRIPTOR.fields_by_name[name].has_presence:
            set_default(msg, name, value)
        elif not getattr(msg, name):
            setattr(msg, name, value)


def check_knob(field: str, knob: Knob, value) -> None:
    """Raise InvalidArgument naming `field` when `value` is outside the knob's range."""
    if knob.allowed is None:
        return
    if isinstance(value, float):
        finite(field, value)
    if not knob.allowed.contains(value):
        note = f" ({knob.allowed.note})" if getattr(knob.allowed, "note", "") else ""
        got = repr(value) if isinstance(value, str) else value
        raise InvalidArgument(field, f"must be {knob.allowed.describe()}{note}, got {got}")


def check_knobs(msg, table: Mapping[str, Knob], prefix: str, only: tuple[str, ...] | None = None) -> None:
    """Check every set knob of `msg`; errors name ``prefix + name`` (e.g. ``grpo.beta``)."""
    for name, knob in table.items():
        if only is not None and name not in only:
            continue
        fd = msg.DESCRIPTOR.fields_by_name[name]
        if fd.has_presence and not msg.HasField(name):
            continue
        if fd.is_repeated:
            continue
        value = getattr(msg, name)
        if isinstance(knob.allowed, Choices) and value == "" and knob.default == "":
            continue  # an empty string that means "pick for me"
        check_knob(prefix + name, knob, value)


def check_runtime(rt, data_root: Path | None = None, *, training: bool = False, this_machine: bool = True) -> None:
    """Fill and check RuntimeSettings. What this machine cannot honour is FAILED_PRECONDITION naming
    the field (CUDA, more processes than devices, a missing attention kernel), never silently changed.
    Only training runs in several processes or through an accelerate config (`training`).
    `this_machine` False: the workers run elsewhere (a Ray cluster, whose executor checks the
    devices and ranks per node), so CUDA and the ranks are not checked against this machine."""
    fill_defaults(rt, RUNTIME, only=("device", "num_processes", "num_nodes", "gradient_checkpointing", "report_to",
                                     "prompt_format"))
    check_knobs(rt, RUNTIME, "runtime.")
    check_launch(rt, data_root, training=training, this_machine=this_machine)
    for i, name in enumerate(rt.report_to):
        if name not in REPORT_TO_CHOICES:
            raise InvalidArgument(f"runtime.report_to[{i}]", f"must be one of {REPORT_TO_CHOICES}, got {name!r}")
        if name == "none" and len(rt.report_to) > 1:
            raise InvalidArgument(f"runtime.report_to[{i}]", '"none" cannot be combined with an integration')
    if rt.device == "cuda" and this_machine:
        if not cuda_available():
            raise FailedPrecondition("runtime.device", "cuda requested but no CUDA device is available")


def check_launch(rt, data_root: Path | None, *, training: bool, this_machine: bool = True) -> None:
    """num_processes (per node), num_nodes, accelerate_config and attn_implementation against this machine."""
    import os

    if not training:
        if rt.num_processes > 1:
            raise InvalidArgument("runtime.num_processes", f"only training runs in several processes, got {rt.num_processes}")
        if rt.num_nodes > 1:
            raise InvalidArgument("runtime.num_nodes", f"only training runs across nodes, got {rt.num_nodes}")
    nodes = max(1, rt.num_nodes)
    if rt.num_processes % nodes:
        raise InvalidArgument("runtime.num_processes", f"{rt.num_processes} ranks do not split evenly over "
                                                       f"runtime.num_nodes = {nodes}: give a multiple of {nodes}")
        if rt.accelerate_config:
            raise InvalidArgument("runtime.accelerate_config", "only applies to training")
    if rt.accelerate_config:
        if data_root is None:
            raise InvalidArgument("runtime.accelerate_config", "needs a data root")
        path = resolve_under(data_root, rt.accelerate_config, "runtime.accelerate_config")
        if not path.is_file():
            raise InvalidArgument("runtime.accelerate_config", f"{rt.accelerate_config!r} is not a file")
    if (per_node := rt.num_processes // nodes) > 1 and this_machine:
        cuda = rt.device == "cuda" or (rt.device == "auto" and cuda_available())
        have = cuda_device_count() if cuda else (os.cpu_count() or 1)
        if per_node > have:
            where = f"{have} CUDA device(s)" if cuda else f"{have} CPU core(s)"
            each = f" on each of {nodes} nodes" if nodes > 1 else ""
            raise FailedPrecondition("runtime.num_processes",
                                     f"{per_node} processes asked for{each}, this machine has {where}")
    impl = rt.attn_implementation
    if impl:
        if not all(c.isalnum() or c in "_-" for c in impl):
            raise InvalidArgument("runtime.attn_implementation", f"{impl!r} is not an attention implementation name")
        if impl.startswith("flash_attention"):
            import importlib.util

            if not cuda_available():
                raise FailedPrecondition("runtime.attn_implementation", f"{impl} needs a CUDA device")
            if importlib.util.find_spec("flash_attn") is None:
                raise FailedPrecondition("runtime.attn_implementation", f"{impl} needs the flash-attn package")


def check_lora(lora, defaults: Mapping[str, Any] | None = None) -> None:
    """Fill LoRA defaults (GRPO's, or the given mode's) and check every field."""
    fill_defaults(lora, LORA, defaults)
    check_knobs(lora, LORA, "lora.")
    for i, m in enumerate(lora.target_modules):
        if not m or not all(c.isalnum() or c in "_.-" for c in m):
            raise InvalidArgument(f"lora.target_modules[{i}]", f"{m!r} is not a module name")


def check_schedule(g, defaults: Mapping[str, Any] | None = None) -> None:
    """Fill and check the schedule knobs of a GrpoConfig (both modes), errors naming ``grpo.*``."""
    only = tuple(SCHEDULE)
    fill_defaults(g, SCHEDULE, defaults, only=only)
    check_knobs(g, SCHEDULE, "grpo.", only=only)
    if g.logging_steps > g.max_steps:
        raise InvalidArgument("grpo.logging_steps", f"must be in [1, max_steps], got {g.logging_steps}")


# ---------------------------------------------------------------------------------------------
# TRL's config from the tables


def trl_names(knob: Knob) -> tuple[str, ...]:
    """The TRL / PEFT config fields a knob sets (none when it is ours alone)."""
    if not knob.trl:
        return ()
    return (knob.trl,) if isinstance(knob.trl, str) else knob.trl


def trl_kwargs(msg, table: Mapping[str, Knob], *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Keyword arguments for TRL's config (or PEFT's LoraConfig): every knob of `table` that has a
    TRL name, with its value in the (effective) message `msg`, repeated fields as lists; the knobs
    in `skip` are left out (a mode whose TRL config lacks the field), and so are optional knobs
    left unset (TRL's default applies)."""
    out: dict[str, Any] = {}
    for name, knob in table.items():
        if name in skip:
            continue
        fd = msg.DESCRIPTOR.fields_by_name[name]
        if fd.has_presence and not msg.HasField(name):
            continue  # left unset in the effective request (VLLM_ONLY_FIELDS without vLLM): TRL's default
        value = getattr(msg, name)
        if msg.DESCRIPTOR.fields_by_name[name].is_repeated:
            value = list(value)
        for trl_name in trl_names(knob):
            out[trl_name] = value
    return out


# ---------------------------------------------------------------------------------------------
# `py-trainer defaults`


def describe_defaults() -> str:
    """Every knob: message.field, default(s), range and help, one per line."""
    lines = []
    for message, (table, pref) in TABLES.items():
        lines.append(f"{message}:")
        for name, knob in table.items():
            allowed = knob.allowed.describe() if knob.allowed else "any"
            note = f" ({knob.allowed.note})" if knob.allowed is not None and getattr(knob.allowed, "note", "") else ""
            lines.append(f"  {name:<30} {default_text(knob, pref.get(name), name in pref):<48} "
                         f"{allowed}{note}  {knob.help}")
    return "\n".join(lines)
