"""Issue 32, item 7: the sidecar and the agent accept exactly the same task files. One table of
bad (and good) files, tests/data/bad_task_files.json, is checked here against the sidecar's
loaders (task_file.load_task_file; a Train/Evaluate dataset's jsonl_path, data.task_rows; the
embedded-model build behind `py-trainer init-model --tasks`) and in
ts_agent/test/task-file-table.test.ts against the agent's (tasks.ts loadTaskFile)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from py_trainer.server import cli

from py_trainer.core.errors import InvalidArgument
from py_trainer.data.request_data import task_rows
from py_trainer.data.task_file import TaskFileError, load_task_file
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models import tiny_model

TABLE = json.loads((Path(__file__).parent / "data" / "bad_task_files.json").read_text())


def write_case(folder: Path, case: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tickets.jsonl"
    if "file_base64" in case:
        path.write_bytes(base64.b64decode(case["file_base64"]))
    else:
        path.write_text("\n".join(case["lines"]) + "\n", encoding="utf-8")
    if "meta" in case:
        meta = case["meta"]
        (folder / "tickets.meta.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
    return path


def expected_prefix(path: Path, case: dict) -> str:
    where = str(path).removesuffix(".jsonl") + ".meta.json" if case["meta_file"] else str(path)
    return f"{where}:{case['line']}: " if case["line"] is not None else f"{where}: "


@pytest.mark.parametrize("case", TABLE["bad"], ids=[c["name"] for c in TABLE["bad"]])
def test_the_sidecars_loader_refuses_each_bad_file_in_the_agents_words(tmp_path, case):
    path = write_case(tmp_path, case)
    with pytest.raises(TaskFileError) as ei:
        load_task_file(path)
    msg = str(ei.value)
    assert msg.startswith(expected_prefix(path, case)), msg
    assert case["message"] in msg, msg
    assert not msg.endswith(" at)"), f"cut off: {msg}"


@pytest.mark.parametrize("case", TABLE["bad"], ids=[c["name"] for c in TABLE["bad"]])
def test_a_dataset_jsonl_path_refuses_each_bad_file(tmp_path, case):
    path = write_case(tmp_path, case)
    with pytest.raises(InvalidArgument) as ei:
        task_rows(pb.Dataset(jsonl_path=path.name), tmp_path, "dataset", need_answers=True)
    assert ei.value.field == "dataset.jsonl_path", ei.value
    assert case["message"] in str(ei.value), str(ei.value)


@pytest.mark.parametrize("case", TABLE["bad"], ids=[c["name"] for c in TABLE["bad"]])
def test_init_model_refuses_each_bad_file_before_building(tmp_path, case, capsys, monkeypatch):
    path = write_case(tmp_path, case)
    monkeypatch.setattr(tiny_model, "_sft", lambda *a, **k: pytest.fail("built a model from a bad file"))
    code = cli.main(["init-model", "--tasks", str(path), "--out", str(tmp_path / "model")])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.count("\n") == 0, err
    assert err.startswith(f"py-trainer init-model: {expected_prefix(path, case)}"), err
    assert case["message"] in err, err


@pytest.mark.parametrize("case", TABLE["good"], ids=[c["name"] for c in TABLE["good"]])
def test_both_accept_each_good_file(tmp_path, case):
    path = write_case(tmp_path, case)
    assert len(load_task_file(path).tasks) == case["tasks"]
    assert len(task_rows(pb.Dataset(jsonl_path=path.name), tmp_path, "dataset", need_answers=True)) == case["tasks"]


def test_the_shipped_task_files_load():
    tasks = Path(__file__).resolve().parents[1] / "agent-evals" / "tasks"
    for name in ("aml_typology.jsonl", "ticket_routing.jsonl", "arithmetic.jsonl"):
        assert load_task_file(tasks / name).tasks, name
