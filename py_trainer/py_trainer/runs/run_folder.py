"""A run on disk: ``<runs_root>/<run_id>/`` read back into a `RunRecord`, created atomically, and
tidied after a fault.

`read_run` folds the events log into the record and says exactly what does not read back
(`UnreadableRun`: "request.json: ...", "events.jsonl line 7: seq 6, expected 7"), so the registry
can list one damaged folder instead of refusing to start. The fold is the whole state: a run
queued again by a resume has no result until it runs, and keeps the one it had when it ends
without running (cancelled while queued). ``request.json`` is immutable once Train wrote it
(run_request.py): one that is no longer what the run trained with makes its folder unreadable, so
it is never shown as what ran, and ResumeRun answers with the same refusal. A run folder
the sidecar cannot read (permissions), one that is a symlink, and one whose events name another
run are `UnreadableRun`; a delete that cannot finish says what is left (run_removal.py).
(Checkpoints and their completion markers: `artifacts.find_checkpoint`.)
`disk_full_path` recognises a worker that died of a full disk, whatever the library called it;
`reconcile_summary` makes summary.json say the state the events log ended in.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import json_format

from py_trainer.core.atomic import TEMP_SUFFIX, write_atomic, write_json_atomic
from py_trainer.core.errors import AlreadyExists, FailedPrecondition, NotFound, ResourceExhausted, is_disk_full, shown_path
from py_trainer.core.paths import RUN_ID_RE, validate_run_id
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.events import EVENTS_FILE, EventLog, UnreadableLog
from py_trainer.runs.run_request import REQUEST_FILE, digest_file, request_changed

log = logging.getLogger(__name__)

TERMINAL_STATES = frozenset({pb.RUN_STATE_SUCCEEDED, pb.RUN_STATE_FAILED, pb.RUN_STATE_CANCELLED})
SUMMARY_FILE = "summary.json"
# A worker failure with this little space left is a full disk, whatever the library said
# (torch's zip writer reports "[enforce fail at inline_container.cc] unexpected pos ...").
LOW_SPACE_BYTES = 1024 * 1024
NO_SPACE_RE = re.compile(r"No space left on device|Errno 28|ENOSPC|StorageFull|disk full at")
NO_SPACE_PATH_RE = re.compile(r"(?:No space left on device|disk full at)[:\s]+'?([^'\s,;)]+)")


class UnreadableRun(ValueError):
    """A run folder that cannot be read back; the message says what. `refusal`: what ResumeRun answers
    for it instead of "unreadable" (a request.json that is no longer the one it trained with)."""

    def __init__(self, what: str, refusal: FailedPrecondition | None = None):
        super().__init__(what)
        self.refusal = refusal


@dataclass
class RunRecord:
    run_id: str
    folder: Path
    request: pb.TrainRequest
    log: EventLog
    state: int = pb.RUN_STATE_UNSPECIFIED
    reason: str = ""
    current_step: int = 0
    result: pb.RunResult | None = None
    create_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    process: asyncio.subprocess.Process | None = None
    cancel_requested: bool = False
    resume: bool = False
    """The next worker continues from the last complete checkpoint (set by ResumeRun)."""
    launched: bool = False
    """The worker is an accelerate launcher (several ranks), not one process."""
    slots: list[int] = field(default_factory=list)
    """The sidecar's slots the run holds while its worker runs (`slots.SlotPool`)."""
    node: str = ""
    """The cluster node its worker runs on (Ray executor); '' locally."""
    unreadable: bool = False
    """Listed FAILED from memory only: nothing is ever written into its folder."""
    refusal: FailedPrecondition | None = None
    """An unreadable run's answer to ResumeRun, when it is more precise than "unreadable" (UnreadableRun.refusal)."""
    result_before_queue: pb.RunResult | None = None
    """The result a run had when a resume queued it again; back in place if it ends without running."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def apply(self, ev: pb.RunEvent) -> None:
        """Fold one event into the derived state (used both live and when loading from disk)."""
        t = ev.time.ToNanoseconds() / 1e9
        if self.create_time is None:
            self.create_time = t
        kind = ev.WhichOneof("kind")
        if kind == "state_change":
            self.state = ev.state_change.state
            self.reason = ev.state_change.reason
            if self.state == pb.RUN_STATE_RUNNING:
                self.start_time = self.start_time if self.start_time is not None else t
                self.result_before_queue = None  # it runs: the old result is replaced by the new one
            if self.state in TERMINAL_STATES:
                self.end_time = t
                if self.result is None and self.result_before_queue is not None:
                    self.result = self.result_before_queue  # ended without running (cancelled while queued)
                self.result_before_queue = None
            elif self.state == pb.RUN_STATE_QUEUED:  # queued again by a resume: not ended, no result yet
                if self.result is not None:
                    self.result_before_queue = self.result
                self.end_time, self.result = None, None
        elif kind == "train_step":
            self.current_step = ev.train_step.step
        elif kind == "result":
            self.result = ev.result

    def to_proto(self, queue_position: int = 0) -> pb.Run:
        run = pb.Run(
            run_id=self.run_id,
            state=self.state,
            request=self.request,
            last_seq=self.log.last_seq,
            current_step=self.current_step,
            reason=self.reason,
            queue_position=queue_position,
            slots=self.slots,
            node=self.node,
        )
        for name in ("create_time", "start_time", "end_time"):
            t = getattr(self, name)
            if t is not None:
                getattr(run, name).FromNanoseconds(int(t * 1e9))
        if self.result is not None:
            run.result.CopyFrom(self.result)
        return run

    @property
    def steps_completed(self) -> int:
        """The result's steps_completed (the step its adapter was saved at); 0 without a result."""
        return self.result.steps_completed if self.result is not None else 0

    def listed_artifacts(self) -> dict[str, pb.Artifact]:
        """The result's artifacts by path (their sha256 was computed when they were listed)."""
        return {a.path: a for a in self.result.artifacts} if self.result is not None else {}


def read_run(folder: Path) -> RunRecord:
    """The run in `folder` with its events folded in; UnreadableRun says what does not read back."""
    run_id = folder.name
    if not RUN_ID_RE.fullmatch(run_id):
        raise UnreadableRun(f"folder name {run_id!r} is not a run id")
    if folder.is_symlink():
        to = shown_path(os.path.realpath(folder), (folder.parent,))  # a client never sees the server's paths
        raise UnreadableRun(f"{run_id} is a symlink (to {to}): a run folder must be a folder "
                            "of the runs root; it is never read, served or followed")
    try:
        os.listdir(folder)
    except OSError as err:
        raise UnreadableRun(f"{run_id}: {err.strerror.lower()} (the sidecar runs as uid {os.getuid()})") from None
    try:
        raw = (folder / REQUEST_FILE).read_bytes()
        request = json_format.Parse(raw.decode("utf-8"), pb.TrainRequest())
    except FileNotFoundError:
        raise UnreadableRun(f"{REQUEST_FILE} is missing") from None
    except (json_format.Error, ValueError, RecursionError, OSError) as err:  # UnicodeDecodeError is a ValueError
        raise UnreadableRun(f"{REQUEST_FILE}: {type(err).__name__}: {str(err)[:200]}") from None
    try:
        events = EventLog(folder, run_id)
    except UnreadableLog as err:
        raise UnreadableRun(str(err)) from None
    except OSError as err:
        raise UnreadableRun(f"{EVENTS_FILE}: {err}") from None
    for ev in events.events:
        if ev.run_id != run_id:
            raise UnreadableRun(f"{EVENTS_FILE} seq {ev.seq} names run {ev.run_id!r}, not {run_id!r} (another run's events?)")
    try:  # a request that is no longer the one the run trained with is never shown as what ran
        request_changed(folder, raw, request, events.events)
    except FailedPrecondition as err:
        raise UnreadableRun(str(err), refusal=err) from None
    rec = RunRecord(run_id=run_id, folder=folder, request=request, log=events)
    for ev in events.events:
        rec.apply(ev)
    return rec


def is_run_folder(folder: Path) -> bool:
    """A runs-root entry to list: a folder (or a symlink) holding request.json or events.jsonl, or one
    the sidecar cannot look into (listed unreadable, never a reason not to start)."""
    try:
        if folder.is_symlink():
            return RUN_ID_RE.fullmatch(folder.name) is not None
        if not folder.is_dir():
            return False
        names = os.listdir(folder)
    except OSError:
        return RUN_ID_RE.fullmatch(folder.name) is not None
    return REQUEST_FILE in names or EVENTS_FILE in names


def unreadable_record(folder: Path, what: str, refusal: FailedPrecondition | None = None) -> RunRecord:
    """A FAILED stand-in for a run folder that does not read back; the folder is left as it is."""
    rec = RunRecord(run_id=folder.name, folder=folder, request=pb.TrainRequest(run_id=folder.name),
                    log=EventLog.unloaded(folder, folder.name), state=pb.RUN_STATE_FAILED,
                    reason=f"unreadable run folder: {what}", unreadable=True, refusal=refusal)
    try:
        rec.create_time = rec.end_time = folder.stat().st_mtime
    except OSError:
        pass
    return rec


def disk_full_path(reason: str, folder: Path) -> str:
    """Where the disk filled up, if a worker's failure `reason` (or the free space) says it did."""
    m = NO_SPACE_PATH_RE.search(reason)
    if m:
        return m.group(1)
    if NO_SPACE_RE.search(reason):
        return str(folder)
    try:
        if shutil.disk_usage(folder).free < LOW_SPACE_BYTES:
            return str(folder)
    except OSError:
        pass
    return ""


def remove_temp_entries(folder: Path) -> None:
    """Remove what a writer that died left half-done in a run folder: ``.adapter.*`` folders and
    ``.*.tmp`` files (complete files are renamed in, so a dot-name is never the real thing)."""
    for p in list(folder.glob(".*")) + list(folder.glob("checkpoints/.*")):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        elif p.name.endswith(TEMP_SUFFIX):
            p.unlink(missing_ok=True)


def disk_full_error(runs_root: Path) -> ResourceExhausted:
    return ResourceExhausted("", f"disk full at {runs_root}: no space for a new run; free some space and retry")


def reconcile_summary(rec: RunRecord) -> None:
    """Make summary.json (written by the worker) state what the events log says the run ended as."""
    path = rec.folder / SUMMARY_FILE
    if rec.state not in TERMINAL_STATES or not path.is_file():
        return
    try:
        summary = json.loads(path.read_text())
        name = pb.RunState.Name(rec.state).removeprefix("RUN_STATE_")
        if summary.get("state") != name:
            summary.update(state=name, state_reason=rec.reason)
            write_json_atomic(path, summary)
    except (OSError, ValueError) as err:
        log.warning("run %s: could not reconcile %s: %s", rec.run_id, path, err)


def create_run_folder(runs_root: Path, request: pb.TrainRequest) -> tuple[Path, pb.TrainRequest]:
    """Create ``<runs_root>/<run_id>/request.json`` atomically (built under a temp name, renamed in,
    so a half-created run never shows); an empty run_id gets a fresh one. Returns (folder, request
    with its run_id). A full disk is RESOURCE_EXHAUSTED naming the runs root, leaving nothing."""
    request = pb.TrainRequest.FromString(request.SerializeToString())
    request.run_id = request.run_id or new_run_id()
    validate_run_id(request.run_id)
    runs_root = Path(runs_root)
    folder = runs_root / request.run_id
    if folder.exists():
        raise AlreadyExists("run_id", f"a run {request.run_id!r} already exists")
    tmp = None
    try:
        runs_root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=runs_root, prefix=f".{request.run_id}."))
        text = json_format.MessageToJson(request, preserving_proto_field_name=True).encode("utf-8")
        write_atomic(tmp / REQUEST_FILE, text)
        os.rename(tmp, folder)  # refuses to replace a folder another creator made meanwhile
        tmp = None
        try:
            digest_file(folder).parent.mkdir(exist_ok=True)
            write_atomic(digest_file(folder), f"{hashlib.sha256(text).hexdigest()}  {REQUEST_FILE}\n")
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            raise
    except OSError as err:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if is_disk_full(err):
            raise disk_full_error(runs_root) from None
        if folder.exists():
            raise AlreadyExists("run_id", f"a run {request.run_id!r} already exists") from None
        raise
    return folder, request


def load_request(folder: Path) -> pb.TrainRequest:
    """The effective request of the run in `folder`."""
    return json_format.Parse((Path(folder) / REQUEST_FILE).read_text(encoding="utf-8"), pb.TrainRequest())


@dataclass
class StoredRun:
    """A run as read from disk, without a registry (for `py-trainer evaluate`)."""

    run_id: str
    folder: Path
    state: int
    steps_completed: int = 0
    """The result's steps_completed (the step its adapter was saved at); 0 without a result."""


def find_stored_run(runs_root: Path, run_id: str) -> StoredRun:
    """Read one run's state from its events log; NOT_FOUND when there is no such run folder,
    FAILED_PRECONDITION when it does not read back."""
    validate_run_id(run_id)
    folder = Path(runs_root) / run_id
    if not (folder / REQUEST_FILE).is_file():
        raise NotFound("run_id", f"no run {run_id!r} in {runs_root}")
    try:
        rec = read_run(folder)
    except UnreadableRun as err:
        raise FailedPrecondition("run_id", f"unreadable run folder: {err}") from None
    return StoredRun(run_id=run_id, folder=folder, state=rec.state, steps_completed=rec.steps_completed)


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-", time.gmtime()) + uuid.uuid4().hex[:6]


def tail_text(path: Path, n: int = 600) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - n))
            data = f.read(n)
    except OSError:
        return ""
    return " | ".join(l for l in data.decode(errors="replace").splitlines()[-6:] if l.strip())
