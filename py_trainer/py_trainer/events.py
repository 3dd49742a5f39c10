"""The events log of one run: ``events.jsonl``, append-only, one `RunEvent` per line.

Each event is stamped with a gap-free 1-based seq, written as one protobuf-JSON line, flushed and
fsynced before anyone is told about it; the log is the single source of truth from which a run's
state is rebuilt. A trailing half-written line (a kill -9 mid-write) is cut off on load and
reported in the log.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from google.protobuf import json_format

from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

log = logging.getLogger(__name__)

EVENTS_FILE = "events.jsonl"


def event_to_json(event: pb.RunEvent) -> str:
    return json_format.MessageToJson(event, indent=None, preserving_proto_field_name=True)


def event_from_json(line: str) -> pb.RunEvent:
    return json_format.Parse(line, pb.RunEvent())


class EventLog:
    """Append-only ``events.jsonl`` of one run, with gap-free 1-based seq numbers."""

    def __init__(self, folder: Path, run_id: str):
        self.path = folder / EVENTS_FILE
        self.run_id = run_id
        self.events: list[pb.RunEvent] = []
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        raw = self.path.read_bytes()
        good_end = raw.rfind(b"\n") + 1
        if good_end < len(raw):
            log.warning("%s: dropping a half-written last line (%d bytes)", self.path, len(raw) - good_end)
            with open(self.path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())
        for lineno, line in enumerate(raw[:good_end].decode().splitlines(), start=1):
            if line.strip():
                ev = event_from_json(line)
                if ev.seq != len(self.events) + 1:
                    raise ValueError(f"{self.path}:{lineno}: seq {ev.seq}, expected {len(self.events) + 1}")
                self.events.append(ev)

    @property
    def last_seq(self) -> int:
        return len(self.events)

    def append(self, **kind) -> pb.RunEvent:
        """Stamp seq/time/run_id on one event kind (e.g. ``train_step=...``), persist it, return it."""
        ev = pb.RunEvent(seq=self.last_seq + 1, run_id=self.run_id, **kind)
        ev.time.GetCurrentTime()
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(event_to_json(ev) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.events.append(ev)
        return ev
