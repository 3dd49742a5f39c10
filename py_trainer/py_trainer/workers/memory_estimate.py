"""Peak memory of a GRPO TrainRequest from the base model's config.json alone (nothing is loaded).

The most common GRPO complaint on small GPUs is out-of-memory at step 1; this is the preflight
behind the EstimateMemory RPC and `agent plan --config run.json`. Per process, component by
component (bytes):

- weights: the parameter count the config implies (embeddings, per layer q/k/v/o with Qwen2's
  q/k/v biases, gate/up/down, norms; the LM head unless tied) x the dtype's bytes;
- lora_parameters: r x (in + out) per adapted linear per layer (all linear layers when
  target_modules is empty), in fp32 (PEFT keeps adapters in fp32 under a 16-bit base);
- optimizer_state: AdamW's two moments and the gradient of every LoRA parameter, fp32 (3 x 4 bytes);
- activations: what backward keeps for one micro-batch of per_device_train_batch_size sequences
  of prompt + max_completion_length tokens: per layer and token about 18 hidden-sized
  values plus the attention probabilities (n_heads x sequence) when the kernel materialises them
  (eager / sdpa on CPU), only the layer inputs with gradient checkpointing; plus the fp32 logits
  of the completion tokens over the vocabulary (and their log-softmax: x 2), which dominate for
  large vocabularies;
- the prompt: TRL pads a batch to its longest prompt and (TRL >= 1.0) truncates none, so the
  prompt length is the longest training prompt as the model sees it (the chat template applied
  when the run uses it), tokenized with the base's own tokenizer when that is on disk; otherwise
  (a GGUF base not converted yet, an embedded base not built yet) max_prompt_length stands in, an
  upper bound for prompts within it. On SmolLM2-135M-Instruct's recipe (47-token prompts against
  max_prompt_length 256) this term took the estimate from 3.9x the measured peak to within it
  (docs/real-model.md, scripts/bench_memory.py --only real);
- kv_cache: generation of one batch of per_device_train_batch_size x gradient_accumulation_steps
  completions (TRL generates a whole generation batch at once): 2 x layers x kv_heads x head_dim x
  (prompt + completion) x the dtype's bytes per sequence (0 with use_vllm, whose cache is in
  its share);
- vllm: vllm_gpu_memory_utilization x the device's total memory in colocate mode.

No reference model: under LoRA TRL computes the reference log-probs with the adapter disabled,
so beta > 0 adds no second copy of the weights. Not counted: the framework's own footprint
(CUDA context, allocator slack, the Python process), which the benchmark measures as the gap to
the peak (scripts/bench_memory.py, docs/benchmarks.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from py_trainer.core.devices import cuda_available
from py_trainer.core.errors import FailedPrecondition, InvalidArgument
from py_trainer.core.model_files import parse_base_model
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ACTIVATION_VALUES_PER_TOKEN = 18
"""Hidden-sized values backward keeps per layer and token (inputs of the norms, q/k/v/o, the MLP's
gate/up/act/down inputs, residuals), counted from a Qwen2/Llama block without checkpointing."""


BOUNDS = {"vocab_size": (1, 2**24), "hidden_size": (1, 2**18), "num_hidden_layers": (1, 4096),
          "intermediate_size": (1, 2**20), "num_attention_heads": (1, 4096), "num_key_value_heads": (1, 4096),
          "head_dim": (1, 2**14)}
"""The sizes read from config.json and their sane range (the largest published decoders are far
inside it); within it every component's byte count fits protobuf's int64."""
REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads")
MAX_BYTES = 2**63 - 1


def _size(cfg: dict, key: str, where: str) -> int:
    """cfg[key] as a whole number within BOUNDS, or INVALID_ARGUMENT naming base_model and the field."""
    v, (lo, hi) = cfg[key], BOUNDS[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")) \
            or v != int(v):
        raise InvalidArgument("base_model", f"{where}: {key} is {v!r}, not a whole number")
    if not lo <= v <= hi:
        raise InvalidArgument("base_model", f"{where}: {key} is {v!r}, outside {lo}..{hi}")
    return int(v)


@dataclass(frozen=True)
class Component:
    name: str
    bytes: int
    formula: str


@dataclass(frozen=True)
class Shape:
    vocab: int
    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    qkv_bias: bool

    @classmethod
    def from_config(cls, cfg: dict, where: str = "config.json") -> "Shape":
        """The shape `cfg` declares; INVALID_ARGUMENT naming base_model and the config field when a
        size is missing, not a whole number, or outside BOUNDS (0, negative, huge, infinite)."""
        if not isinstance(cfg, dict):
            raise InvalidArgument("base_model", f"{where}: not a JSON object")
        missing = [k for k in ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                               "num_attention_heads") if k not in cfg]
        if missing:
            raise InvalidArgument("base_model", f"{where}: not a decoder config this estimate knows "
                                                f"(no {', '.join(missing)})")
        dim = {k: _size(cfg, k, where) for k in BOUNDS if cfg.get(k) is not None or k in REQUIRED}
        hidden, heads = dim["hidden_size"], dim["num_attention_heads"]
        head_dim = dim.get("head_dim") or hidden // heads
        if head_dim < 1:
            raise InvalidArgument("base_model", f"{where}: num_attention_heads {heads} exceeds hidden_size {hidden} "
                                                "(head_dim would be 0)")
        return cls(vocab=dim["vocab_size"], hidden=hidden, layers=dim["num_hidden_layers"],
                   intermediate=dim["intermediate_size"], heads=heads,
                   kv_heads=dim.get("num_key_value_heads") or heads, head_dim=head_dim,
                   tied=bool(cfg.get("tie_word_embeddings", False)),
                   qkv_bias=cfg.get("model_type") == "qwen2" or bool(cfg.get("attention_bias", False)))

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear of one layer."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {"q_proj": (self.hidden, q), "k_proj": (self.hidden, kv), "v_proj": (self.hidden, kv),
                "o_proj": (q, self.hidden), "gate_proj": (self.hidden, self.intermediate),
                "up_proj": (self.hidden, self.intermediate), "down_proj": (self.intermediate, self.hidden)}

    def parameters(self) -> int:
        per_layer = sum(i * o for i, o in self.linear_shapes().values()) + 2 * self.hidden
        if self.qkv_bias:
            per_layer += (self.heads + 2 * self.kv_heads) * self.head_dim
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.layers * per_layer + self.hidden


def read_config(model_folder: Path) -> dict:
    path = Path(model_folder) / "config.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InvalidArgument("base_model", f"{path}: cannot read the model's config ({err})") from err


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def estimate(req, cfg: dict, *, precision: str, device_total_bytes: int = 0, prompt_tokens: int = 0) -> list[Component]:
    """The components for an effective (validated) GRPO TrainRequest `req` on a model of config `cfg`
    at `precision` ("fp32" / "bf16" / "fp16"); `prompt_tokens`: the longest training prompt in
    tokens (`longest_prompt_tokens`), 0 when unknown (max_prompt_length stands in)."""
    s, g, lora = Shape.from_config(cfg), req.grpo, req.lora
    wb = DTYPE_BYTES[precision]
    n = s.parameters()
    out = [Component("weights", n * wb, f"{n / 1e6:.1f}M params x {wb} bytes ({precision})")]
    shapes = s.linear_shapes()
    targets = [m for m in (lora.target_modules or LINEARS) if m in shapes]
    lp = s.layers * sum(lora.r * sum(shapes[m]) for m in targets)
    out.append(Component("lora_parameters", lp * 4, f"{lp / 1e6:.2f}M LoRA params (r {lora.r} on {', '.join(targets)} "
                                                    f"x {s.layers} layers) x 4 bytes (fp32)"))
    out.append(Component("optimizer_state", lp * 12, f"{lp / 1e6:.2f}M x (gradient + AdamW's 2 moments) x 4 bytes"))
    prompt = prompt_tokens or g.max_prompt_length
    seq = prompt + g.max_completion_length
    prompt_how = (f"the longest training prompt, {prompt_tokens}" if prompt_tokens
                  else f"max_prompt_length {g.max_prompt_length} (no local tokenizer to measure the prompts)")
    b = g.per_device_train_batch_size
    if req.runtime.gradient_checkpointing:
        per_token, how = s.layers * s.hidden * wb, f"{s.layers} layer inputs x hidden {s.hidden} (gradient checkpointing)"
        attn = 0
    else:
        per_token = s.layers * ACTIVATION_VALUES_PER_TOKEN * s.hidden * wb
        how = f"{s.layers} layers x {ACTIVATION_VALUES_PER_TOKEN} x hidden {s.hidden}"
        flash = req.runtime.attn_implementation.startswith("flash_attention")
        attn = 0 if flash else s.layers * s.heads * seq * wb
    logits = 2 * g.max_completion_length * s.vocab * 4
    act = b * (seq * (per_token + attn) + logits)
    out.append(Component("activations", act, f"{b} sequences x {seq} tokens ({prompt_how} + {g.max_completion_length}) x "
                                             f"({how} x {wb} bytes"
                                             f"{f' + attention {s.heads} heads x {seq}' if attn else ''}) + fp32 logits "
                                             f"and log-softmax of {g.max_completion_length} completion tokens x vocab {s.vocab}"))
    gen = b * g.gradient_accumulation_steps
    if g.use_vllm:
        out.append(Component("kv_cache", 0, "in vLLM's share (use_vllm)"))
        if g.vllm_mode == "colocate":
            share = int(g.vllm_gpu_memory_utilization * device_total_bytes)
            out.append(Component("vllm", share, f"vllm_gpu_memory_utilization {g.vllm_gpu_memory_utilization} x "
                                                f"{_gib(device_total_bytes)} (colocate)"))
    else:
        kv = gen * seq * 2 * s.layers * s.kv_heads * s.head_dim * wb
        out.append(Component("kv_cache", kv, f"{gen} completions x {seq} tokens x 2 x {s.layers} layers x "
                                             f"{s.kv_heads} kv heads x {s.head_dim} x {wb} bytes"))
    too_big = next((c for c in out if c.bytes > MAX_BYTES), None)
    if too_big is not None:
        raise InvalidArgument("base_model", f"the estimated {too_big.name} ({too_big.bytes:.3g} bytes) does not fit in "
                                            "64 bits: these sizes and settings are beyond any device")
    return out


KNOB_ORDER = (("activations", "grpo.per_device_train_batch_size"), ("kv_cache", "grpo.per_device_train_batch_size"),
              ("vllm", "grpo.vllm_gpu_memory_utilization"), ("weights", "runtime.precision"),
              ("lora_parameters", "lora.r"), ("optimizer_state", "lora.r"))


def knob_to_lower(components: list[Component], free: int) -> str:
    """The knob governing the largest component, when the total exceeds `free` ("" when it fits)."""
    if sum(c.bytes for c in components) <= free:
        return ""
    largest = max(components, key=lambda c: c.bytes).name
    if largest == "activations":
        return "grpo.per_device_train_batch_size (or runtime.gradient_checkpointing, grpo.max_completion_length)"
    return dict(KNOB_ORDER).get(largest, "grpo.per_device_train_batch_size")


def device_memory(device: str) -> tuple[str, int, int]:
    """(device name, free bytes, total bytes): CUDA's mem_get_info, or the host's MemAvailable."""
    if device == "cuda" or (device == "auto" and cuda_available()):
        import torch

        free, total = torch.cuda.mem_get_info()
        return f"cuda:{torch.cuda.current_device()}", int(free), int(total)
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
    kib = lambda k: int(info[k].strip().split()[0]) * 1024  # noqa: E731
    return "cpu", kib("MemAvailable"), kib("MemTotal")


def check_fits(components: list[Component], device: str, free: int) -> None:
    """FAILED_PRECONDITION naming the knob to lower when a CUDA device has less free memory than the
    estimate (on CPU the estimate is reported, never enforced: the host swaps, it does not OOM at once)."""
    total = sum(c.bytes for c in components)
    if device.startswith("cuda") and total > free:
        knob = knob_to_lower(components, free)
        largest = max(components, key=lambda c: c.bytes)
        raise FailedPrecondition(knob.split(" ")[0], f"the estimated peak {_gib(total)} exceeds the {_gib(free)} free on "
                                                     f"{device} (largest: {largest.name} {_gib(largest.bytes)}); lower {knob}")


def embedded_config(name: str, data_root: Path) -> dict | None:
    """An embedded base ("" or "embedded:<tasks file>"): its config.json once built, else the shape
    its builder will give it (`tiny_model.SPEC`, the vocabulary at its BPE ceiling: an upper bound);
    None for any other base. Nothing is built (issue 30, item 2: EstimateMemory built the model in
    the sidecar, 19-20 s)."""
    from py_trainer.models.tiny_model import SPEC

    if not parse_base_model(name, data_root).built_here:
        return None
    from py_trainer.models.base_models import model_dir_for

    folder = model_dir_for(name, data_root)
    if folder is not None and (folder / "config.json").is_file():
        return read_config(folder)
    return {"model_type": "qwen2", "vocab_size": SPEC.vocab_size, "hidden_size": SPEC.hidden_size,
            "num_hidden_layers": SPEC.num_hidden_layers, "num_attention_heads": SPEC.num_attention_heads,
            "num_key_value_heads": SPEC.num_key_value_heads, "intermediate_size": SPEC.intermediate_size,
            "tie_word_embeddings": True}


def local_tokenizer_folder(base_model: str, data_root: Path) -> Path | None:
    """A folder on disk holding the base's tokenizer, found without building, converting or
    downloading anything; None when there is none yet."""
    from py_trainer.models.base_models import model_dir_for
    from py_trainer.models.loading import model_files_folder, resolve_model_path

    ref = parse_base_model(base_model, data_root)
    if ref.built_here or ref.kind == "gguf":
        folder = model_dir_for(ref, data_root)
    else:
        folder = model_files_folder(resolve_model_path(ref, data_root))
    if folder is None or not any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
        return None
    return folder


def longest_prompt_tokens(effective: pb.TrainRequest, data_root: Path) -> int:
    """The longest training prompt of an effective GRPO request in tokens, as TRL will feed it (the
    chat template when runtime.prompt_format resolves to chat; no special tokens added), or 0 when
    the base's tokenizer is not on disk."""
    folder = local_tokenizer_folder(effective.base_model, data_root)
    if folder is None:
        return 0
    from py_trainer.data.request_data import split_rows
    from py_trainer.models.loading import format_prompts, load_tokenizer

    tokenizer = load_tokenizer(folder)
    train, _ = split_rows(effective, data_root)
    texts = format_prompts(tokenizer, [r.prompt for r in train], effective.runtime.prompt_format)
    return max((len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]), default=0)


def estimate_request(effective: pb.TrainRequest, data_root: Path) -> pb.EstimateMemoryResponse:
    """EstimateMemory for an effective (validated) TrainRequest: the base model's config.json, this
    sidecar's device and its free memory, and the knob to lower when it does not fit."""
    from py_trainer.models.base_models import gguf_config
    from py_trainer.models.loading import model_files_folder, resolve_model_path

    if effective.mode != pb.TRAIN_MODE_GRPO:
        raise InvalidArgument("mode", "the memory estimate covers TRAIN_MODE_GRPO only")
    cfg = gguf_config(effective.base_model, data_root)  # a GGUF base: its header, never converted here
    if cfg is None:
        cfg = embedded_config(effective.base_model, data_root)  # an embedded base: never built here
    if cfg is None:
        folder = model_files_folder(resolve_model_path(effective.base_model, data_root))
        if folder is None:
            raise InvalidArgument("base_model", f"{effective.base_model!r}: no local config.json to estimate from")
        cfg = read_config(folder)
    Shape.from_config(cfg)  # the bounds, naming the field, before transformers reads the same config.json
    device, free, total = device_memory(effective.runtime.device)
    precision = effective.runtime.precision or ("bf16" if device.startswith("cuda") else "fp32")
    comps = estimate(effective, cfg, precision=precision, device_total_bytes=total,
                     prompt_tokens=longest_prompt_tokens(effective, data_root))
    return pb.EstimateMemoryResponse(components=[pb.MemoryComponent(name=c.name, bytes=c.bytes, formula=c.formula)
                                                 for c in comps],
                                     total_bytes=sum(c.bytes for c in comps), device=device, device_free_bytes=free,
                                     knob_to_lower=knob_to_lower(comps, free))


def preflight(effective: pb.TrainRequest, data_root: Path) -> None:
    """Before a CUDA run loads its model: FAILED_PRECONDITION naming the knob to lower when the
    estimate exceeds the device's free memory (nothing on CPU)."""
    if not device_memory(effective.runtime.device)[0].startswith("cuda"):
        return  # never enforced on CPU (check_fits): skip the estimate and its prompt tokenization
    res = estimate_request(effective, data_root)
    check_fits([Component(c.name, c.bytes, c.formula) for c in res.components], res.device, res.device_free_bytes)
