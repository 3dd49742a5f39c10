"""The agent template's pieces and its parser (py_trainer.models.agent_format), without a model:
what a model may write in a turn is untrusted, and no turn may crash the episode runner."""

from __future__ import annotations

from py_trainer.models.agent_format import parse_turn


def test_a_deeply_nested_call_is_a_malformed_call_not_a_crash():
    # a small model that repeats "[" (issue 55): json.loads raises RecursionError, not JSONDecodeError
    turn = parse_turn("<tool_call>" + "[" * 1500)
    assert len(turn.blocks) == 1 and "malformed" in turn.blocks[0], turn.blocks
    assert "nested" in turn.blocks[0]["malformed"]
    closed = parse_turn('<tool_call>{"name": "a", "arguments": ' + "[" * 1500 + "]" * 1500 + "}</tool_call> ok")
    assert "malformed" in closed.blocks[0] and closed.content == "ok"


def test_parse_turn_keeps_block_order():
    turn = parse_turn('think <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call> then '
                      '<tool_call>oops</tool_call><tool_call>{"name": "b", "arguments": [1]}</tool_call>')
    assert turn.content == "think  then"
    assert turn.blocks[0] == {"name": "a", "arguments": {"x": 1}}
    assert "malformed" in turn.blocks[1] and "arguments" in turn.blocks[2]["malformed"]
