"""Two exports to one --out (issue 30, item 9): the second ended in a traceback (`OSError: [Errno 39]
Directory not empty` from out.rmdir()); now it is one line naming --out, and it leaves nothing behind."""

from __future__ import annotations

import shutil

import pytest

from py_trainer.server.cli import main


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


SIGTERM_MID_EXPORT = """
import os, shutil, signal, sys
import py_trainer.models.loading as models
from py_trainer.server.cli import main

def term(*a, **k):  # what `agent export` forwards to its child when it is killed, mid-write
    os.kill(os.getpid(), signal.SIGTERM)
    raise AssertionError("SIGTERM did not stop the export")

shutil.copy2 = term
models.resolve_model_path = term
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("merge", [False, True])
def test_sigterm_mid_export_cleans_up_as_ctrl_c_does(tmp_path, merge):
    """Issue 44, item 4: `agent export --merge` forwards SIGTERM to `py-trainer export`, which had no
    handler for it: it died at once and left its `.<out>.*` temp folder. SIGTERM now runs what
    Ctrl-C runs (here sent by the export to itself while it writes its temp folder): nothing is
    left, one line, exit 130."""
    import subprocess
    import sys

    from _sidecar import sidecar_env

    adapter, out = tmp_path / "adapter", tmp_path / "out"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    argv = ["export", "--adapter", str(adapter), "--out", str(out)] + (["--merge"] if merge else [])
    p = subprocess.run([sys.executable, "-c", SIGTERM_MID_EXPORT, *argv], capture_output=True, text=True,
                       env=sidecar_env(), timeout=300)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["adapter"], (p.returncode, p.stderr[-2000:])
    assert p.returncode == 130, (p.returncode, p.stderr[-2000:])
    assert p.stderr.strip() == "py-trainer export: interrupted (SIGTERM)", p.stderr[-2000:]
