"""Root-confined paths: a refused path says which root it must be relative to (issue 22, item 11:
'must be relative to its root' named no root)."""

from __future__ import annotations

import pytest

from py_trainer.core.errors import InvalidArgument
from py_trainer.core.paths import resolve_under


@pytest.mark.parametrize("rel", ["/etc/passwd", "~/adapter"])
def test_an_absolute_path_is_refused_naming_the_root(tmp_path, rel):
    with pytest.raises(InvalidArgument) as ei:
        resolve_under(tmp_path, rel, "adapters[0].path")
    assert ei.value.field == "adapters[0].path"
    assert f"must be relative to the sidecar's root {tmp_path}" in str(ei.value)


def test_an_escape_is_refused_naming_the_root(tmp_path):
    (tmp_path / "inside").mkdir()
    (tmp_path / "inside" / "out").symlink_to("/etc")
    with pytest.raises(InvalidArgument) as ei:
        resolve_under(tmp_path, "inside/out", "path")
    assert f"resolves outside the sidecar's root {tmp_path}" in str(ei.value)


def test_a_run_records_its_data_root_and_dataset_file_as_absolute_paths(tmp_path, monkeypatch):
    """Issue 45 item 1: summary.json says where the sidecar read the run's files, so the agent
    resolves a relative dataset.jsonl_path against the sidecar's data root, not its own."""
    from py_trainer.core.paths import run_data_paths
    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "capitals.jsonl").write_text("{}\n")
    monkeypatch.chdir(tmp_path / "tasks")
    req = pb.TrainRequest(dataset=pb.Dataset(jsonl_path="tasks/capitals.jsonl"))
    got = run_data_paths(tmp_path, req)
    assert got == {"data_root": str(tmp_path.resolve()), "dataset_path": str((tmp_path / "tasks" / "capitals.jsonl").resolve())}
    # a relative data root is recorded absolute; inline rows have no dataset file
    assert run_data_paths(type(tmp_path)(".."), pb.TrainRequest()) == {"data_root": str(tmp_path.resolve()), "dataset_path": None}
