"""The embedded base models: a tiny Qwen2 built from a task file, on CPU, in seconds.

No model hub is reachable here or in CI, so an empty `base_model` resolves to a model this module
builds itself from the AML task set and caches; `base_model: "embedded:<tasks file>"` (a JSONL
path under the data root; `py-trainer init-model --tasks FILE`) builds the same recipe from any
task file in the docs/tasks.md format, cached by the file's content hash. The SFT target of a row
is its first accepted answer (`answers[0]`: the label of a closed-label task, the number of an
arithmetic one), drawn against the other rows' first answers:

1. a byte-level BPE tokenizer (`tokenizers`, with Qwen2Tokenizer's pre-tokenizer) trained on the
   TRAIN split's prompts and answers, saved as a Qwen2Tokenizer;
2. a randomly initialised 2-layer Qwen2 (`Qwen2ForCausalLM`, the real architecture, so TRL, PEFT
   and `generate` run their ordinary code paths);
3. a short SFT with two losses summed, a plain torch loop (it pre-trains our fixture; it is not
   the trainer under test):
   - the answer format with PARTLY CORRECT labels: after every prompt the target is
     "<answer>{label}</answer>" + EOS, where the label is the row's first answer with
     probability `sft_correct_label_prob` (0.3) and otherwise drawn uniformly from the distinct
     first answers of the train split (the 8 labels for AML)
     (redrawn every time a prompt is seen). The model learns to answer in format and to stop, and
     a weak, input-dependent preference for the right label: its greedy answer depends on the
     narrative (54.5% exact match on the test split, 43.8% on held-out templates, no label on more
     than 36% of tasks), while sampling at T=1 is still diverse (17% correct per sample, pass@4
     54%). That is the faithful miniature of RLVR: RL sharpens what the base can already sample.
     With uniformly random labels (builder versions <= 4) the greedy answer was one label for every
     case (a constant predictor at chance), and GRPO on it passed or failed by which trajectory a
     CPU's rounding picked: the demo's seed was +27 pp on one CPU and +0.0 pp on another;
   - next-token prediction on the prompt itself. This is what a real base model brings: it has
     read text like the cases, so its hidden states carry what a case is about. Without it the
     mapping was not learnable at this size: LoRA fine-tuned with the CORRECT labels (lr 1e-3,
     batch 32) stayed at chance (test accuracy 0.13 after 150 steps); with it the same run
     reached 0.85 after 50 steps.

   Measured for 0.3 (300 SFT steps, seed 0, greedy, 264 test tasks): 0.0 and 0.15 gave a constant
   greedy answer (structuring on 264 and 263 tasks, 12.5% exact match); 0.3 the numbers above.

What is deliberately not textbook, to stay well under a minute on 2 CPU cores:
- Each step is 4 prompts x 8 random labels = 32 sequences: each prompt (minus its last token)
  runs once, with gradients, into a KV cache that its 8 sequences share, and only the last
  prompt token and the completions run per sequence.

Loading always goes through `from_pretrained` on the saved folder, exactly like a hub model
(`base_models.py` turns a `base_model` string into a folder):

    path = resolve_base_model("")            # builds once, then returns the cached folder
    path = resolve_base_model("embedded:agent-evals/tasks/ticket_routing.jsonl", data_root)
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)

The build runs torch single-threaded: weights are bit-identical for the same seed, task file and
builder version whatever the core count (CPU matmul reductions depend on the thread split), and
it does not collapse when other processes compete for the cores (measured with other training
jobs on the 2 cores: 40 SFT steps took 20 s on 1 thread and 100+ s on 2).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from py_trainer.data.task_file import load_task_file

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

DEFAULT_SEED = 0
# Bump when the build recipe changes in a way that changes the weights: it is part of the cache key.
BUILDER_VERSION = "5"
MODEL_NAME_PREFIX = "tiny-aml-qwen2"
EMBEDDED_NAME_PREFIX = "tiny-qwen2"
EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"


@dataclasses.dataclass(frozen=True)
class TinyModelSpec:
    """Architecture and SFT settings of the default model (all of it is part of the cache key)."""

    vocab_size: int = 2048
    """BPE vocabulary size including the two special tokens."""
    hidden_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    intermediate_size: int = 384
    max_position_embeddings: int = 512
    """Prompts are 115-185 tokens; 512 leaves room for completions and longer task sets."""
    sft_prompts_per_step: int = 4
    sft_labels_per_prompt: int = 8
    """Each step pairs every prompt with this many random labels: batch = 4 x 8 = 32 sequences,
    and the prompt (most of the compute) runs once per prompt, not once per sequence."""
    sft_learning_rate: float = 3e-3
    """Peak AdamW learning rate; linear warmup then linear decay to 10%."""
    sft_warmup_steps: int = 20
    sft_weight_decay: float = 0.0
    sft_grad_clip: float = 1.0
    sft_prompt_lm_weight: float = 1.0
    """Weight of the next-token loss on prompt tokens, added to the answer loss."""
    sft_correct_label_prob: float = 0.3
    """Chance that an SFT target is the prompt's gold label instead of a uniform draw over the
    labels: the base's latent, input-dependent competence (module docstring)."""


SPEC = TinyModelSpec()


# ----------------------------------------------------------------------------------------------
# Paths and cache key


def default_tasks_path() -> Path:
    """$PY_TRAINER_TASKS, else the repo's agent-evals/tasks/aml_typology.jsonl."""
    if env := os.environ.get("PY_TRAINER_TASKS"):
        return Path(env)
    return Path(__file__).resolve().parents[3] / "agent-evals/tasks/aml_typology.jsonl"


def _trainer_home() -> Path:
    return Path(os.environ.get("PY_TRAINER_HOME") or Path.home() / ".cache" / "py-trainer")


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _require_tasks(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(
            f"task file {path} not found; it is checked in at agent-evals/tasks/aml_typology.jsonl "
            "(regenerate: cd ts_agent && node_modules/.bin/tsx src/task-sets/aml-tasks.ts --write) "
            "or point PY_TRAINER_TASKS at one"
        )
    return path


def _cache_key(tasks_path: Path) -> str:
    h = hashlib.sha256()
    h.update(BUILDER_VERSION.encode())
    h.update(json.dumps(dataclasses.asdict(SPEC), sort_keys=True).encode())
    h.update(_sha256_file(tasks_path).encode())
    return h.hexdigest()[:10]


def default_model_dir(cache_dir: Path | None = None) -> Path:
    """Where the default model lives: <cache_dir>/tiny-aml-qwen2-s{seed}-<hash>.

    cache_dir defaults to $PY_TRAINER_HOME/models ($PY_TRAINER_HOME defaults to
    ~/.cache/py-trainer). The hash covers the task file, the builder version and SPEC, so editing
    any of them selects a new folder instead of reusing a stale model.
    """
    tasks = _require_tasks(default_tasks_path())
    parent = Path(cache_dir) if cache_dir is not None else _trainer_home() / "models"
    return parent / f"{MODEL_NAME_PREFIX}-s{DEFAULT_SEED}-{_cache_key(tasks)}"


# ----------------------------------------------------------------------------------------------
# Task corpus


def _train_rows(path: Path) -> list[tuple[str, str]]:
    """(prompt, first answer) of every train row; the whole file is checked first as the agent
    checks it (task_file.py): a bad file is a ValueError (TaskFileError) naming file:line and the field."""
    return [(t.prompt, t.answers[0]) for t in load_task_file(path).tasks if t.split == "train"]


def _answer(label: str) -> str:
    # the format the TS side asks for in every prompt (tasks.ts formatAnswer)
    return f"<answer>{label}</answer>"


# ----------------------------------------------------------------------------------------------
# Build


def train_tokenizer(texts: list[str], *, special_tokens: tuple[str, ...] = (EOS_TOKEN, PAD_TOKEN), eos: str = EOS_TOKEN,
                    max_length: int | None = None):
    """Byte-level BPE with exactly Qwen2Tokenizer's normalizer and pre-tokenizer (`special_tokens`
    first in the vocabulary; the agent model adds ChatML's turn markers and ends turns with
    ``<|im_end|>``).

    AutoTokenizer always loads a qwen2 model's tokenizer as Qwen2Tokenizer, which rebuilds the
    pipeline from vocab + merges with its own regex; training with any other pipeline would make
    the loaded tokenizer split text differently from the one the model was trained with.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=SPEC.vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # any text encodes; decode(encode(x)) == x
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    bpe = json.loads(tok.to_str())["model"]
    return Qwen2Tokenizer(
        vocab=bpe["vocab"],
        merges=[tuple(m) for m in bpe["merges"]],
        unk_token=None,
        eos_token=eos,
        pad_token=PAD_TOKEN,
        padding_side="left",  # decoder-only generation pads on the left
        model_max_length=max_length or SPEC.max_position_embeddings,
    )


def lr_at(step: int, total: int) -> float:
    peak = SPEC.sft_learning_rate
    if step < SPEC.sft_warmup_steps:
        return peak * (step + 1) / SPEC.sft_warmup_steps
    frac = (step - SPEC.sft_warmup_steps) / max(1, total - SPEC.sft_warmup_steps)
    return peak * (1.0 - 0.9 * frac)


def _sft(
    model,
    prompt_ids: list[list[int]],
    answer_ids: list[list[int]],
    gold: list[int],
    *,
    steps: int,
    pad_id: int,
    gen: torch.Generator,
) -> tuple[float, float]:
    """Trains prompt -> answer_ids[random] plus next-token loss on the prompt.

    Returns (answer loss, prompt LM loss), each the mean of the last 10 steps in nats per token.
    """
    import torch  # here, not at the top: the sidecar imports this module and must not load torch
    import torch.nn.functional as F

    n_prompts, reps = SPEC.sft_prompts_per_step, SPEC.sft_labels_per_prompt
    bs = n_prompts * reps
    opt = torch.optim.AdamW(model.parameters(), lr=SPEC.sft_learning_rate, weight_decay=SPEC.sft_weight_decay)
    model.train()
    order = torch.empty(0, dtype=torch.long)
    losses: list[tuple[float, float]] = []
    for step in range(steps):
        if len(order) < n_prompts:  # epoch-wise shuffling, no prompt repeated within an epoch
            order = torch.cat([order, torch.randperm(len(prompt_ids), generator=gen)])
        idx, order = order[:n_prompts].tolist(), order[n_prompts:]
        labels = torch.randint(len(answer_ids), (bs,), generator=gen)
        correct = torch.rand(bs, generator=gen) < SPEC.sft_correct_label_prob
        gold_rows = torch.tensor([gold[i] for i in idx for _ in range(reps)])
        labels = torch.where(correct, gold_rows, labels).tolist()
        prompts = [prompt_ids[i] for i in idx for _ in range(reps)]  # rows b*reps .. b*reps+reps-1 share a prompt
        comps = [answer_ids[k] for k in labels]

        # prompts left-padded to end at column P, completions right-padded after them
        P = max(len(p) for p in prompts)
        C = max(len(c) for c in comps)
        ids = torch.full((bs, P + C), pad_id, dtype=torch.long)
        mask = torch.zeros((bs, P + C), dtype=torch.long)
        target = torch.full((bs, C), -100, dtype=torch.long)
        for b, (p, c) in enumerate(zip(prompts, comps)):
            ids[b, P - len(p) : P] = torch.tensor(p)
            ids[b, P : P + len(c)] = torch.tensor(c)
            mask[b, P - len(p) : P + len(c)] = 1
            target[b, : len(c)] = torch.tensor(c)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)

        first = slice(None, None, reps)  # one row per distinct prompt
        prefix = model.model(
            input_ids=ids[first, : P - 1],
            attention_mask=mask[first, : P - 1],
            position_ids=pos[first, : P - 1],
            use_cache=True,
        )
        lm_logits = model.lm_head(prefix.last_hidden_state[:, :-1])
        lm_target = ids[first, 1 : P - 1].masked_fill(mask[first, 1 : P - 1] == 0, -100)
        lm_loss = F.cross_entropy(lm_logits.flatten(0, 1), lm_target.flatten(), ignore_index=-100)
        cache = prefix.cache
        cache.batch_repeat_interleave(reps)
        out = model.model(
            input_ids=ids[:, P - 1 : P + C - 1],
            attention_mask=mask[:, : P + C - 1],
            position_ids=pos[:, P - 1 : P + C - 1],
            cache=cache,
            use_cache=True,
        )
        logits = model.lm_head(out.last_hidden_state)
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=-100)
        total = loss + SPEC.sft_prompt_lm_weight * lm_loss

        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps)
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), SPEC.sft_grad_clip)
        opt.step()
        losses.append((loss.item(), lm_loss.item()))
        if step % 50 == 0 or step == steps - 1:
            log.debug("sft step %d/%d answer loss %.4f prompt lm loss %.4f", step + 1, steps, *losses[-1])
    model.eval()
    tail = losses[-10:] or [(float("nan"), float("nan"))]
    return sum(a for a, _ in tail) / len(tail), sum(b for _, b in tail) / len(tail)


def build_tiny_model(
    out_dir: Path,
    *,
    seed: int = DEFAULT_SEED,
    tasks_path: Path | None = None,
    sft_steps: int = 300,
) -> Path:
    """Builds tokenizer + Qwen2 + partly-correct-label SFT and saves them with save_pretrained in out_dir.

    Uses only the TRAIN split of the task file. Writes build_info.json last (seed, sft_steps,
    final SFT loss = answer loss over the last 10 steps in nats per completion token, the prompt
    LM loss likewise, task file sha256, wall seconds, parameter count). Leaves the caller's
    global torch RNG and thread count as they were.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    t0 = time.time()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks_path = _require_tasks(Path(tasks_path) if tasks_path is not None else default_tasks_path())
    rows = _train_rows(tasks_path)
    if not rows:
        raise ValueError(f'{tasks_path}: no rows with "split": "train" to build a model from')
    labels = sorted({answer for _, answer in rows})
    prompts = [prompt for prompt, _ in rows]

    tokenizer = train_tokenizer(prompts + [_answer(answer) for _, answer in rows])
    eos_id, pad_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    answer_ids = [tokenizer(_answer(label), add_special_tokens=False)["input_ids"] + [eos_id] for label in labels]
    longest = max(map(len, prompt_ids)) + max(map(len, answer_ids))
    if longest > SPEC.max_position_embeddings:
        raise ValueError(
            f"a prompt + answer is {longest} tokens, over max_position_embeddings={SPEC.max_position_embeddings}"
        )

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=SPEC.hidden_size,
        num_hidden_layers=SPEC.num_hidden_layers,
        num_attention_heads=SPEC.num_attention_heads,
        num_key_value_heads=SPEC.num_key_value_heads,
        intermediate_size=SPEC.intermediate_size,
        max_position_embeddings=SPEC.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # see the module docstring: determinism and no oversubscription
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Qwen2ForCausalLM(config)
            gen = torch.Generator().manual_seed(seed)
            gold = [labels.index(answer) for _, answer in rows]
            final_loss, final_lm_loss = _sft(model, prompt_ids, answer_ids, gold, steps=sft_steps, pad_id=pad_id, gen=gen)
    finally:
        torch.set_num_threads(threads)

    model.generation_config = GenerationConfig(bos_token_id=None, eos_token_id=eos_id, pad_token_id=pad_id)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    info = {
        "builder_version": BUILDER_VERSION,
        "seed": seed,
        "sft_steps": sft_steps,
        "final_sft_loss": final_loss,
        "final_prompt_lm_loss": final_lm_loss,
        "tasks_path": str(tasks_path),
        "tasks_sha256": _sha256_file(tasks_path),
        "labels": labels,
        "train_rows": len(rows),
        "param_count": sum(p.numel() for p in model.parameters()),
        "spec": dataclasses.asdict(SPEC),
        "seconds": round(time.time() - t0, 2),
    }
    (out_dir / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    log.info("built tiny model in %s: %.1f s, final SFT loss %.4f", out_dir, info["seconds"], final_loss)
    return out_dir


# ----------------------------------------------------------------------------------------------
# Cache


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)  # works for files and directories on Linux
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for path in [*root.rglob("*"), root]:
        _fsync(path)


def _is_built(folder: Path) -> bool:
    return (folder / "build_info.json").is_file()


def ensure_default_model(*, cache_dir: Path | None = None) -> Path:
    """Returns the default model's folder, building it first if it is not cached.

    The build goes to a temp folder next to the final one and is renamed into place, so a
    half-built model is never visible. An fcntl lock on "<folder>.lock" makes a second process
    wait for the first build instead of building again. cache_dir: see default_model_dir.
    """
    return _ensure_built(default_model_dir(cache_dir), default_tasks_path())


def embedded_model_dir(tasks_path: Path, cache_dir: Path | None = None) -> Path:
    """Where the embedded model of a task file lives: <cache_dir>/tiny-qwen2-<file stem>-s{seed}-<hash>,
    the hash over the file's bytes, the builder version and SPEC (as default_model_dir)."""
    tasks = _require_tasks(Path(tasks_path))
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in tasks.stem)[:40] or "tasks"
    parent = Path(cache_dir) if cache_dir is not None else _trainer_home() / "models"
    return parent / f"{EMBEDDED_NAME_PREFIX}-{stem}-s{DEFAULT_SEED}-{_cache_key(tasks)}"


def ensure_embedded_model(tasks_path: Path, *, cache_dir: Path | None = None) -> Path:
    """The embedded model of a task file, built once and cached like the default model."""
    return _ensure_built(embedded_model_dir(tasks_path, cache_dir), Path(tasks_path))


def _ensure_built(final: Path, tasks_path: Path) -> Path:
    return build_once(final, lambda tmp: build_tiny_model(tmp, seed=DEFAULT_SEED, tasks_path=tasks_path),
                      f"the embedded tiny model of {tasks_path} (one time, under a minute)")


def models_home() -> Path:
    """$PY_TRAINER_HOME/models: where built and converted base models are cached."""
    return _trainer_home() / "models"


BUILDS_IN_PROGRESS: set[Path] = set()
"""The temp folders `build_once` is building into now (the inference worker drops them and exits
when the call that started a build is cancelled: a build has no batch to stop at)."""


def build_once(final: Path, build: Callable[[Path], object], what: str) -> Path:
    """`final`, built by `build(tmp folder)` first when it holds no build_info.json (which `build`
    writes last): built in a temp folder renamed into place, under an fcntl lock on
    "<final>.lock" so a second process waits for the first build instead of building again."""
    if _is_built(final):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.with_name(final.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _is_built(final):  # someone else built it while we waited
                return final
            # leftovers of a crashed build; nobody else can be building while we hold the lock
            for stale in final.parent.glob(f".{final.name}.tmp-*"):
                shutil.rmtree(stale, ignore_errors=True)
            if final.exists():  # not built by us (no build_info.json): never reuse it
                shutil.rmtree(final)
            tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
            BUILDS_IN_PROGRESS.add(tmp)
            try:
                log.info("building %s into %s", what, final)
                build(tmp)
                _fsync_tree(tmp)
                os.rename(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            finally:
                BUILDS_IN_PROGRESS.discard(tmp)
            _fsync(final.parent)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return final
