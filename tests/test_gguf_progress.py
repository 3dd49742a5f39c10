"""The one-time GGUF conversion is never a silent wait (issue 45 item 4): a training run whose base
is a GGUF file not yet converted says so, as a warning event before the model loads (the agent and
`py-trainer train` print it: `warning [base_model_conversion] at step 0: converting ...`), and the
worker logs it; an Evaluate that pays the conversion streams the same warning before its first
progress (the agent prints it before the wait); a converted base says nothing. Unit tier: the load
is replaced by one that stops, the evaluation by one that returns at once."""

from __future__ import annotations

import asyncio
import logging

import pytest
from google.protobuf import json_format

from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.base_models import conversion_pending, gguf_model_dir, gguf_path
from py_trainer.training import skeleton as training
from py_trainer.workers import evaluate

SHORT = "smollm2-135m-instruct"


class Loading(Exception):
    pass


def start_run(tmp_path, monkeypatch, base_model: str) -> list[pb.RunEvent]:
    def load_model(*args, **kwargs):
        raise Loading()

    monkeypatch.setattr(training, "load_model", load_model)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "request.json").write_text(json_format.MessageToJson(pb.TrainRequest(base_model=base_model)))
    events: list[pb.RunEvent] = []
    with pytest.raises(Loading):
        training.run_training(run_dir, tmp_path, events.append, lambda: False, mode=None)
    return events


def test_a_run_on_an_unconverted_gguf_base_says_so_before_the_model_loads(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("PY_TRAINER_HOME", str(tmp_path / "home"))
    caplog.set_level(logging.WARNING)
    events = start_run(tmp_path, monkeypatch, SHORT)
    assert [e.WhichOneof("kind") for e in events] == ["warning"]
    w = events[0].warning
    assert w.code == "base_model_conversion" and w.step == 0
    assert w.message == ("converting SmolLM2-135M-Instruct.Q4_1.gguf from GGUF into a model folder before the first "
                         "step (one time, about a minute here; later runs load the converted folder)")
    assert w.message in caplog.text  # the worker's log, which the sidecar's log carries


def test_a_converted_gguf_base_or_another_base_says_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PY_TRAINER_HOME", str(tmp_path / "home"))
    folder = gguf_model_dir(gguf_path(SHORT, tmp_path))
    folder.mkdir(parents=True)
    (folder / "build_info.json").write_text("{}")
    assert conversion_pending(SHORT, tmp_path) == ""
    assert start_run(tmp_path, monkeypatch, SHORT) == []
    assert conversion_pending("Qwen/Qwen2.5-0.5B", tmp_path) == "" and conversion_pending("", tmp_path) == ""


def evaluate_responses(tmp_path, monkeypatch, base_model: str) -> list[pb.EvaluateResponse]:
    monkeypatch.setattr(evaluate, "run_evaluation", lambda plan, data_root, progress: pb.EvaluateResult(base_model="m"))
    plan = evaluate.EvalPlan(base_model=base_model, adapters=[], rows=[], graders=[],
                             request=pb.EvaluateRequest(base_model=base_model), adapter_runs={})

    async def collect():
        return [r async for r in evaluate.stream_evaluation(plan, tmp_path)]

    return asyncio.run(collect())


def test_an_evaluate_on_an_unconverted_gguf_base_says_so_before_the_wait(tmp_path, monkeypatch):
    monkeypatch.setenv("PY_TRAINER_HOME", str(tmp_path / "home"))
    responses = evaluate_responses(tmp_path, monkeypatch, SHORT)
    assert [r.WhichOneof("kind") for r in responses] == ["warning", "result"]
    w = responses[0].warning
    assert w.code == "base_model_conversion" and w.step == 0
    assert w.message == ("converting SmolLM2-135M-Instruct.Q4_1.gguf from GGUF into a model folder before the eval "
                         "(one time, about a minute here; later loads use the converted folder)")
    folder = gguf_model_dir(gguf_path(SHORT, tmp_path))
    folder.mkdir(parents=True)
    (folder / "build_info.json").write_text("{}")
    assert [r.WhichOneof("kind") for r in evaluate_responses(tmp_path, monkeypatch, SHORT)] == ["result"]


def sample_responses(tmp_path, monkeypatch, base_model: str) -> list[pb.SampleGroupsResponse]:
    from py_trainer.workers import sampling

    def one_group(req, data_root, adapter, should_stop=None):
        yield pb.RankedGroup(prompt="p")

    monkeypatch.setattr(sampling, "sample_groups", one_group)
    req = pb.SampleGroupsRequest(base_model=base_model, prompts=["p"], k=2)

    async def collect():
        return [r async for r in sampling.stream_groups(req, tmp_path, None)]

    return asyncio.run(collect())


def test_a_sample_groups_on_an_unconverted_gguf_base_says_so_before_the_wait(tmp_path, monkeypatch, caplog):
    """SampleGroups streams the same warning before its first group (and logs it), as Evaluate does."""
    monkeypatch.setenv("PY_TRAINER_HOME", str(tmp_path / "home"))
    caplog.set_level(logging.WARNING)
    responses = sample_responses(tmp_path, monkeypatch, SHORT)
    assert [r.HasField("warning") for r in responses] == [True, False] and responses[1].group.prompt == "p"
    w = responses[0].warning
    assert w.code == "base_model_conversion" and w.step == 0
    assert w.message == ("converting SmolLM2-135M-Instruct.Q4_1.gguf from GGUF into a model folder before sampling "
                         "(one time, about a minute here; later loads use the converted folder)")
    assert w.message in caplog.text
    folder = gguf_model_dir(gguf_path(SHORT, tmp_path))
    folder.mkdir(parents=True)
    (folder / "build_info.json").write_text("{}")
    assert [r.HasField("warning") for r in sample_responses(tmp_path, monkeypatch, SHORT)] == [False]


def test_py_trainer_data_sample_on_an_unconverted_gguf_base_says_so_first(tmp_path, monkeypatch, capsys):
    """`py-trainer data sample` prints the warning line before sampling, as `py-trainer evaluate` does."""
    from py_trainer.server.cli import main
    from py_trainer.workers import sampling

    monkeypatch.setenv("PY_TRAINER_HOME", str(tmp_path / "home"))
    seen: list[str] = []

    def one_group(req, data_root, adapter, should_stop=None):
        seen.append(capsys.readouterr().out)  # what was printed before the first draw
        yield pb.RankedGroup(prompt="a b c")

    monkeypatch.setattr(sampling, "sample_groups", one_group)
    (tmp_path / "s.yaml").write_text(f"base_model: {SHORT}\nprompts: [a b c]\nk: 2\n")
    assert main(["data", "sample", str(tmp_path / "s.yaml"), str(tmp_path / "out.jsonl"),
                 "--data-root", str(tmp_path)]) == 0
    assert "warning [base_model_conversion]: converting SmolLM2-135M-Instruct.Q4_1.gguf from GGUF into a model " \
           "folder before sampling" in seen[0]
