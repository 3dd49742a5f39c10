"""Validation never builds a model on the sidecar's event loop (issue 30, item 2): an Evaluate with
prompt_format chat on an embedded base not built yet built it while validating (health stalled
12-16 s). The embedded builder gives its tokenizer no chat template, so chat is refused up front,
FAILED_PRECONDITION naming runtime.prompt_format, with nothing built."""

from __future__ import annotations

import pytest

from py_trainer import tiny_model
from py_trainer.errors import FailedPrecondition
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models import check_chat_template


@pytest.mark.parametrize("base", ["", "embedded:tasks.jsonl"])
def test_chat_on_an_embedded_base_not_built_is_refused_without_building(tmp_path, monkeypatch, base):
    monkeypatch.setenv("PY_TRAINER_HOME", str(tmp_path / "home"))  # nothing built here
    monkeypatch.setattr(tiny_model, "build_tiny_model", lambda *a, **k: pytest.fail("validation built a model"))
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "prompt": "p", "answers": ["x"]}\n')
    with pytest.raises(FailedPrecondition) as ei:
        check_chat_template(pb.RuntimeSettings(prompt_format="chat"), base, tmp_path)
    assert ei.value.field == "runtime.prompt_format" and "has no chat template" in str(ei.value)
    check_chat_template(pb.RuntimeSettings(prompt_format="raw"), base, tmp_path)  # raw needs no template
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("config.json"))
