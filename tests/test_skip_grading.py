"""EvaluateRequest.skip_grading (`agent try`: a prompt of the user's has no expected answer): rows
need no answers and no grader runs; graders given with it, or an agent task, are refused naming the
field. Unit tier: plan_evaluation only (the generation is agent try's e2e test)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from google.protobuf import json_format

from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.workers.evaluate import plan_evaluation

ROW = {"id": "prompt", "prompt": "What is the capital of France? Reply with just the city name."}


def plan(tmp_path, **fields):
    req = json_format.ParseDict({"tasks": {"inline": {"rows": [ROW]}}, **fields}, pb.EvaluateRequest())
    return plan_evaluation(req, SimpleNamespace(data_root=tmp_path, get=None))


def test_a_row_without_answers_is_planned_ungraded(tmp_path):
    p = plan(tmp_path, skip_grading=True)
    assert p.graders == [] and list(p.request.graders) == []
    assert [r.prompt for r in p.rows] == [ROW["prompt"]]


def test_without_skip_grading_a_row_still_needs_answers(tmp_path):
    with pytest.raises(InvalidArgument, match="answers"):
        plan(tmp_path)


@pytest.mark.parametrize("fields, field", [
    ({"graders": [{"name": "exact_match"}]}, "graders"),
    ({"agent": {"tool_host": "127.0.0.1:1"}}, "skip_grading"),
])
def test_skip_grading_refuses_graders_and_agent_tasks(tmp_path, fields, field):
    with pytest.raises(InvalidArgument) as ei:
        plan(tmp_path, skip_grading=True, **fields)
    assert ei.value.field == field
