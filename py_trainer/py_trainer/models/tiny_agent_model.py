"""The embedded agent model: a tiny Qwen2 SFT'd on demonstration episodes, for agent tasks.

`base_model: "embedded:<file>"` where the file is a JSONL of demonstration episodes (each line
``{"tools": [function dicts], "messages": [system?, user, assistant, tool, ..., assistant]}``,
OpenAI's tool-calling SFT format; `agent demo --agent-task` writes one from a task's `reference`
calls, docs/agents.md) builds this model instead of the task-file one (`tiny_model.py`). The
recipe is the same idea as the task-file model's, for episodes:

1. a byte-level BPE tokenizer trained on the episodes as the agent template renders them
   (`agent_format`), with ChatML's ``<|im_start|>`` / ``<|im_end|>`` as single special tokens
   and ``<|im_end|>`` as EOS (a turn ends with it, so TRL sees a finished episode as terminated);
2. a randomly initialised 2-layer Qwen2 (the embedded model's architecture, 1024 positions: a
   prompt holds the tool list);
3. SFT on the demonstrations: the loss on the assistant turns only (the tool turns are context,
   as in training), plus next-token prediction on the prompt. The demonstrations carry the
   latent competence GRPO sharpens: a share of them call the tool with the task's own arguments,
   the rest with another task's (drawn by the demo's writer), so the built model calls the tool
   with input-dependent, partly right arguments.

Deterministic from the file's bytes and the seed; built single-threaded and cached by content hash,
like the task-file model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from pathlib import Path

from py_trainer.models.agent_format import IM_END, IM_START, end_token, segments
from py_trainer.models.tiny_model import (BUILDER_VERSION, DEFAULT_SEED, EMBEDDED_NAME_PREFIX, EOS_TOKEN, PAD_TOKEN, SPEC,
                                          build_once, lr_at, models_home, train_tokenizer)

log = logging.getLogger(__name__)

AGENT_BUILDER_VERSION = "2"
MAX_POSITIONS = 1024
SFT_STEPS = 400
SFT_BATCH = 16
PROMPT_LM_WEIGHT = 0.1
"""Weight of the next-token loss on the prompt (the task-file model uses 1.0): a prompt here is
mostly the constant tool list, and at 1.0 its loss drowned the one answer token that must be
copied from the tool's output (measured: 7% right after the tool, chance, at 400 and 1200 steps)."""


def is_agent_corpus(path: Path) -> bool:
    """True when the file's first non-blank line is a JSON object with "messages" (an episode)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    return isinstance(row, dict) and "messages" in row
    except (OSError, ValueError):
        return False
    return False


def load_episodes(path: Path) -> list[dict]:
    """The demonstration episodes, each checked (ValueError naming file:line and the field)."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{Path(path).name}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where}: not JSON ({err.msg})") from None
        msgs = row.get("messages") if isinstance(row, dict) else None
        if not isinstance(msgs, list) or not msgs:
            raise ValueError(f"{where}: messages: must be a non-empty list")
        if not any(m.get("role") == "user" for m in msgs) or msgs[-1].get("role") != "assistant":
            raise ValueError(f"{where}: messages: need a user message and must end with an assistant message")
        if not isinstance(row.get("tools", []), list):
            raise ValueError(f"{where}: tools: must be a list of function dicts")
        out.append(row)
    if not out:
        raise ValueError(f"{Path(path).name}: no episodes")
    return out


def cache_key(path: Path) -> str:
    h = hashlib.sha256()
    h.update(Path(path).read_bytes())
    h.update(f"{BUILDER_VERSION}/{AGENT_BUILDER_VERSION}/{SFT_STEPS}/{SFT_BATCH}/{MAX_POSITIONS}/{PROMPT_LM_WEIGHT}".encode())
    h.update(json.dumps(dataclasses.asdict(SPEC), sort_keys=True).encode())
    return h.hexdigest()[:10]


def agent_model_dir(path: Path, cache_dir: Path | None = None) -> Path:
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in Path(path).stem)[:40] or "episodes"
    return (Path(cache_dir) if cache_dir else models_home()) / f"{EMBEDDED_NAME_PREFIX}-agent-{stem}-s{DEFAULT_SEED}-{cache_key(path)}"


def ensure_agent_model(path: Path, *, cache_dir: Path | None = None) -> Path:
    return build_once(agent_model_dir(path, cache_dir), lambda tmp: build_agent_model(tmp, Path(path)),
                      f"the embedded agent model of {path} (one time, about a minute)")


def build_agent_model(out_dir: Path, path: Path, *, seed: int = DEFAULT_SEED, sft_steps: int = SFT_STEPS) -> Path:
    """Tokenizer + Qwen2 + SFT on the episodes, saved with save_pretrained; build_info.json last."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    t0 = time.time()
    episodes = load_episodes(path)
    pieces = [segments(e, IM_END) for e in episodes]
    tokenizer = train_tokenizer([t for p in pieces for t, _ in p], special_tokens=(EOS_TOKEN, PAD_TOKEN, IM_START, IM_END),
                                eos=IM_END, max_length=MAX_POSITIONS)
    tokenizer.add_special_tokens({"additional_special_tokens": [IM_START]})  # in the vocabulary; now never split
    assert end_token(tokenizer) == IM_END and len(tokenizer.tokenize(IM_START)) == 1
    rows = []
    for p in pieces:
        ids, trained = [], []
        for text, t in p:
            piece = tokenizer(text, add_special_tokens=False)["input_ids"]
            ids += piece
            trained += [t] * len(piece)
        if len(ids) > MAX_POSITIONS:
            raise ValueError(f"{path.name}: an episode is {len(ids)} tokens, over {MAX_POSITIONS} positions")
        rows.append((ids, trained, len(tokenizer(p[0][0], add_special_tokens=False)["input_ids"])))
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=SPEC.hidden_size, num_hidden_layers=SPEC.num_hidden_layers,
                         num_attention_heads=SPEC.num_attention_heads, num_key_value_heads=SPEC.num_key_value_heads,
                         intermediate_size=SPEC.intermediate_size, max_position_embeddings=MAX_POSITIONS,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-identical weights whatever the core count (tiny_model.py's docstring)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Qwen2ForCausalLM(config)
            loss = sft(model, rows, steps=sft_steps, pad_id=tokenizer.pad_token_id,
                       gen=torch.Generator().manual_seed(seed))
    finally:
        torch.set_num_threads(threads)
    model.generation_config = GenerationConfig(bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    info = {"builder_version": f"{BUILDER_VERSION}/agent-{AGENT_BUILDER_VERSION}", "seed": seed, "sft_steps": sft_steps,
            "final_sft_loss": loss, "episodes_path": str(path), "episodes": len(episodes),
            "param_count": sum(p.numel() for p in model.parameters()), "seconds": round(time.time() - t0, 2)}
    (Path(out_dir) / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    log.info("built the embedded agent model in %s: %.1f s, final SFT loss %.4f", out_dir, info["seconds"], loss)
    return Path(out_dir)


def sft(model, rows: list[tuple[list[int], list[bool], int]], *, steps: int, pad_id: int, gen) -> float:
    """AdamW on the assistant turns' tokens plus next-token loss on the prompt; the mean answer
    loss of the last 10 steps (nats per token)."""
    import torch
    import torch.nn.functional as F

    opt = torch.optim.AdamW(model.parameters(), lr=SPEC.sft_learning_rate, weight_decay=SPEC.sft_weight_decay)
    model.train()
    losses = []
    for step in range(steps):
        batch = [rows[i] for i in torch.randint(len(rows), (SFT_BATCH,), generator=gen).tolist()]
        width = max(len(ids) for ids, _, _ in batch)
        ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        answer = torch.full((len(batch), width), -100, dtype=torch.long)
        prompt = torch.full((len(batch), width), -100, dtype=torch.long)
        for b, (row, trained, prompt_len) in enumerate(batch):
            ids[b, :len(row)] = torch.tensor(row)
            mask[b, :len(row)] = 1
            for j, (tok, t) in enumerate(zip(row, trained)):
                if t:
                    answer[b, j] = tok
                elif j < prompt_len:
                    prompt[b, j] = tok
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        loss = F.cross_entropy(logits.flatten(0, 1), answer[:, 1:].flatten(), ignore_index=-100)
        lm = F.cross_entropy(logits.flatten(0, 1), prompt[:, 1:].flatten(), ignore_index=-100)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps)
        opt.zero_grad(set_to_none=True)
        (loss + PROMPT_LM_WEIGHT * lm).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), SPEC.sft_grad_clip)
        opt.step()
        losses.append(loss.item())
    model.eval()
    tail = losses[-10:]
    return sum(tail) / len(tail)
