"""fused_head.py: on CPU, TRL's fused LM head scores only the completion positions, and computes the
same log-probabilities, entropies and gradients as TRL's all-positions path and as a plain
log_softmax over the model's own logits (the independent reference)."""

import copy

import pytest
import torch

pytest.importorskip("trl")

import trl.trainer.utils as trl_utils  # noqa: E402
from trl.trainer.utils import add_fused_lm_head  # noqa: E402

from py_trainer.models import fused_head  # noqa: E402


@pytest.fixture()
def unpatched():
    fused_head.restore_fused_head()
    yield
    fused_head.restore_fused_head()


@pytest.fixture()
def batch(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    fused = copy.deepcopy(plain)
    add_fused_lm_head(fused, temperature=0.7, outputs=("log_probs", "entropy"))
    # 3 rows: left-padded prompts of different lengths, then completions; only the last 6 positions
    # are scored (as GRPOTrainer does with logits_to_keep), minus padding
    ids = torch.randint(2, 2000, (3, 40))
    mask = torch.ones_like(ids)
    mask[0, :7] = 0
    mask[2, :3] = 0
    mask[1, -2:] = 0  # a completion that ended early
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-6] = -100
    return plain, fused, ids, mask, labels


def fused_outputs(model, ids, mask, labels):
    rows = []
    original = trl_utils._ChunkedLogProbFunction.apply

    def counting(hidden, *rest):
        rows.append(hidden.shape[0])
        return original(hidden, *rest)

    trl_utils._ChunkedLogProbFunction.apply = counting
    try:
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    finally:
        trl_utils._ChunkedLogProbFunction.apply = original
    return out, rows


@pytest.mark.slow
def test_cpu_scores_only_the_labelled_positions(batch, unpatched):
    _, fused, ids, mask, labels = batch
    valid = int((labels[:, 1:] != -100).sum())
    all_positions = ids.shape[0] * (ids.shape[1] - 1)

    _, rows = fused_outputs(fused, ids, mask, labels)
    assert rows == [all_positions], "TRL as shipped feeds every position to the head on CPU"

    assert fused_head.compact_fused_head_on_cpu() is True
    assert fused_head.compact_fused_head_on_cpu() is True  # idempotent
    _, rows = fused_outputs(fused, ids, mask, labels)
    assert rows == [valid]
    assert valid < all_positions / 5


@pytest.mark.slow
def test_same_log_probs_entropies_and_gradients(batch, unpatched):
    plain, fused, ids, mask, labels = batch
    scored = labels[:, 1:] != -100

    def run():
        fused.zero_grad()
        out, _ = fused_outputs(fused, ids, mask, labels)
        (out.log_probs.sum() + 0.1 * out.entropy.sum()).backward()
        grads = {n: p.grad.clone() for n, p in fused.named_parameters() if p.grad is not None}
        return out.log_probs.detach(), out.entropy.detach(), grads

    lp_all, ent_all, g_all = run()
    fused_head.compact_fused_head_on_cpu()
    lp_compact, ent_compact, g_compact = run()

    # independent reference: the plain model's full logits, log_softmax at temperature 0.7
    with torch.no_grad():
        logits = plain(input_ids=ids, attention_mask=mask).logits[:, :-1] / 0.7
    logp = torch.log_softmax(logits.float(), -1)
    ref_lp = logp.gather(-1, labels[:, 1:].clamp(min=0).unsqueeze(-1)).squeeze(-1)
    ref_ent = -(logp.exp() * logp).sum(-1)

    for lp, ent in ((lp_all, ent_all), (lp_compact, ent_compact)):
        torch.testing.assert_close(lp[scored], ref_lp[scored], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(ent[scored], ref_ent[scored], atol=1e-4, rtol=1e-4)
        assert torch.all(lp[~scored] == 0) and torch.all(ent[~scored] == 0)
    assert g_all.keys() == g_compact.keys() and len(g_all) > 10
    for name in g_all:
        torch.testing.assert_close(g_compact[name], g_all[name], atol=1e-5, rtol=1e-4, msg=name)


def test_left_alone_when_trl_decides_differently(monkeypatch, unpatched):
    before = trl_utils._use_triton
    monkeypatch.setattr(fused_head, "DECISION", "compact = something_else(hidden_states.device)")
    assert fused_head.compact_fused_head_on_cpu() is False
    assert trl_utils._use_triton is before
    monkeypatch.delattr(trl_utils, "_use_triton")
    assert fused_head.compact_fused_head_on_cpu() is False


def test_cuda_decision_unchanged(unpatched):
    original = trl_utils._use_triton
    fused_head.compact_fused_head_on_cpu()
    for kind in ("cuda", "xpu", "meta"):
        device = torch.device(kind)
        assert trl_utils._use_triton(device) == original(device)
    assert trl_utils._use_triton(torch.device("cpu")) is True
