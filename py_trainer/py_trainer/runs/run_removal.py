"""Deleting a run folder in two halves (`trash_run_folder`, then `finish_removal`): a delete that
cannot finish says what is left, and no message shows the server's own paths (`under_runs`); what
a creation or a delete cut short left on the runs root is recognised by name (`is_leftover`)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from py_trainer.core.errors import FailedPrecondition
from py_trainer.runs.run_request import digest_file

# `create_run_folder`'s temp name: "." + run id + "." + mkdtemp's 8 random characters.
TEMP_RUN_FOLDER_RE = re.compile(r"\.[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.[A-Za-z0-9_]{8}")
# A deleted run's folder, renamed out of the way before it is removed: "." + run id + ".deleted-" + 8 hex.
TRASH_FOLDER_RE = re.compile(r"\.[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.deleted-[0-9a-f]{8}")


def is_leftover(folder: Path) -> bool:
    """A runs-root folder that a run creation or a delete cut short left behind (never renamed in, or
    never removed): a real folder named as `create_run_folder`'s temp folder or a trash folder."""
    return bool(TEMP_RUN_FOLDER_RE.fullmatch(folder.name) or TRASH_FOLDER_RE.fullmatch(folder.name)) \
        and folder.is_dir() and not folder.is_symlink()


def remove_tree(path: Path) -> str:
    """Remove a folder (a symlink: the link only); '' when done, else the first thing that could not be removed."""
    failed: list[str] = []
    if os.path.islink(path):
        try:
            os.unlink(path)
        except OSError as err:
            return f"cannot remove {path}: {err.strerror}"
        return ""
    shutil.rmtree(path, onerror=lambda _fn, p, exc: failed.append(f"cannot remove {p}: {getattr(exc[1], 'strerror', exc[1])}"))
    return failed[0] if failed else ""


def undeletable(folder: Path) -> str:
    """'' when this process can remove everything under `folder` (every folder readable, writable and
    searchable), else the first that is not."""
    blocked: list[str] = []
    if not os.access(folder, os.R_OK | os.W_OK | os.X_OK):
        return f"{folder} is not readable and writable by the sidecar (uid {os.getuid()})"
    for dirpath, dirnames, _ in os.walk(folder, onerror=lambda err: blocked.append(f"{err.filename}: {err.strerror}")):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p) and not os.access(p, os.R_OK | os.W_OK | os.X_OK):
                blocked.append(f"{p} is not readable and writable by the sidecar (uid {os.getuid()})")
    return blocked[0] if blocked else ""


def trash_run_folder(folder: Path, trash: Path) -> Path | None:
    """The first half of a delete: a run folder that is a symlink loses its link (never what it points
    to; None); a real one is checked to be removable and renamed to `trash` (the id is free at once).
    FAILED_PRECONDITION naming what blocks it, nothing changed; None when the folder is already gone."""
    run_id = folder.name
    if folder.is_symlink():
        if why := remove_tree(folder):
            raise FailedPrecondition("run_id", f"run {run_id!r} cannot be deleted: {under_runs(why, folder)}")
        return None
    if why := undeletable(folder) if folder.exists() else "":
        raise FailedPrecondition("run_id", f"run {run_id!r} cannot be deleted: {under_runs(why, folder)}; "
                                           "nothing was removed")
    try:
        os.rename(folder, trash)
    except FileNotFoundError:
        return None  # removed by hand meanwhile
    except OSError as err:
        raise FailedPrecondition("run_id", f"run {run_id!r}: cannot remove {run_id}: {err.strerror}") from None
    digest_file(folder).unlink(missing_ok=True)
    return trash


def finish_removal(trash: Path, folder: Path) -> str:
    """The second half of a delete: remove `trash`; when something cannot be removed, what is left goes
    back to `folder` (never a trash folder left behind silently) and the message says so ('' when done)."""
    why = under_runs(remove_tree(trash), folder)
    if not why:
        return ""
    try:
        os.rename(trash, folder)
        return f"the delete could not finish ({why}); what is left is back at {folder.name}"
    except OSError as err:
        return f"the delete could not finish ({why}); what is left is at {trash.name} ({err.strerror})"


def under_runs(message: str, folder: Path) -> str:
    """`message` with the runs root taken out of its paths: a client sees `sealed/kept`, never the server's paths."""
    return message.replace(f"{os.path.abspath(folder.parent)}{os.sep}", "")
