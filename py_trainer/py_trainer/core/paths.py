"""Keeping every path a request names inside the sidecar's roots.

A request may name a run id, a dataset file under the data root, an artifact inside a run
folder, or an adapter folder. Each is resolved with symlinks followed and must stay inside its
root: `..`, absolute paths and symlinks that point outside are refused with INVALID_ARGUMENT
naming the field.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from py_trainer.core.errors import InvalidArgument, NotFound

RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # always fullmatch: `$` also matches before a final "\n"


def validate_run_id(run_id: str, field: str = "run_id") -> str:
    """Return `run_id` if it is a safe folder name ([A-Za-z0-9][A-Za-z0-9_-]{0,63})."""
    if not run_id:
        raise InvalidArgument(field, "is required")
    if not isinstance(run_id, str) or not RUN_ID_RE.fullmatch(run_id):
        raise InvalidArgument(field, f"{run_id!r} is not a valid run id ([A-Za-z0-9_-], 1-64 chars)")
    return run_id


def resolve_under(root: Path, rel: str, field: str, *, must_exist: bool = True) -> Path:
    """Resolve `rel` (a relative, '/'-separated path) under `root`, refusing any escape.

    Symlinks are resolved before the containment check, so a link inside the root that points
    outside it is refused like a literal `../`.
    """
    if not rel:
        raise InvalidArgument(field, "is required")
    if "\x00" in rel:
        raise InvalidArgument(field, "contains a NUL byte")
    if os.path.isabs(rel) or rel.startswith("~"):
        raise InvalidArgument(field, f"{rel!r} must be relative to the sidecar's root {root_of(root)}")
    if any(part == ".." for part in Path(rel).parts):
        raise InvalidArgument(field, f"{rel!r} must not contain '..'")
    root_real = Path(os.path.realpath(root))
    target = Path(os.path.realpath(root_real / rel))
    if target != root_real and root_real not in target.parents:
        raise InvalidArgument(field, f"{rel!r} resolves outside the sidecar's root {root_of(root)}")
    if must_exist and not target.exists():
        raise NotFound(field, f"{rel!r} does not exist")
    return target


def root_of(root: Path) -> str:
    """The root as a refusal names it: absolute, so the user knows where the path must lie."""
    return str(Path(root).resolve())


def run_data_paths(data_root: Path, req) -> dict[str, str | None]:
    """summary.json's record of where the sidecar read a run's files: its data root and, for a
    dataset given as `jsonl_path`, that file, both absolute. The agent resolves the run's relative
    paths against them (not against its own working directory or repository)."""
    root = Path(data_root).resolve()
    ds = req.dataset
    rel = ds.jsonl_path if ds.WhichOneof("source") == "jsonl_path" else ""
    return {"data_root": str(root), "dataset_path": str((root / rel).resolve()) if rel else None}
