"""Shared pytest setup: no model hub (everything loads from local paths), the tiny default model,
and the two tiers.

Tiers: a test that trains (the embedded model's build included), starts a sidecar or starts any
other subprocess is marked ``slow``; `make test-fast` runs ``pytest -m "not slow"``, `make test`
runs everything. The marks are checked, not trusted: an unmarked test that asks for the tiny
model fails at collection, and one that starts a process fails when it does.
"""

import os
import subprocess

# Set before anything imports transformers/huggingface_hub: nothing may download at test time.
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

# matplotlib builds its font cache on first import by running `fc-list`: do it here, once, so a unit
# test that draws a plot on a fresh machine does not count as starting a process.
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.font_manager  # noqa: E402,F401

SLOW_FIXTURES = {"tiny_model_dir", "tiny_model_home"}
"""Fixtures that build (train) the embedded default model or hand it to a subprocess."""


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: trains a model, starts a sidecar or a subprocess "
                                       "(left out by `make test-fast`, i.e. -m 'not slow')")


def pytest_collection_modifyitems(config, items):
    unmarked = [item.nodeid for item in items
                if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("slow") is None]
    if unmarked:
        raise pytest.UsageError("these tests use the tiny model but are not marked slow: " + ", ".join(unmarked))


@pytest.fixture(autouse=True)
def unit_tier_starts_no_process(request, monkeypatch):
    """In a test not marked slow, starting a process is an error naming the test."""
    if request.node.get_closest_marker("slow") is not None:
        return

    def refuse(self, *args, **kwargs):
        raise AssertionError(f"{request.node.nodeid} starts a process ({args[0] if args else kwargs.get('args')!r}) "
                             "but is not marked slow")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


@pytest.fixture(scope="session")
def py_trainer_home(tmp_path_factory) -> Path:
    """A PY_TRAINER_HOME for this session; the default model is cached under <home>/models.

    `make test` sets $PY_TRAINER_HOME (default ~/.cache/py-trainer) so pytest, the TS tests and
    the sidecars they start build each model once; run alone, pytest uses a fresh temp folder.
    """
    env = os.environ.get("PY_TRAINER_HOME")
    return Path(env) if env else tmp_path_factory.mktemp("py_trainer_home")


@pytest.fixture(scope="session")
def tiny_model_dir(py_trainer_home) -> Path:
    """The embedded default model, built once per session (~35 s on 2 cores) into a temp cache."""
    from py_trainer.models.tiny_model import ensure_default_model

    return ensure_default_model(cache_dir=py_trainer_home / "models")


@pytest.fixture(scope="session")
def tiny_model_home(tiny_model_dir, py_trainer_home) -> Path:
    """PY_TRAINER_HOME to hand to subprocesses (sidecar, worker): the default model is already built there."""
    return py_trainer_home
