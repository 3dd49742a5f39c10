"""The events log of one run: ``events.jsonl``, append-only, one `RunEvent` per line.

Each event is stamped with a gap-free 1-based seq and appended write-ahead: written at the end of
the last complete line, fsynced, and only then counted and told to anyone. An append that cannot
complete (ENOSPC, EIO) is cut back to the last complete line before the error is raised, so the
log never holds a torn line that a later append would glue garbage onto; a full disk raises
`DiskFull` naming the file. The log is the single source of truth from which a run's state is
rebuilt.

Loading never modifies the file: a trailing half-written line (a kill -9 mid-write) is ignored
and overwritten by the next append; anything else that does not read back (a line that is not
JSON or not UTF-8, a seq out of order) raises `UnreadableLog` with the line number, and the
registry lists the run as unreadable instead of refusing to start.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from google.protobuf import json_format

from py_trainer.core.errors import DiskFull, is_disk_full
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

log = logging.getLogger(__name__)

EVENTS_FILE = "events.jsonl"


class UnreadableLog(ValueError):
    """An events log that does not read back; the message names the file and line."""


def event_to_json(event: pb.RunEvent) -> str:
    return json_format.MessageToJson(event, indent=None, preserving_proto_field_name=True)


def event_from_json(line: str) -> pb.RunEvent:
    return json_format.Parse(line, pb.RunEvent())


def append_line(path: Path, end: int, line: bytes) -> int:
    """Write `line` at byte `end` of `path` (the end of its last complete line), fsync, and return
    the new end. On any failure the file is truncated back to `end` first (no torn line stays)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        try:
            os.lseek(fd, end, os.SEEK_SET)
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            os.ftruncate(fd, end + len(line))  # drop an ignored torn tail that ran past this line
            os.fsync(fd)
        except BaseException as err:
            try:
                os.ftruncate(fd, end)
                os.fsync(fd)
            except OSError:
                pass
            if is_disk_full(err):
                raise DiskFull(path) from err
            raise
    finally:
        os.close(fd)
    return end + len(line)


class EventLog:
    """Append-only ``events.jsonl`` of one run, with gap-free 1-based seq numbers."""

    def __init__(self, folder: Path, run_id: str):
        self.path = Path(folder) / EVENTS_FILE
        self.run_id = run_id
        self.events: list[pb.RunEvent] = []
        self.end = 0  # byte offset just past the last complete line
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        raw = self.path.read_bytes()
        self.end = raw.rfind(b"\n") + 1
        if self.end < len(raw):
            log.warning("%s: ignoring a half-written last line (%d bytes)", self.path, len(raw) - self.end)
        for lineno, line in enumerate(raw[:self.end].split(b"\n")[:-1], start=1):
            if not line.strip():
                continue
            try:
                ev = event_from_json(line.decode("utf-8"))
            except UnicodeDecodeError as err:
                raise UnreadableLog(f"{EVENTS_FILE} line {lineno}: not UTF-8 ({err.reason} at byte {err.start})") from None
            except (json_format.Error, ValueError, RecursionError) as err:
                raise UnreadableLog(f"{EVENTS_FILE} line {lineno}: not a RunEvent ({str(err)[:200]})") from None
            if ev.seq != len(self.events) + 1:
                raise UnreadableLog(f"{EVENTS_FILE} line {lineno}: seq {ev.seq}, expected {len(self.events) + 1}")
            self.events.append(ev)

    @classmethod
    def unloaded(cls, folder: Path, run_id: str) -> "EventLog":
        """An empty log that has not read `folder` (for a run folder that does not read back)."""
        self = cls.__new__(cls)
        self.path, self.run_id, self.events, self.end = Path(folder) / EVENTS_FILE, run_id, [], 0
        return self

    @property
    def last_seq(self) -> int:
        return len(self.events)

    def append(self, **kind) -> pb.RunEvent:
        """Stamp seq/time/run_id on one event kind (e.g. ``train_step=...``), persist it, return it.

        Raises DiskFull (log unchanged) when the disk is full."""
        ev = pb.RunEvent(seq=self.last_seq + 1, run_id=self.run_id, **kind)
        ev.time.GetCurrentTime()
        self.end = append_line(self.path, self.end, (event_to_json(ev) + "\n").encode())
        self.events.append(ev)
        return ev
