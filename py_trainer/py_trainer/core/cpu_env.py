"""What every py-trainer process sets for torch's CPU threads and for glibc malloc before torch
loads (`server.cli.main` applies it; the workers the sidecar starts inherit the environment).
Measured in docs/real-model.md, "Speed on CPU"; tests/test_cpu_threads.py."""

from __future__ import annotations

OPENMP_ENV = {"GOMP_SPINCOUNT": "5000"}
"""Set (unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT) before torch loads, in this process
and so in every worker it starts: torch's OpenMP threads spin ~0.25 ms waiting for each other,
then sleep. libgomp's default spin (300,000) burns the slice of a thread whose partner was
descheduled on cores shared with other jobs: the real model's forward + backward took 52-64 s
spinning against 17 s sleeping at once (OMP_WAIT_POLICY=PASSIVE, the setting before). Sleeping at
once costs a futex wake per operation instead: a SmolLM2 decode step of 128 rows, 271 ms passive
against 199 ms with this spin on a quiet machine, 447 against 523 ms with another job on one of
the two cores (scripts/profile_decode_rows.py; docs/real-model.md, "Speed on CPU")."""
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
              "MALLOC_TOP_PAD_": str(64 << 20)}
"""Set (unless the user set any MALLOC_* or GLIBC_TUNABLES) for glibc malloc, which reads them
when a process starts (this process gets the same by `mallopt`): blocks up to 32 MiB (glibc's
most) come from the heap, and freed memory goes back to the system only past 1 GiB. Otherwise
every large tensor (a KV-cache buffer, a batch's activations) is a fresh mmap, page-faulted in on
first touch and unmapped when freed: an Evaluate of 200 tasks x 2 variants on SmolLM2 took 4.0M
minor faults and 13.6 s of system time in a 45 s script, against 1.0M and 6.0 s (docs/real-model.md)."""


OPENMP_WAIT_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
"""The variables that say how libgomp's threads wait: a user who set one keeps their choice."""


def is_malloc_var(name: str) -> bool:
    """Whether `name` tunes glibc malloc (a MALLOC_* variable or GLIBC_TUNABLES): a user who set one
    keeps their malloc."""
    return name.startswith("MALLOC_") or name == "GLIBC_TUNABLES"


def cpu_process_env(env) -> dict[str, str]:
    """The variables `main` adds to the environment `env`: OPENMP_ENV and MALLOC_ENV, each unless
    the user set a variable of its kind."""
    out = {}
    if not any(k in env for k in OPENMP_WAIT_VARS):
        out.update(OPENMP_ENV)
    if not any(is_malloc_var(k) for k in env):
        out.update(MALLOC_ENV)
    return out


def tune_malloc(values: dict[str, str]) -> None:
    """MALLOC_ENV's settings for this process, already started (glibc only; elsewhere nothing)."""
    import ctypes
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    for key, param in (("MALLOC_TRIM_THRESHOLD_", -1), ("MALLOC_TOP_PAD_", -2), ("MALLOC_MMAP_THRESHOLD_", -3)):
        if key in values:
            libc.mallopt(param, int(values[key]))
