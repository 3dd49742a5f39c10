"""Shared pytest setup: no model hub (everything loads from local paths) and the tiny default model."""

import os

# Set before anything imports transformers/huggingface_hub: nothing may download at test time.
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def py_trainer_home(tmp_path_factory) -> Path:
    """A PY_TRAINER_HOME for this session; the default model is cached under <home>/models.

    `make test` sets $PY_TRAINER_HOME to the repo's .cache/py-trainer so pytest, the TS tests and
    the sidecars they start build the model once; run alone, pytest uses a fresh temp folder.
    """
    env = os.environ.get("PY_TRAINER_HOME")
    return Path(env) if env else tmp_path_factory.mktemp("py_trainer_home")


@pytest.fixture(scope="session")
def tiny_model_dir(py_trainer_home) -> Path:
    """The embedded default model, built once per session (~35 s on 2 cores) into a temp cache."""
    from py_trainer.tiny_model import ensure_default_model

    return ensure_default_model(cache_dir=py_trainer_home / "models")


@pytest.fixture(scope="session")
def tiny_model_home(tiny_model_dir, py_trainer_home) -> Path:
    """PY_TRAINER_HOME to hand to subprocesses (sidecar, worker): the default model is already built there."""
    return py_trainer_home
