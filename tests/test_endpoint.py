"""The OpenAI-compatible endpoint (py_trainer.endpoint; docs/agent-programs.md) over real HTTP
(uvicorn), driven by the OpenAI Python client's own request shapes (tools, tool results, n > 1,
stream) and by raw bodies for every refusal. A scripted model plays fixed turns (a real model
cannot be made to call a tool on cue) on the embedded model's tokenizer; token in, token out is
checked on the ids the endpoint recorded."""

from __future__ import annotations

import json

import httpx
import pytest

from py_trainer.endpoint.app import EndpointServer, build_app
from py_trainer.endpoint.policy import Policy
from py_trainer.endpoint.rollouts import Call, Limits, RolloutBook, rows_of
from py_trainer.models.agent_format import end_token

pytestmark = pytest.mark.slow

TOOLS = [{"type": "function", "function": {"name": "cancel_order", "description": "Cancel the order.",
                                           "parameters": {"type": "object", "properties": {"order": {"type": "string"}},
                                                          "required": ["order"]}}}]
CALL = '<tool_call>{"name": "cancel_order", "arguments": {"order": "AX-1"}}</tool_call>'


def script(last: str, tool_results: int) -> str:
    """The model's reply, from the last user message and how many tool results it has seen."""
    if "ramble" in last:
        return "blah " * 100
    if "bad call" in last and tool_results == 0:
        return '<tool_call>{"name": cancel}</tool_call>'
    if "wrong args" in last and tool_results == 0:
        return '<tool_call>{"name": "cancel_order", "arguments": {"order": 7}}</tool_call>'
    if "cancel" in last and tool_results == 0:
        return "On it. " + CALL
    return "Your order is cancelled."


class ScriptedModel:
    def __init__(self, tokenizer):
        import torch

        self.tok, self.torch, self.training = tokenizer, torch, False
        self.param = torch.nn.Parameter(torch.zeros(1))
        self.prompts: list[list[int]] = []

    def parameters(self):
        return iter([self.param])

    def eval(self):
        self.training = False

    def train(self):
        self.training = True

    def generate(self, input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, **_):
        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            own = [t for t, m in zip(ids, mask) if m]
            self.prompts.append(own)
            text = self.tok.decode(own, skip_special_tokens=False)
            last = text.rsplit("<|im_start|>user\n", 1)[1]
            reply = self.tok(script(last, last.count("<|im_start|>tool\n")), add_special_tokens=False)["input_ids"]
            rows.append(ids + (reply + [eos_token_id[0]])[:max_new_tokens])
        width = max(len(r) for r in rows)
        return self.torch.tensor([r + [pad_token_id] * (width - len(r)) for r in rows])


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    policy = Policy("scripted", ScriptedModel(tok), tok, max_new_tokens=200)
    book = RolloutBook()
    server = EndpointServer(build_app({"scripted": policy}, book, None, lambda: policy)).start()
    yield server, policy, book, tok
    server.stop()


def client(url: str, key: str = "unused"):
    from openai import OpenAI

    return OpenAI(base_url=url, api_key=key, max_retries=0)


def agent_loop(c, question: str, model: str = "scripted") -> list[dict]:
    """A user's agent, as written against any OpenAI endpoint: call, run the tool, answer."""
    messages = [{"role": "system", "content": "You handle orders."}, {"role": "user", "content": question}]
    for _ in range(4):
        reply = c.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=200).choices[0]
        msg = reply.message
        messages.append(msg.model_dump(exclude_none=True))
        if not msg.tool_calls:
            break
        for call in msg.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "Done: cancelled."})
    return messages


def test_the_openai_client_gets_tool_calls_and_answers(served):
    server, *_ = served
    c = client(server.url + "/v1")
    assert [m.id for m in c.models.list().data] == ["scripted"]
    first = c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "please cancel AX-1"}],
                                      tools=TOOLS)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "On it."
    [call] = choice.message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("cancel_order", {"order": "AX-1"})
    messages = agent_loop(c, "please cancel AX-1")
    assert messages[-1]["content"] == "Your order is cancelled." and messages[-2]["role"] == "tool"
    two = c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "hi"}], n=2)
    assert [ch.index for ch in two.choices] == [0, 1] and two.usage.completion_tokens > 0


def test_stream_gives_the_same_reply_as_chunks(served):
    server, *_ = served
    c = client(server.url + "/v1")
    chunks = list(c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "cancel AX-1"}],
                                            tools=TOOLS, stream=True, stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    calls = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert text == "On it." and [tc.function.name for tc in calls] == ["cancel_order"] and finish == ["tool_calls"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


@pytest.mark.parametrize("body, param", [
    ({"messages": [{"role": "user", "content": "x"}]}, "model"),
    ({"model": "scripted", "messages": []}, "messages"),
    ({"model": "scripted", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"model": "scripted", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"model": "scripted", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
     "messages[0].content[0].type"),
    ({"model": "scripted", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    ({"model": "scripted", "messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]},
     "messages[0].tool_calls[0].function.arguments"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "code"}]}, "tools[0].type"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0].function.name"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": 7}}}]},
     "tools[0].function.parameters"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "temperature": 3}, "temperature"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "top_p": 0}, "top_p"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 1.5},
     "max_completion_tokens"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "n": 100}, "n"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "seed": "1"}, "seed"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "tools": TOOLS,
      "tool_choice": {"type": "function", "function": {"name": "other"}}}, "tool_choice.function.name"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "logit_bias": {"1": 5}}, "logit_bias"),
    ({"model": "scripted", "messages": [{"role": "user", "content": "x"}], "frequency_penalty": 1}, "frequency_penalty"),
])
def test_every_malformed_body_is_a_400_naming_the_field(served, body, param):
    server, *_ = served
    r = httpx.post(server.url + "/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error" and err["message"].startswith(param)


def test_refusals_outside_the_body(served):
    server, policy, book, _ = served
    assert httpx.post(server.url + "/v1/chat/completions", content=b"{nope").json()["error"]["message"].startswith(
        "the body is not JSON")
    r = httpx.post(server.url + "/v1/chat/completions", json={"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    r = httpx.post(server.url + "/rollouts/nope/v1/chat/completions", headers={"authorization": f"Bearer {book.api_key}"},
                   json={"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "rollout_not_found"
    rollout = book.open(Limits(1.0, 1.0, 32, None, 4, 0))
    try:
        r = httpx.get(f"{server.url}/rollouts/{rollout.id}/v1/models")
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    finally:
        book.close(rollout)
    assert httpx.get(server.url + "/v2/anything").status_code == 404
    policy.context = 40
    try:
        r = httpx.post(server.url + "/v1/chat/completions",
                       json={"model": "scripted", "messages": [{"role": "user", "content": "word " * 50}]})
        assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
        assert r.json()["error"]["code"] == "context_length_exceeded"
    finally:
        policy.context = None


def test_a_malformed_call_comes_back_as_text_and_is_counted(served):
    server, policy, book, _ = served
    rollout = book.open(Limits(1.0, 1.0, 200, None, 8, 0))
    try:
        c = client(f"{server.url}/rollouts/{rollout.id}/v1", book.api_key)
        for question in ("bad call", "wrong args"):
            msg = c.chat.completions.create(model="x", messages=[{"role": "user", "content": question}],
                                            tools=TOOLS).choices[0].message
            assert msg.tool_calls is None and "<tool_call>" in msg.content
    finally:
        book.close(rollout)
    assert [(call.malformed, call.tool_calls) for call in rollout.calls] == [(1, 0), (1, 0)]


def test_a_rollout_is_one_row_whose_ids_are_what_the_endpoint_served(served):
    """Token in, token out: the row decodes to the concatenation of what was served (the model's
    tokens, mask 1) and what the program sent between calls (mask 0); nothing is tokenized again."""
    server, policy, book, tok = served
    rollout = book.open(Limits(1.0, 1.0, 200, None, 8, 0))
    try:
        messages = agent_loop(client(f"{server.url}/rollouts/{rollout.id}/v1", book.api_key), "please cancel AX-1")
    finally:
        book.close(rollout)
    assert len(rollout.calls) == 2 and messages[-1]["content"] == "Your order is cancelled."
    [row] = rows_of(rollout.calls)
    assert row.prompt_ids == rollout.calls[0].prompt_ids
    assert row.prompt_ids + row.completion_ids == rollout.calls[1].prompt_ids + rollout.calls[1].completion_ids
    model_ids = [t for t, m in zip(row.completion_ids, row.env_mask) if m]
    assert model_ids == rollout.calls[0].completion_ids + rollout.calls[1].completion_ids
    env_text = tok.decode([t for t, m in zip(row.completion_ids, row.env_mask) if not m], skip_special_tokens=False)
    assert env_text == "\n<|im_start|>tool\nDone: cancelled." + end_token(tok) + "\n<|im_start|>assistant\n"
    # the second prompt re-used the first reply's served ids (On it. + the block + the stop token)
    assert policy.model.prompts[-1] == rollout.calls[1].prompt_ids


def test_a_rewritten_history_splits_the_rollout_and_the_split_is_counted(served):
    server, _, book, _ = served
    rollout = book.open(Limits(1.0, 1.0, 200, None, 8, 0))
    try:
        c = client(f"{server.url}/rollouts/{rollout.id}/v1", book.api_key)
        first = c.chat.completions.create(model="x", messages=[{"role": "user", "content": "cancel AX-1"}], tools=TOOLS)
        msg = first.choices[0].message
        summary = [{"role": "user", "content": "cancel AX-1 (summary: a call was made, it worked)"},
                   {"role": "assistant", "content": "noted"}, {"role": "user", "content": "so?"}]
        c.chat.completions.create(model="x", messages=summary, tools=TOOLS)
        assert msg.tool_calls
    finally:
        book.close(rollout)
    rows = rows_of(rollout.calls)
    assert len(rows) == 2 and [r.last_call for r in rows] == [0, 1]


def test_rows_follow_exact_prefixes_only():
    calls = [Call([1, 2], [3, 4], [-0.1, -0.2], ""), Call([1, 2, 3, 4, 9], [5], [-0.3], ""),
             Call([1, 2, 3, 7], [8], [-0.4], "")]
    first, second = rows_of(calls)
    assert (first.prompt_ids, first.completion_ids, first.env_mask) == ([1, 2], [3, 4, 9, 5], [1, 1, 0, 1])
    assert first.logprobs == [-0.1, -0.2, 0.0, -0.3] and first.last_call == 1
    assert (second.prompt_ids, second.completion_ids, second.env_mask, second.last_call) == ([1, 2, 3, 7], [8], [1], 2)


def test_limits_answer_with_an_empty_reply_and_are_recorded(served):
    server, _, book, _ = served
    rollout = book.open(Limits(1.0, 1.0, 200, None, 1, 0))
    try:
        c = client(f"{server.url}/rollouts/{rollout.id}/v1", book.api_key)
        c.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
        again = c.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}]).choices[0]
    finally:
        book.close(rollout)
    assert (again.message.content, again.finish_reason) == ("", "length")
    assert len(rollout.calls) == 1 and rollout.ended_by == "max_turns"


def test_concurrent_rollouts_never_cross(served):
    """Many rollouts at once (their calls batch together in the generator): each rollout records its
    own calls alone, each prompt its own task."""
    from concurrent.futures import ThreadPoolExecutor

    server, _, book, tok = served
    rollouts = [book.open(Limits(1.0, 1.0, 200, None, 8, 0)) for _ in range(12)]
    questions = [f"please cancel order {i}" if i % 2 else f"order {i}: ramble" for i in range(12)]
    try:
        with ThreadPoolExecutor(12) as pool:
            list(pool.map(lambda i: agent_loop(client(f"{server.url}/rollouts/{rollouts[i].id}/v1", book.api_key),
                                               questions[i]), range(12)))
    finally:
        for r in rollouts:
            book.close(r)
    for r, q in zip(rollouts, questions):
        assert len(r.calls) == (2 if "please cancel" in q else 1)
        for call in r.calls:
            assert q in tok.decode(call.prompt_ids, skip_special_tokens=False)
        assert len(rows_of(r.calls)) == 1
