"""The episode runner (py_trainer.agents.episodes) on the embedded model's tokenizer: a scripted
model plays fixed turns (a real model cannot be made to call a tool on cue), the tools run in a
stand-in host over real gRPC, and every episode's ids are checked token by token against the agent
chat template: the mask is 1 exactly on the model's tokens, and the decoded ids are the template's
rendering of the transcript. A last test runs the real embedded model through the same runner."""

from __future__ import annotations

import pytest

from _agent_host import agent_spec, serve
from py_trainer.agents.episodes import AgentSetup, run_episodes, start_episodes
from py_trainer.agents.tool_host import ToolHost, ToolHostLost
from py_trainer.models.agent_format import TOOL_CHAT_TEMPLATE, end_token

pytestmark = pytest.mark.slow

SCRIPT = {
    # task prompt -> the model's turns, in order
    "add 2 and 3": ['<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>', "5"],
    "answer at once": ["7"],
    "broken call": ['<tool_call>{"name": add}</tool_call>', '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
                    "I give up"],
    "tool throws": ['<tool_call>{"name": "boom", "arguments": {}}</tool_call>', "sorry"],
    "tool hangs": ['<tool_call>{"name": "slow", "arguments": {}}</tool_call>', "late"],
    "tool floods": ['<tool_call>{"name": "huge", "arguments": {}}</tool_call>', "done"],
    "loops": ['<tool_call>{"name": "add", "arguments": {"a": 1, "b": 1}}</tool_call>'] * 10,
    "nests": ["<tool_call>" + "[" * 1500, "stopped"],
    "rambles": ["5 " * 200],
}
EXPECTED = {"t-add": "5", "t-once": "7"}


class ScriptedModel:
    """Plays SCRIPT: reads the task and the turn number off the row it is asked to continue."""

    def __init__(self, tokenizer):
        import torch

        self.tok, self.torch, self.training = tokenizer, torch, False
        self.param = torch.nn.Parameter(torch.zeros(1))

    def parameters(self):
        return iter([self.param])

    def eval(self):
        self.training = False

    def train(self):
        self.training = True

    def generate(self, input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, **_):
        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            text = self.tok.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=False)
            task = text.split("<|im_start|>user\n", 1)[1].split(end_token(self.tok), 1)[0]
            turn = text.count("<|im_start|>assistant\n") - 1
            reply = self.tok(SCRIPT[task][turn], add_special_tokens=False)["input_ids"] + [eos_token_id[0]]
            rows.append(ids + reply[:max_new_tokens])
        width = max(len(r) for r in rows)
        return self.torch.tensor([r + [pad_token_id] * (width - len(r)) for r in rows])


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def host():
    server, state, address = serve(EXPECTED)
    yield state, address
    server.stop(0)


def run(tokenizer, address, tasks, model=None, max_new_tokens=64, **limits):
    setup = AgentSetup.from_spec(agent_spec(address, tool_timeout_ms=300, max_tool_output_chars=100, **limits))
    client = ToolHost(address, setup.tool_timeout_ms)
    eps = start_episodes(tokenizer, setup, tasks, [f"e{i}" for i in range(len(tasks))])
    run_episodes(model or ScriptedModel(tokenizer), tokenizer, setup, client, eps, temperature=1.0, top_p=1.0,
                 max_new_tokens=max_new_tokens, max_total_tokens=None, seed=0)
    return setup, eps


def rendered(tokenizer, setup, e) -> str:
    tools = [{"type": "function", "function": t} for t in setup.tools]
    return tokenizer.apply_chat_template(e.messages, tools=tools, chat_template=TOOL_CHAT_TEMPLATE, tokenize=False,
                                         end_token=end_token(tokenizer))


def test_ids_are_the_template_rendering_and_the_mask_covers_exactly_the_models_tokens(tokenizer, host):
    _, address = host
    tasks = [("t-add", "add 2 and 3"), ("t-once", "answer at once"), ("t-broken", "broken call"),
             ("t-boom", "tool throws"), ("t-flood", "tool floods")]
    setup, eps = run(tokenizer, address, tasks)
    for e in eps:
        full = tokenizer.decode(e.prompt_ids + e.completion_ids, skip_special_tokens=False)
        assert full + "\n" == rendered(tokenizer, setup, e), e.task_id
        assert len(e.env_mask) == len(e.completion_ids)
        model_text = tokenizer.decode([t for t, m in zip(e.completion_ids, e.env_mask) if m], skip_special_tokens=False)
        assistant = "".join(m["content"] + end_token(tokenizer) for m in e.messages if m["role"] == "assistant")
        assert model_text == assistant, e.task_id
        tool_text = tokenizer.decode([t for t, m in zip(e.completion_ids, e.env_mask) if not m],
                                     skip_special_tokens=False)
        for m in e.messages:
            if m["role"] == "tool":
                assert m["content"] in tool_text  # what the model sees, cut notes included
                assert len(m["content"]) < 4 or m["content"] not in model_text  # the model may repeat a short one


def test_outcomes_are_counted_and_scored(tokenizer, host):
    state, address = host
    tasks = [("t-add", "add 2 and 3"), ("t-once", "answer at once"), ("t-broken", "broken call"),
             ("t-boom", "tool throws"), ("t-hang", "tool hangs"), ("t-flood", "tool floods")]
    setup, eps = run(tokenizer, address, tasks)
    by = {e.task_id: e for e in eps}
    add = by["t-add"]
    assert (add.stats.turns, add.stats.tool_calls, add.stats.ended_by, add.final_answer) == (2, 1, "answer", "5")
    assert add.messages[-2] == {"role": "tool", "name": "add", "content": "5", "tool_call_id": "call_1_0"}
    assert add.scores == {"correct": 1.0, "used_tool": 1.0} and setup.reward(add.scores) == 1.5
    assert by["t-once"].scores == {"correct": 1.0, "used_tool": 0.0} and by["t-once"].stats.turns == 1
    broken = by["t-broken"].stats
    assert (broken.malformed_calls, broken.unknown_tool_calls, broken.tool_calls, broken.turns) == (1, 1, 0, 3)
    assert "unknown tool 'nope'" in by["t-broken"].messages[-2]["content"]
    assert by["t-boom"].stats.tool_errors == 1 and by["t-boom"].messages[-2]["content"] == "Error: boom"
    hang = by["t-hang"]
    assert hang.stats.tool_errors == 1 and "timed out" in hang.messages[-2]["content"], hang.messages
    flood = by["t-flood"]  # one cut, one note, in the model's view: the sidecar's (the host only bounds the wire)
    assert flood.messages[-2]["content"] == "x" * 100 + "\n[error: output cut at 100 characters]"
    assert flood.stats.tool_errors == 1
    assert ("e0", "add", {"a": 2, "b": 3}) in state.calls


def test_limits_end_an_episode(tokenizer, host):
    _, address = host
    _, [turns] = run(tokenizer, address, [("t-loop", "loops")], max_turns=3, max_tool_calls=10)
    assert (turns.stats.turns, turns.stats.ended_by) == (3, "max_turns")
    _, [calls] = run(tokenizer, address, [("t-loop", "loops")], max_turns=10, max_tool_calls=2)
    assert (calls.stats.tool_calls, calls.stats.ended_by) == (2, "max_tool_calls")


def test_a_host_that_is_gone_fails_naming_the_agent(tokenizer):
    server, _, address = serve({})
    server.stop(0)
    with pytest.raises(ToolHostLost, match="agent.tool_host: the TS agent's tool host at 127.0.0.1"):
        run(tokenizer, address, [("t-add", "add 2 and 3")])


def test_the_real_embedded_model_runs_through_the_same_runner(tiny_model_dir, tokenizer, host):
    from transformers import AutoModelForCausalLM

    _, address = host
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    setup, eps = run(tokenizer, address, [("t-add", "add 2 and 3"), ("t-once", "answer at once")], model=model)
    for e in eps:
        assert e.stats.ended_by in ("answer", "max_turns", "max_tool_calls", "max_tokens")
        text = tokenizer.decode(e.prompt_ids + e.completion_ids, skip_special_tokens=False)
        cut = "" if e.stats.ended_by != "max_tokens" else end_token(tokenizer)  # a cut turn has no stop token
        assert text + cut + "\n" == rendered(tokenizer, setup, e)
        assert set(e.scores) == {"correct", "used_tool"}


def test_a_call_nested_past_the_parser_is_a_counted_malformed_call(tokenizer, host):
    _, address = host
    _, [e] = run(tokenizer, address, [("t-nest", "nests")], max_new_tokens=4096)
    assert (e.stats.malformed_calls, e.stats.turns, e.stats.ended_by) == (1, 2, "answer"), e.stats
    assert "malformed tool call: not JSON (nested too deeply)" in e.messages[-2]["content"]
    _, [cut] = run(tokenizer, address, [("t-nest", "nests")])  # the turn cut by the budget is parsed too
    assert (cut.stats.malformed_calls, cut.stats.turns, cut.stats.ended_by) == (1, 1, "max_tokens"), cut.stats


def test_the_final_answer_is_computed_once_and_sent_to_the_scorers(tokenizer, host):
    # docs/agents.md: "" when a limit ended the episode, whatever its last turn said; the scorers get
    # the runner's value in the request (they used to compute their own) and Evaluate's completion
    # is the same field (workers/evaluate.py agent_samples)
    state, address = host
    _, eps = run(tokenizer, address, [("t-add", "add 2 and 3"), ("t-add", "rambles"), ("t-add", "loops")],
                 max_turns=2)
    answered, cut, limited = eps
    assert (answered.stats.ended_by, answered.final_answer) == ("answer", "5")
    assert (cut.stats.ended_by, cut.final_answer) == ("max_tokens", "")
    assert (limited.stats.ended_by, limited.final_answer) == ("max_turns", "")
    for e in eps:
        assert state.final_answers[e.episode_id] == e.final_answer
    assert [e.scores["correct"] for e in eps] == [1.0, 0.0, 0.0]
