"""Two exports to one --out (issue 30, item 9): the second ended in a traceback (`OSError: [Errno 39]
Directory not empty` from out.rmdir()); now it is one line naming --out, and it leaves nothing behind."""

from __future__ import annotations

import shutil

import pytest

from py_trainer.cli import main


def test_a_second_export_to_one_out_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    adapter, out = tmp_path / "adapter", tmp_path / "out"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    copy = shutil.copy2

    def the_other_export_finishes_first(src, dst):
        if not out.exists():
            out.mkdir()
            (out / "adapter_config.json").write_text("{}")
        return copy(src, dst)

    monkeypatch.setattr(shutil, "copy2", the_other_export_finishes_first)
    assert main(["export", "--adapter", str(adapter), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"py-trainer export: --out: {out} was filled meanwhile") and "\n" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter", "out"]  # no temp folder left
    assert (out / "adapter_config.json").read_text() == "{}"  # the other export's folder is untouched
