"""Files that appear whole or not at all.

Every file the sidecar writes into a run folder goes through `write_atomic` (temp name in the same
folder, fsync, rename, fsync the folder), so a reader or a restarted sidecar sees either the old
file or the complete new one, never a prefix. The temp file is removed on any failure, and a full
disk raises `errors.DiskFull` naming the file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from py_trainer.core.errors import DiskFull, is_disk_full

TEMP_SUFFIX = ".tmp"


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new entry in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write `path` so readers see either the old file or the whole new one (temp, fsync, rename)."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        fsync_dir(path.parent)
    except BaseException as err:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if is_disk_full(err) and not isinstance(err, DiskFull):
            raise DiskFull(path) from err
        raise


def write_json_atomic(path: Path, obj) -> None:
    """`obj` as indented, key-sorted JSON (NaN allowed, as Python's json writes it), atomically."""
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n")


def write_jsonl_atomic(path: Path, rows, *, ensure_ascii: bool = False) -> None:
    """One JSON object per line, atomically."""
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in rows))
