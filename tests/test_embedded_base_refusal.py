"""A task file the embedded model cannot be built from is refused naming the file as the client gave
it, under the data root, never by the sidecar's absolute path (issue 55 item 12; the run-folder
refusals do the same: core/errors.shown_path)."""

from __future__ import annotations

import pytest

from py_trainer.core.errors import InvalidArgument
from py_trainer.models.base_models import resolve_base_model

TEST_ONLY = '{"id": "a", "split": "test", "prompt": "p", "answers": ["x"]}\n'


def refusal(tmp_path, monkeypatch, name: str, text: str) -> str:
    monkeypatch.setenv("PY_TRAINER_HOME", str(tmp_path / "home"))
    path = tmp_path / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    with pytest.raises(InvalidArgument) as ei:
        resolve_base_model(f"embedded:{name}", tmp_path / "data")
    assert ei.value.field == "base_model"
    assert str(tmp_path) not in ei.value.message, ei.value.message
    return ei.value.message


def test_a_file_with_no_train_rows_is_named_as_the_client_gave_it(tmp_path, monkeypatch):
    assert refusal(tmp_path, monkeypatch, "notrain.jsonl", TEST_ONLY) == (
        "'embedded:notrain.jsonl': notrain.jsonl: no rows with \"split\": \"train\" to build a model from")
    assert refusal(tmp_path, monkeypatch, "sets/notrain.jsonl", TEST_ONLY) == (
        "'embedded:sets/notrain.jsonl': sets/notrain.jsonl: no rows with \"split\": \"train\" to build a model from")


def test_a_bad_line_is_named_under_the_data_root(tmp_path, monkeypatch):
    bad = '{"id": "a", "split": "train", "prompt": "p", "answers": ["x"]}\n{"id": "b", "split": "train", "prompt": "p"}\n'
    message = refusal(tmp_path, monkeypatch, "sets/bad.jsonl", bad)
    assert message.startswith("'embedded:sets/bad.jsonl': sets/bad.jsonl:2: field \"answers\""), message
