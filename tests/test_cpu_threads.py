"""What every py-trainer process sets for torch's CPU threads and for malloc before torch loads
(core/cpu_env.py, cpu_process_env, docs/real-model.md "Speed on CPU"), unless the user chose:
- OpenMP threads spin a bounded while (GOMP_SPINCOUNT=5000, ~0.25 ms) before they sleep: libgomp's
  default spin (300,000) made a real-model step 3-4x slower on cores shared with other jobs, and
  sleeping at once (OMP_WAIT_POLICY=PASSIVE, the setting before) cost a quiet machine ~25% of
  every decode step (a futex wake per operation);
- glibc malloc keeps large freed blocks (MALLOC_MMAP_THRESHOLD_ 32 MiB, trimming past 1 GiB):
  each KV-cache buffer was otherwise a fresh mmap, page-faulted in on first touch and given back
  on free (4.0M minor faults and 13.6 s of system time in a 45 s Evaluate script, against 1.0M and
  6.0 s)."""

from __future__ import annotations

import os

import pytest

from py_trainer.core.cpu_env import cpu_process_env

OMP = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
MALLOC = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


def test_threads_spin_a_bounded_while_and_malloc_keeps_large_blocks_by_default():
    env = cpu_process_env({})
    assert env["GOMP_SPINCOUNT"] == "5000" and "OMP_WAIT_POLICY" not in env
    assert int(env["MALLOC_MMAP_THRESHOLD_"]) == 32 << 20  # glibc's most: larger values are refused
    assert int(env["MALLOC_TRIM_THRESHOLD_"]) == 1 << 30 and int(env["MALLOC_TOP_PAD_"]) > 0


@pytest.mark.parametrize("mine", [{"OMP_WAIT_POLICY": "PASSIVE"}, {"OMP_WAIT_POLICY": "ACTIVE"},
                                  {"GOMP_SPINCOUNT": "0"}])
def test_a_users_openmp_wait_setting_is_left_alone(mine):
    env = cpu_process_env(mine)
    assert not any(k in env for k in OMP), env
    assert "MALLOC_MMAP_THRESHOLD_" in env


@pytest.mark.parametrize("mine", [{"MALLOC_ARENA_MAX": "2"}, {"MALLOC_TRIM_THRESHOLD_": "0"},
                                  {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}])
def test_a_users_malloc_setting_is_left_alone(mine):
    env = cpu_process_env(mine)
    assert not any(k in env for k in MALLOC), env
    assert env["GOMP_SPINCOUNT"] == "5000"


def test_py_trainer_sets_them_in_its_own_environment_for_the_workers_it_starts(monkeypatch):
    from py_trainer.server.cli import main

    for key in OMP + MALLOC + ("MALLOC_ARENA_MAX",):
        monkeypatch.setenv(key, "")  # so that monkeypatch puts back what was there (or nothing)
        monkeypatch.delenv(key)
    main(["defaults"])
    assert os.environ["GOMP_SPINCOUNT"] == "5000" and "OMP_WAIT_POLICY" not in os.environ
    assert os.environ["MALLOC_MMAP_THRESHOLD_"] == str(32 << 20)  # inherited by the fork server and workers
    monkeypatch.setenv("GOMP_SPINCOUNT", "123")
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    main(["defaults"])
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE" and os.environ["GOMP_SPINCOUNT"] == "123"
