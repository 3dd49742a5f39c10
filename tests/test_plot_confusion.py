"""`py-trainer plot confusion`: the confusion-matrix PNG the TS report asks for (matplotlib)."""

from __future__ import annotations

import json
import re

import pytest

from py_trainer.plots.curves import check_confusion_spec
from py_trainer.server import cli

SPEC = {"title": "t", "gold": ["a", "b"], "answers": ["a", "b", "(none)"],
        "variants": [{"name": "base", "matrix": [[3, 1, 0], [2, 2, 1]]}, {"name": "adapter", "matrix": [[4, 0, 0], [0, 5, 0]]}]}


def test_writes_a_png(tmp_path, capsys):
    spec, out = tmp_path / "cm.json", tmp_path / "cm.png"
    spec.write_text(json.dumps(SPEC))
    assert cli.main(["plot", "confusion", str(spec), str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert capsys.readouterr().out.strip() == str(out)


@pytest.mark.parametrize("change,field", [
    ({"gold": []}, "gold"),
    ({"answers": "a"}, "answers"),
    ({"variants": []}, "variants"),
    ({"variants": [{"name": "base", "matrix": [[1, 2]]}]}, "variants[0].matrix"),
    ({"variants": [{"name": "base", "matrix": [[1, 2, -1], [0, 0, 0]]}]}, "variants[0].matrix"),
    ({"variants": [{"matrix": [[1, 2, 0], [0, 0, 0]]}]}, "variants[0].name"),
])
def test_bad_spec_names_the_field(tmp_path, capsys, change, field):
    spec = tmp_path / "cm.json"
    spec.write_text(json.dumps({**SPEC, **change}))
    with pytest.raises(ValueError, match="^" + re.escape(field) + ":"):
        check_confusion_spec({**SPEC, **change})
    assert cli.main(["plot", "confusion", str(spec), str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and field in err and not (tmp_path / "x.png").exists()


def test_missing_and_malformed_files_are_one_line(tmp_path, capsys):
    assert cli.main(["plot", "confusion", str(tmp_path / "none.json"), str(tmp_path / "x.png")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"gold": [\n')
    assert cli.main(["plot", "confusion", str(bad), str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"py-trainer plot confusion: {bad}:2:") and "\n" not in err
