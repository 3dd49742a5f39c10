"""The runs root as one sidecar's property: an exclusive lock, and a little disk kept in reserve.

Lock: ``<runs_root>/.sidecar.lock`` is held with `fcntl.flock(LOCK_EX | LOCK_NB)` for the
sidecar's whole life and holds its pid. A second sidecar on the same root is refused with the
holder's pid (two writers would interleave one run's events). flock belongs to the open file, so
the kernel drops it when the holder dies, even by kill -9: a stale lock file is simply taken over.
The training worker never inherits it (subprocesses are spawned with close_fds).

Reserve: ``<runs_root>/.space-reserve`` is a small file of real blocks written at startup. When a
write fails with ENOSPC the registry deletes it to make room for the one line that matters, the
run's FAILED "disk full at <path>" event; it is written again once space is back, and no run is
created or started while it cannot be (or while less than MIN_FREE_BYTES are free besides).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from py_trainer.core.errors import is_disk_full

LOCK_FILE = ".sidecar.lock"
RESERVE_FILE = ".space-reserve"
RESERVE_BYTES = 256 * 1024
PID_WIDTH = 16
# Below this much free space (besides the reserve) no run is created or started: it could not
# write a checkpoint, and a run that fails at once for want of space helps nobody.
MIN_FREE_BYTES = 1024 * 1024


class RunsRootBusy(RuntimeError):
    """Another live process holds the runs root, or a file stands where it should be: a refusal
    before any work either way (one line, exit 2)."""


class RunsRootLock:
    """An exclusive flock on ``<runs_root>/.sidecar.lock`` that names its holder's pid."""

    def __init__(self, runs_root: Path):
        self.path = Path(runs_root) / LOCK_FILE
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock (creating the runs root) or raise RunsRootBusy naming the holder's pid, or
        the file in the way (was a FileExistsError / NotADirectoryError traceback)."""
        root = self.path.parent
        blocker = next((p for p in (root, *root.parents) if os.path.exists(p)), None)  # os.path: EACCES is no answer
        if blocker is not None and not os.path.isdir(blocker):
            raise RunsRootBusy(f"runs root {root}: {blocker} is a file, not a folder; pick another --runs-root")
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunsRootBusy(f"runs root {self.path.parent} is in use by another sidecar (pid {holder}); "
                               f"stop it or pick another --runs-root") from None
        self.fd = fd
        try:  # fixed width, written over the old pid: no new block needed on a full disk
            os.pwrite(fd, f"{os.getpid()}\n".ljust(PID_WIDTH).encode(), 0)
        except OSError as err:
            if not is_disk_full(err):
                raise

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = None


class SpaceReserve:
    """A few hundred KiB of disk held back so a run can always be failed with its reason."""

    def __init__(self, runs_root: Path, size: int = RESERVE_BYTES):
        self.path = Path(runs_root) / RESERVE_FILE
        self.size = size

    def ensure(self) -> bool:
        """True when the reserve is in place (writing it if needed) and MIN_FREE_BYTES are free
        besides; False when the disk is full."""
        try:
            st = os.statvfs(self.path.parent)
            if st.f_bavail * st.f_frsize < MIN_FREE_BYTES:
                return False
            if self.path.is_file() and self.path.stat().st_size == self.size:
                return True
            with open(self.path, "wb") as f:
                f.write(b"\xa5" * self.size)  # real blocks, not a sparse hole
                f.flush()
                os.fsync(f.fileno())
            return True
        except OSError as err:
            self.path.unlink(missing_ok=True)
            if is_disk_full(err):
                return False
            raise

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
