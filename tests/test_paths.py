"""Root-confined paths: a refused path says which root it must be relative to (issue 22, item 11:
'must be relative to its root' named no root)."""

from __future__ import annotations

import pytest

from py_trainer.errors import InvalidArgument
from py_trainer.paths import resolve_under


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
