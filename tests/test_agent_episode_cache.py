"""The episode runner's KV cache across turns (`episodes.PrefixCaches`): on an embedded agent model
(built here by the project's own builder, a short SFT on shop-assistant demonstrations: it makes
tool calls, some malformed, so its episodes run 1 to 3 turns of different lengths), greedy episodes
run from each episode's cache are token for token those that re-prefill every turn, their masks
and counts too, and the cache is really read (the first turn's decoding starts from the prompt
tokens every episode shares, read once; a later turn's from each episode's own cache).
What a turn keeps is checked on its own too: each episode's held keys and values are those of a
fresh forward over the tokens they claim to hold (a cache one token off can still decode the same
greedy tokens on a batch where that token is never read), rows that left a turn's batch early
(`decoding.decode_batch`) included."""

from __future__ import annotations

import json

import pytest

from _agent_host import serve
from py_trainer.agents.episodes import AgentSetup, PrefixCaches, run_episodes, start_episodes
from py_trainer.agents.tool_host import ToolHost
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

pytestmark = pytest.mark.slow

SYSTEM = "You are a shop assistant."
TOOLS = [{"name": "add", "description": "Add two integers.",
          "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                         "required": ["a", "b"]}}]
SFT_STEPS = 60
"""Enough for calls and multi-turn episodes (30 steps made one-turn episodes that never stopped)."""


def call(i: int, a: int, b: int) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": f"c{i}", "type": "function",
                            "function": {"name": "add", "arguments": {"a": a, "b": b}}}]}


def demonstrations() -> list[dict]:
    """Two calls, then the answer: the second call adds the first one's result to a third number."""
    out = []
    for i in range(32):
        a, b, c = i % 7 + 1, i % 5 + 2, i % 3 + 4
        out.append({"tools": TOOLS, "messages": [
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {a} + {b} + {c}?"},
            call(0, a, b), {"role": "tool", "name": "add", "content": str(a + b)},
            call(1, a + b, c), {"role": "tool", "name": "add", "content": str(a + b + c)},
            {"role": "assistant", "content": f"{a} + {b} + {c} = {a + b + c}."}]})
    return out


@pytest.fixture(scope="module")
def agent_model(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from py_trainer.models.tiny_agent_model import build_agent_model

    folder = tmp_path_factory.mktemp("agent-model")
    demos = folder / "demos.jsonl"
    demos.write_text("".join(json.dumps(d) + "\n" for d in demonstrations()))
    out = build_agent_model(folder / "model", demos, sft_steps=SFT_STEPS)
    return AutoModelForCausalLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)


@pytest.fixture(scope="module")
def host():
    server, _, address = serve({})
    yield address
    server.stop(0)


def episodes(model, tokenizer, address: str, reuse_cache: bool, **sampling):
    spec = pb.AgentSpec(tool_host=address, system_prompt=SYSTEM, max_turns=4)
    spec.tools.add(name="add", description=TOOLS[0]["description"], parameters_json=json.dumps(TOOLS[0]["parameters"]))
    spec.scorers.add(name="used_tool")
    setup = AgentSetup.from_spec(spec)
    tasks = [(f"t{i}", f"What is {i} + {2 * i + 1} + {i % 4}?" + " Please." * (i % 3)) for i in range(8)]
    eps = start_episodes(tokenizer, setup, tasks, [f"e{i}" for i in range(len(tasks))])
    client = ToolHost(address, setup.tool_timeout_ms)
    try:
        run_episodes(model, tokenizer, setup, client, eps, max_new_tokens=48, max_total_tokens=None,
                     reuse_cache=reuse_cache, **sampling)
    finally:
        client.close()
    return eps


def test_greedy_episodes_from_the_cache_are_those_that_re_prefill(agent_model, host, monkeypatch):
    model, tokenizer = agent_model
    assert PrefixCaches.fits(model)
    from py_trainer.models import decoding

    starts = []
    inner = decoding.decode_batch

    def decode_batch(*args, **kwargs):
        cache = kwargs["cache"]
        starts.append(cache.get_seq_length() if cache is not None else None)
        return inner(*args, **kwargs)

    monkeypatch.setattr(decoding, "decode_batch", decode_batch)
    cached = episodes(model, tokenizer, host, True, temperature=0, top_p=1.0, seed=0)
    # the first turn starts from the prompt tokens every episode shares (system prompt, tools, the
    # user turn's opening), read once; later turns from each episode's own cache
    prompts = [e.prompt_ids for e in cached]
    shared = next(i for i in range(min(map(len, prompts))) if len({p[i] for p in prompts}) > 1)
    assert shared > 100, shared
    assert starts[0] == shared and all(n and n > shared for n in starts[1:]) and len(starts) >= 2, (starts, shared)
    starts.clear()
    again = episodes(model, tokenizer, host, False, temperature=0, top_p=1.0, seed=0)
    assert set(starts) == {None}
    turns = [e.stats.turns for e in cached]
    assert max(turns) >= 2 and len(set(len(e.completion_ids) for e in cached)) > 1, turns  # the cache was needed
    for c, a in zip(cached, again):
        assert c.completion_ids == a.completion_ids, c.task_id
        assert (c.env_mask, c.stats, c.messages) == (a.env_mask, a.stats, a.messages), c.task_id


def test_sampled_episodes_from_the_cache_are_those_that_re_prefill(agent_model, host):
    # the same logits and the same per-turn seed draw the same tokens: training's rollouts do not change
    model, tokenizer = agent_model
    cached = episodes(model, tokenizer, host, True, temperature=1.0, top_p=0.95, seed=3)
    again = episodes(model, tokenizer, host, False, temperature=1.0, top_p=0.95, seed=3)
    assert max(e.stats.turns for e in cached) >= 2
    assert [e.completion_ids for e in cached] == [e.completion_ids for e in again]


def test_what_each_episode_keeps_is_a_fresh_forward_of_its_tokens(agent_model, host, monkeypatch):
    import torch

    model, tokenizer = agent_model
    checked = []
    inner = PrefixCaches.keep

    def keep(self, eps, rows, held):
        inner(self, eps, rows, held)
        for e in eps:
            if e.done:
                assert id(e) not in self.held
                continue
            n, layers = self.held[id(e)]
            tokens = (e.prompt_ids + e.completion_ids)[:n]
            assert len(tokens) == n, (e.task_id, n)  # never claims a token the episode does not have yet
            with torch.no_grad():
                fresh = model(input_ids=torch.tensor([tokens]), use_cache=True).cache
            for (k, v), layer in zip(layers, fresh.layers):
                torch.testing.assert_close(k, layer.keys[0], rtol=1e-4, atol=1e-5)
                torch.testing.assert_close(v, layer.values[0], rtol=1e-4, atol=1e-5)
            checked.append(n)

    from py_trainer.models import decoding

    left = []  # rows that left a turn's batch before its end: their keys and values were copied out
    inner_decode = decoding.decode_batch

    def decode_batch(*args, on_rows_left=None, **kwargs):
        def told(kept):
            left.append(kept)
            on_rows_left(kept)
        return inner_decode(*args, on_rows_left=told if on_rows_left else None, **kwargs)

    monkeypatch.setattr(PrefixCaches, "keep", keep)
    monkeypatch.setattr(decoding, "decode_batch", decode_batch)
    episodes(model, tokenizer, host, True, temperature=0, top_p=1.0, seed=0)
    assert len(checked) >= 4 and left, (checked, left)
    checked.clear()
    episodes(model, tokenizer, host, True, temperature=1.0, top_p=0.95, seed=3)
    assert len(checked) >= 4, checked
