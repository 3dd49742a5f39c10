"""An Evaluate of run adapters formats prompts as the runs were trained (issue 45's class: every
command that reads a run resolves it the way the sidecar did). `agent eval`, `select`, `compare`
and `try` send runtime.prompt_format "auto"; a run trained with "raw" on a model that has a chat
template was measured through the template before. Unit tier: the rule, on stand-in run records."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.workers.evaluate import follow_trained_prompt_format


def registry(**formats):
    runs = {run_id: SimpleNamespace(request=pb.TrainRequest(runtime=pb.RuntimeSettings(prompt_format=fmt)))
            for run_id, fmt in formats.items()}
    return SimpleNamespace(get=runs.__getitem__)


def request(prompt_format=""):
    return pb.EvaluateRequest(runtime=pb.RuntimeSettings(prompt_format=prompt_format))


@pytest.mark.parametrize("asked", ["", "auto"])
@pytest.mark.parametrize("trained", ["raw", "chat"])
def test_auto_follows_the_format_a_run_was_trained_with(asked, trained):
    req = request(asked)
    follow_trained_prompt_format(req, ["a"], registry(a=trained))
    assert req.runtime.prompt_format == trained


def test_runs_trained_with_auto_leave_auto_to_the_tokenizer():
    req = request("auto")
    follow_trained_prompt_format(req, ["a", "b"], registry(a="auto", b=""))
    assert req.runtime.prompt_format == "auto"


def test_a_named_format_is_kept():
    req = request("chat")
    follow_trained_prompt_format(req, ["a"], registry(a="raw"))
    assert req.runtime.prompt_format == "chat"


def test_runs_trained_with_different_formats_need_one_named():
    with pytest.raises(InvalidArgument) as ei:
        follow_trained_prompt_format(request("auto"), ["a", "b"], registry(a="raw", b="chat"))
    assert ei.value.field == "runtime.prompt_format"
    assert "a: raw" in ei.value.message and "b: chat" in ei.value.message
