"""group_relative_advantage against the advantages TRL's GRPOTrainer itself computes.

One real GRPOTrainer step (max_steps=1) per scale_rewards mode on a throwaway tiny Qwen2
(2 layers, hidden 64, random weights) with a small BPE tokenizer, both saved to a temp folder and
loaded with from_pretrained. The embedded default model (py_trainer.models.tiny_model) would work too,
but building it uncached costs tens of seconds of SFT and its weights do not matter here: two
reward functions return fixed patterns with None (unscorable) in chosen places, so the batch
holds a mixed group, a group with a single scorable completion, a constant group and partly-None
groups. A subclass wraps `_generate_and_score_completions` and keeps the "advantages" it returns;
we recompute them with compose_rewards (TRL's nansum with reward_weights) and
group_relative_advantage. TRL works in float32 and the rewards are multiples of 1/8 (exact in
float32), hence the 1e-5 tolerance.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM  # noqa: E402

from py_trainer.core.advantage import group_relative_advantage  # noqa: E402
from py_trainer.core.task_rewards import WeightedScorer, compose_rewards  # noqa: E402

pytestmark = pytest.mark.slow  # trains a throwaway model with TRL


G = 4  # num_generations
# Four groups of four completions. None = the reward function cannot score that completion.
PATTERN_A = [1.0, 0.0, None, 0.5, None, None, None, 0.25, 0.5, 0.5, 0.5, 0.5, 1.0, None, 0.0, None]
PATTERN_B = [None, 0.25, None, 1.0, None, None, None, None, None, None, None, None, 0.875, 0.125, None, None]
WEIGHTS = [1.0, 0.5]


class RecordingGRPOTrainer(trl.GRPOTrainer):
    """GRPOTrainer that keeps the advantages each generation batch produced."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.captured: list[list[float]] = []

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        self.captured.append(out["advantages"].detach().float().cpu().tolist())
        return out


def _pattern_reward(name: str, pattern: list[float | None], calls: list[list[float | None]]):
    def reward(completions, **kwargs):
        assert len(completions) == len(pattern), "one generation batch per step"
        calls.append(list(pattern))
        return list(pattern)

    reward.__name__ = name
    return reward


@pytest.fixture(scope="module")
def throwaway_model_dir(tmp_path_factory):
    """A random 2-layer Qwen2 and a byte-level BPE tokenizer, saved like a hub model."""
    out = tmp_path_factory.mktemp("tiny-qwen2")
    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    corpus = ["Case: cash deposits just under the threshold.", "<answer>structuring</answer>", "smurfing layering"]
    bpe.train_from_iterator(corpus * 4, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|pad|>"],
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|pad|>")
    tok.save_pretrained(out)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    Qwen2ForCausalLM(config).save_pretrained(out)
    return out


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_trl_advantages_match_group_relative_advantage(scale, throwaway_model_dir, tmp_path):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(throwaway_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(throwaway_model_dir)
    calls_a: list = []
    calls_b: list = []
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        max_steps=1,
        per_device_train_batch_size=len(PATTERN_A),
        gradient_accumulation_steps=1,
        num_generations=G,
        max_completion_length=6,
        scale_rewards=scale,
        reward_weights=WEIGHTS,
        learning_rate=1e-6,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=0,
        dataloader_num_workers=0,
    )
    prompts = [f"Case {i}: cash deposits just under the threshold.\n" for i in range(len(PATTERN_A) // G)]
    trainer = RecordingGRPOTrainer(
        model=model,
        reward_funcs=[_pattern_reward("a", PATTERN_A, calls_a), _pattern_reward("b", PATTERN_B, calls_b)],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
    )
    trainer.train()

    assert trainer.captured, "TRL never called _generate_and_score_completions"
    got = trainer.captured[0]
    rows_a, rows_b = calls_a[0], calls_b[0]
    rewards = []
    for ra, rb in zip(rows_a, rows_b):
        row = compose_rewards(
            [WeightedScorer(score=(lambda c, a, v=ra: v), weight=WEIGHTS[0]),
             WeightedScorer(score=(lambda c, a, v=rb: v), weight=WEIGHTS[1])]
        )
        rewards.append(row("", []))
    want = group_relative_advantage(rewards, G, scale=scale)

    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert math.isclose(g, w, rel_tol=1e-5, abs_tol=1e-5), f"completion {i}: TRL {g} vs ours {w} (rewards {rewards})"
    # The pattern really exercises the edge cases (not all-zero advantages).
    assert any(abs(w) > 0.1 for w in want)
    assert rewards[4:8] == [None, None, None, 0.25]  # a group with one scorable completion
