"""torch's OpenMP threads wait passively in every py-trainer process (cli.CPU_THREAD_ENV): on CPU
cores shared with other jobs, spinning threads made a real-model step 3-4x slower (docs/real-model.md)."""

from __future__ import annotations

import os


def test_py_trainer_makes_torchs_threads_wait_passively_unless_the_user_chose(monkeypatch, capsys):
    from py_trainer.server.cli import main

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    main(["defaults"])
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"  # inherited by the workers the sidecar starts
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    main(["defaults"])
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
