"""The embedded agent model's builder (py_trainer/models/tiny_agent_model.py): demonstration episodes are
rendered exactly as the episode runner writes episodes, the assistant turns alone are trained, a
malformed file names file:line and the field, and a build (a few SFT steps) loads through
from_pretrained with ChatML's turn markers as single tokens and <|im_end|> as EOS."""

from __future__ import annotations

import json

import pytest

from py_trainer.models.agent_format import segments, system_and_user, tool_turns
from py_trainer.models.tiny_agent_model import is_agent_corpus, load_episodes

TOOLS = [{"name": "cancel_order", "description": "Cancel it.", "parameters": {"type": "object", "properties": {}}}]
EPISODE = {"tools": TOOLS, "messages": [
    {"role": "system", "content": "Act with the tools."},
    {"role": "user", "content": "Cancel order AX-1."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "type": "function",
                                                          "function": {"name": "cancel_order", "arguments": {}}}]},
    {"role": "tool", "name": "cancel_order", "content": "Done."},
    {"role": "assistant", "content": "Cancelled."},
]}


def test_segments_are_the_runners_pieces_and_only_assistant_turns_are_trained():
    end = "<|im_end|>"
    got = segments(EPISODE, end)
    assert got == [
        (system_and_user("Act with the tools.", TOOLS, "Cancel order AX-1.", end), False),
        ('<tool_call>{"name": "cancel_order", "arguments": {}}</tool_call>' + end, True),
        (tool_turns(["Done."], end), False),
        ("Cancelled." + end, True),
    ]


def test_a_malformed_file_names_the_line_and_field(tmp_path):
    f = tmp_path / "demos.jsonl"
    f.write_text(json.dumps(EPISODE) + "\n" + json.dumps({"messages": [{"role": "user", "content": "x"}]}) + "\n")
    assert is_agent_corpus(f)
    with pytest.raises(ValueError, match=r"demos.jsonl:2: messages: need a user message and must end with an assistant"):
        load_episodes(f)
    f.write_text('{"id": "t1", "prompt": "a task row", "answers": ["x"]}\n')
    assert not is_agent_corpus(f)  # a task file builds the task-file model instead


@pytest.mark.slow
def test_a_short_build_loads_with_chatml_markers_as_tokens(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from py_trainer.models.agent_format import end_token, stop_token_ids
    from py_trainer.models.tiny_agent_model import build_agent_model

    f = tmp_path / "demos.jsonl"
    f.write_text("".join(json.dumps(EPISODE) + "\n" for _ in range(4)))
    out = build_agent_model(tmp_path / "model", f, sft_steps=3)
    tok = AutoTokenizer.from_pretrained(out)
    AutoModelForCausalLM.from_pretrained(out)
    assert end_token(tok) == "<|im_end|>" and tok.eos_token == "<|im_end|>"
    assert len(tok.tokenize("<|im_start|>")) == 1 and stop_token_ids(tok) == [tok.eos_token_id]
    assert json.loads((out / "build_info.json").read_text())["episodes"] == 4
