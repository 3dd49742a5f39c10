"""The warm start (TRAIN_MODE_SFT) and GRPO from its adapter (TrainRequest.init_adapter), through a
real sidecar with TRL's SFTTrainer / GRPOTrainer on the embedded default model; the TS agent's tool
host is played by tests/_agent_host.py.

- the token builder (`agent_format.transcript_ids`): the mask is 1 exactly on the assistant turns
  (text, tool-call blocks, stop token), and the ids are the runner's and the template's rendering;
- a few SFT steps lower the demonstrations' assistant-token loss by a margin (seeded);
- a GRPO run with init_adapter starts from the SFT adapter's weights (a learning rate of 1e-9
  leaves them as they were) and its step-0 held-out episodes are the SFT run's end ones;
- bad requests are INVALID_ARGUMENT naming the field.
"""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf import json_format

from _agent_host import agent_spec, serve
from _sidecar import running_sidecar, sidecar_env, stub_for
from py_trainer.agents.demonstrations import as_agent_episode, load_demonstrations
from py_trainer.agents.spec import AgentSetup
from py_trainer.core.errors import InvalidArgument, RequestError
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

PAIRS = [(a, b) for a in range(1, 7) for b in range(1, 4)]
EXPECTED = {f"sum-{a}-{b}": str(a + b) for a, b in PAIRS}
HELD = [{"id": "sum-6-2", "prompt": "add 6 and 2"}, {"id": "sum-6-3", "prompt": "add 6 and 3"}]


def demonstration(a: int, b: int) -> dict:
    """One episode as demonstrations.ts writes it: the call, its result, the answer."""
    call = {"name": "add", "arguments": {"a": a, "b": b}}
    return {"tools": [spec_tools()[0]], "messages": [
        {"role": "user", "content": f"add {a} and {b}"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function", "function": call}]},
        {"role": "tool", "name": "add", "tool_call_id": "call_0", "content": str(a + b)},
        {"role": "assistant", "content": str(a + b)},
    ]}


def spec_tools() -> list[dict]:
    return AgentSetup.from_spec(one_tool_spec("127.0.0.1:1")).tools


def one_tool_spec(address: str) -> pb.AgentSpec:
    spec = agent_spec(address, max_turns=2, max_tool_calls=2, tool_timeout_ms=2000)
    del spec.tools[1:]  # `add` alone: the embedded model's 512 positions hold the prompt
    spec.system_prompt = ""
    return spec


def write_demonstrations(folder, name="demos.jsonl") -> str:
    (folder / name).write_text("".join(json.dumps(demonstration(a, b)) + "\n" for a, b in PAIRS[:-2]))
    return name


# ---------------------------------------------------------------------------------------------
# Fast: the demonstrations under the spec


def test_demonstrations_take_the_specs_prompt_and_refuse_what_it_cannot_render(tmp_path):
    setup = AgentSetup.from_spec(one_tool_spec("127.0.0.1:1"))
    name = write_demonstrations(tmp_path)
    episodes = load_demonstrations(pb.Dataset(jsonl_path=name, limit=3), tmp_path, setup)
    assert len(episodes) == 3 and episodes[0]["tools"] == setup.tools
    assert [m["role"] for m in episodes[0]["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    cases = {
        "dataset": pb.Dataset(inline=pb.InlineRows(rows=[pb.TaskRow(id="a", prompt="p")])),
        "dataset.split": pb.Dataset(jsonl_path=name, split="train"),
        "dataset.jsonl_path": pb.Dataset(jsonl_path="missing.jsonl"),
    }
    for field, ds in cases.items():
        with pytest.raises(RequestError) as err:  # a missing file is NOT_FOUND, as for task files
            load_demonstrations(ds, tmp_path, setup)
        assert err.value.field == field
    other = demonstration(1, 2)
    other["messages"][1]["tool_calls"][0]["function"]["name"] = "subtract"
    with pytest.raises(InvalidArgument, match="calls 'subtract', not one of agent.tools"):
        as_agent_episode(other, setup, "demos.jsonl episode 1")
    other = demonstration(1, 2)
    other["messages"].insert(0, {"role": "system", "content": "Another prompt."})
    with pytest.raises(InvalidArgument, match="system message differs from agent.system_prompt"):
        as_agent_episode(other, setup, "demos.jsonl episode 1")


# ---------------------------------------------------------------------------------------------
# Slow: the token builder on the embedded model's tokenizer, and runs through a sidecar


@pytest.mark.slow
def test_transcript_ids_train_exactly_the_assistant_turns(tiny_model_dir):
    from transformers import AutoTokenizer
    from transformers.utils.chat_template_utils import render_jinja_template

    from py_trainer.agents.episodes import start_episodes
    from py_trainer.models.agent_format import TOOL_CHAT_TEMPLATE, assistant_text, end_token, transcript_ids

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    setup = AgentSetup.from_spec(agent_spec("127.0.0.1:1"))  # a system prompt and four tools
    episode = as_agent_episode(demonstration(2, 3), setup, "episode")
    ids, mask = transcript_ids(tok, episode)
    end = end_token(tok)
    assert len(ids) == len(mask) and set(mask) == {0, 1}
    trained = tok.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=False)
    assistant = [m for m in episode["messages"] if m["role"] == "assistant"]
    assert trained == "".join(assistant_text(m) + end for m in assistant)
    assert trained == '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>' + end + "5" + end
    context = tok.decode([t for t, m in zip(ids, mask) if not m], skip_special_tokens=False)
    assert "You are a careful calculator." in context and "<|im_start|>tool\n5" in context
    assert "<|im_start|>tool" not in trained and "add 2 and 3" not in trained
    # the prompt's ids are the episode runner's, and the whole is the agent template's rendering
    [runner] = start_episodes(tok, setup, [("t", "add 2 and 3")], ["e"])
    assert ids[:len(runner.prompt_ids)] == runner.prompt_ids and not any(mask[:len(runner.prompt_ids)])
    [rendered], _ = render_jinja_template([episode["messages"]], tools=[{"type": "function", "function": t} for t in
                                                                        setup.tools],
                                          chat_template=TOOL_CHAT_TEMPLATE, end_token=end)
    assert tok.decode(ids, skip_special_tokens=False) + "\n" == rendered


@pytest.fixture(scope="module")
def host():
    server, state, address = serve(EXPECTED)
    yield state, address
    server.stop(0)


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory, tiny_model_home):
    tmp = tmp_path_factory.mktemp("warm")
    with running_sidecar(tmp, env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))) as sc:
        write_demonstrations(sc.data_root)
        yield sc


def sft_request(run_id: str, address: str) -> pb.TrainRequest:
    return json_format.ParseDict({
        "run_id": run_id, "mode": "TRAIN_MODE_SFT", "dataset": {"jsonl_path": "demos.jsonl"},
        "sft": {"max_steps": 8, "learning_rate": 5e-3, "per_device_train_batch_size": 8, "seed": 3},
        "grpo": {"max_completion_length": 48},
        "held_out": {"dataset": {"inline": {"rows": HELD}}, "num_prompts": 2, "samples_per_prompt": 2},
        "agent": json_format.MessageToDict(one_tool_spec(address), preserving_proto_field_name=True),
    }, pb.TrainRequest())


def grpo_request(run_id: str, address: str, init: dict) -> pb.TrainRequest:
    return json_format.ParseDict({
        "run_id": run_id, "dataset": {"inline": {"rows": [{"id": k, "prompt": f"add {k.split('-')[1]} and "
                                                           f"{k.split('-')[2]}"} for k in EXPECTED][:-2]}},
        "grpo": {"max_steps": 1, "num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 48,
                 "save_steps": 1, "seed": 3, "learning_rate": 1e-9},
        "held_out": {"dataset": {"inline": {"rows": HELD}}, "num_prompts": 2, "samples_per_prompt": 2},
        "agent": json_format.MessageToDict(one_tool_spec(address), preserving_proto_field_name=True),
        "init_adapter": init,
    }, pb.TrainRequest())


def train(sidecar, req) -> list[pb.RunEvent]:
    ch, stub = stub_for(sidecar)
    with ch:
        events = [r.event for r in stub.Train(req, timeout=600)]
    assert events[-1].state_change.state == pb.RUN_STATE_SUCCEEDED, events[-1].state_change.reason
    return events


@pytest.fixture(scope="module")
def warm(sidecar, host):
    return train(sidecar, sft_request("warm", host[1]))


def assistant_loss(model_dir, adapter, data_root) -> float:
    """Mean assistant-token NLL (nats) of the demonstrations under the base (+ the adapter)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from py_trainer.agents.demonstrations import sft_rows

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter))
    model.eval()
    setup = AgentSetup.from_spec(one_tool_spec("127.0.0.1:1"))
    total = count = 0.0
    for row in sft_rows(tok, load_demonstrations(pb.Dataset(jsonl_path="demos.jsonl"), data_root, setup)):
        ids = torch.tensor([row["input_ids"]])
        labels = torch.where(torch.tensor([row["assistant_masks"]]) == 1, ids, -100)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(logits[0], labels[0, 1:], ignore_index=-100, reduction="sum")
        total, count = total + loss.item(), count + int((labels[0, 1:] != -100).sum())
    return total / count


@pytest.mark.slow
def test_sft_lowers_the_demonstrations_assistant_loss(sidecar, warm, tiny_model_dir):
    steps = [e.train_step for e in warm if e.HasField("train_step")]
    assert [s.step for s in steps] == list(range(1, 9))
    assert all("loss" in s.metrics and "mean_token_accuracy" in s.metrics for s in steps)
    result = next(e.result for e in warm if e.HasField("result"))
    assert result.start_reward.num_prompts == 2 and len(result.end_reward.per_prompt) == 2
    folder = sidecar.runs_root / "warm"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["demonstrations"] == len(PAIRS) - 2 and summary["assistant_tokens"] > 0
    assert (folder / "episodes" / "held-out-step-000000.jsonl").is_file()
    before = assistant_loss(tiny_model_dir, None, sidecar.data_root)
    after = assistant_loss(tiny_model_dir, folder / "adapter", sidecar.data_root)
    print(f"SFT: assistant loss {before:.3f} -> {after:.3f} nats/token; run {result.train_seconds:.1f} s")
    assert after < 0.6 * before, (before, after)


@pytest.mark.slow
def test_grpo_from_the_warm_start_starts_from_its_adapter(sidecar, host, warm):
    from safetensors.torch import load_file

    events = train(sidecar, grpo_request("from-warm", host[1], {"run_id": "warm"}))
    root = sidecar.runs_root
    sft = load_file(str(root / "warm" / "adapter" / "adapter_model.safetensors"))
    grpo = load_file(str(root / "from-warm" / "adapter" / "adapter_model.safetensors"))
    assert set(grpo) == set(sft)
    for k in sft:
        assert (grpo[k] - sft[k]).abs().max().item() < 1e-5, k
    assert any(v.abs().max().item() > 1e-3 for k, v in sft.items() if "lora_B" in k)  # not a fresh LoRA (B = 0)
    config = json.loads((root / "from-warm" / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == json.loads((root / "warm" / "adapter" / "adapter_config.json").read_text())["r"]
    start = next(e.result for e in events if e.HasField("result")).start_reward
    end_of_sft = next(e.result for e in warm if e.HasField("result")).end_reward
    assert list(start.per_prompt) == list(end_of_sft.per_prompt)
    sft_eps = (root / "warm" / "episodes" / "held-out-step-000008.jsonl").read_text().splitlines()
    grpo_eps = (root / "from-warm" / "episodes" / "held-out-step-000000.jsonl").read_text().splitlines()
    assert [json.loads(x)["messages"] for x in grpo_eps] == [json.loads(x)["messages"] for x in sft_eps]


@pytest.mark.slow
def test_bad_warm_start_requests_are_refused_naming_the_field(sidecar, host, warm):
    address = host[1]
    cases = {
        "init_adapter.run_id": grpo_request("r1", address, {"run_id": "no-such-run"}),
        "init_adapter.path": grpo_request("r2", address, {"path": "no-adapter-here"}),
        "lora": grpo_request("r3", address, {"run_id": "warm"}),
        "agent": sft_request("r5", address),
        "dataset": sft_request("r6", address),
        "held_out.dataset": sft_request("r7", address),
        "grpo.beta": sft_request("r8", address),
        "init_adapter": sft_request("r9", address),
    }
    cases["lora"].lora.r = 4
    cases["agent"].ClearField("agent")
    cases["dataset"].dataset.CopyFrom(pb.Dataset(inline=pb.InlineRows(rows=[pb.TaskRow(id="a", prompt="p")])))
    cases["held_out.dataset"].held_out.ClearField("dataset")
    cases["grpo.beta"].grpo.beta = 0.1
    cases["init_adapter"].init_adapter.run_id = "warm"
    ch, stub = stub_for(sidecar)
    with ch:
        for field, req in cases.items():
            with pytest.raises(grpc.RpcError) as err:
                list(stub.Train(req, timeout=60))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, err.value.details())
            assert err.value.details().startswith(field + ":"), (field, err.value.details())
