"""Base models: how a request's `base_model` string becomes a model folder `from_pretrained` loads.

- "" -> the embedded default model (`tiny_model.py` builds it once and caches it);
- "embedded:<tasks file under the data root>" -> that task file's embedded model, built likewise;
- a folder under the data root -> itself (`models.resolve_model_path` resolves it);
- anything else -> a hub id, passed through unchanged.
"""

from __future__ import annotations

from pathlib import Path

from py_trainer.config import EMBEDDED_PREFIX
from py_trainer.errors import InvalidArgument
from py_trainer.paths import resolve_under
from py_trainer.tiny_model import default_model_dir, embedded_model_dir, ensure_default_model, ensure_embedded_model


def embedded_tasks_path(name: str, data_root: Path, field: str = "base_model") -> Path | None:
    """The task file of an "embedded:<tasks file>" base (under the data root), None for any other name."""
    if not name.startswith(EMBEDDED_PREFIX):
        return None
    path = resolve_under(data_root, name[len(EMBEDDED_PREFIX):], field)
    if not path.is_file():
        raise InvalidArgument(field, f"{name!r}: {path.name} is not a task file")
    return path


def model_dir_for(name: str, data_root: Path) -> Path | None:
    """The cache folder of an embedded base ("" or "embedded:<tasks>"), built or not; None for others."""
    if name == "":
        return default_model_dir()
    tasks = embedded_tasks_path(name, data_root)
    return embedded_model_dir(tasks) if tasks is not None else None


def resolve_base_model(name: str, data_root: Path = Path(".")) -> str:
    """"" -> the embedded default model's folder, "embedded:<tasks file under data_root>" -> that
    file's embedded model (each built on first use); anything else unchanged. A task file the
    build cannot use is INVALID_ARGUMENT on base_model, naming file:line."""
    if name == "":
        return str(ensure_default_model())
    tasks = embedded_tasks_path(name, data_root)
    if tasks is None:
        return name
    try:
        return str(ensure_embedded_model(tasks))
    except ValueError as err:
        raise InvalidArgument("base_model", f"{name!r}: {err}") from None
