"""Run registry: the run state machine, the append-only events log, the device queue, watch/replay.

A run lives in ``<runs_root>/<run_id>/``. Its ``events.jsonl`` is the single source of truth: one
`RunEvent` per line (protobuf JSON), flushed and fsynced before anyone is told about it. State,
current step and result are all derived from the events, so a sidecar restarted after a crash
rebuilds every run from disk alone. A trailing half-written line (a kill -9 mid-write) is cut off
on load and reported in the log.

Lifecycle: QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED, with CANCELLING in between when a
running run is asked to stop. One run trains at a time per device; later ones wait in a bounded
FIFO queue (RESOURCE_EXHAUSTED past it). Training happens in a worker process (`worker.py`) that
sends its events over a Unix socket; a crash or OOM there fails the run, never the server.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

from google.protobuf import json_format

from py_trainer.atomic import write_atomic
from py_trainer.events import EventLog, event_from_json
from py_trainer.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.paths import resolve_under, validate_run_id

log = logging.getLogger(__name__)

TERMINAL_STATES = frozenset({pb.RUN_STATE_SUCCEEDED, pb.RUN_STATE_FAILED, pb.RUN_STATE_CANCELLED})
REQUEST_FILE = "request.json"
# After a cancel, how long a worker gets to finish its step and save before it is killed.
CANCEL_GRACE_S = 120.0
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
MIN_CHUNK = 256 * 1024
MAX_CHUNK = 1024 * 1024
DEFAULT_CHUNK = 512 * 1024


# ---------------------------------------------------------------------------------------------
# One run


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
            if self.state == pb.RUN_STATE_RUNNING and self.start_time is None:
                self.start_time = t
            if self.state in TERMINAL_STATES:
                self.end_time = t
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
        )
        for name in ("create_time", "start_time", "end_time"):
            t = getattr(self, name)
            if t is not None:
                getattr(run, name).FromNanoseconds(int(t * 1e9))
        if self.result is not None:
            run.result.CopyFrom(self.result)
        return run


# ---------------------------------------------------------------------------------------------
# The registry


class RunRegistry:
    """All runs under `runs_root`; schedules one training worker at a time."""

    def __init__(self, runs_root: Path, data_root: Path, *, max_queue: int = 8,
                 worker_argv: list[str] | None = None):
        self.runs_root = Path(runs_root)
        self.data_root = Path(data_root)
        self.max_queue = max_queue
        # The command that trains one run; tests may swap in another real process.
        self.worker_argv = worker_argv or [sys.executable, "-m", "py_trainer.worker"]
        self.runs: dict[str, RunRecord] = {}
        self.queue: deque[str] = deque()
        self.active: str | None = None
        self._wake = asyncio.Event()
        self._scheduler: asyncio.Task | None = None
        self._closing = False

    # -- startup / shutdown -------------------------------------------------------------------

    async def start(self) -> None:
        self.runs_root.mkdir(parents=True, exist_ok=True)
        for folder in sorted(self.runs_root.iterdir()):
            if folder.is_dir() and (folder / REQUEST_FILE).exists():
                self._load_run(folder)
        self._scheduler = asyncio.create_task(self._schedule(), name="run-scheduler")

    def _load_run(self, folder: Path) -> None:
        run_id = folder.name
        rec = RunRecord(run_id=run_id, folder=folder, request=load_request(folder), log=EventLog(folder, run_id))
        for ev in rec.log.events:
            rec.apply(ev)
        self.runs[run_id] = rec
        if rec.state not in TERMINAL_STATES:
            # A previous sidecar died with this run queued or running: its worker died with it
            # (PDEATHSIG / broken events socket). Fail it with the reason; files stay as they are.
            ckpt = latest_checkpoint(folder)
            note = f"; last checkpoint kept at {ckpt}" if ckpt else ""
            self._transition(rec, pb.RUN_STATE_FAILED,
                             f"sidecar restarted while the run was {pb.RunState.Name(rec.state)}{note}")

    async def close(self, grace: float = 10.0) -> None:
        """Stop scheduling; stop an active worker (FAILED: the sidecar shut down)."""
        self._closing = True
        if self._scheduler:
            self._scheduler.cancel()
        for run_id in list(self.queue):
            self._transition(self.runs[run_id], pb.RUN_STATE_FAILED, "sidecar shut down before the run started")
        self.queue.clear()
        if self.active:
            rec = self.runs[self.active]
            if rec.process and rec.process.returncode is None:
                rec.process.send_signal(signal.SIGUSR1)
                try:
                    await asyncio.wait_for(rec.process.wait(), grace)
                except asyncio.TimeoutError:
                    rec.process.kill()
                    await rec.process.wait()
            if rec.state not in TERMINAL_STATES:
                self._transition(rec, pb.RUN_STATE_FAILED, "sidecar shut down during the run")

    # -- queries ------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord:
        validate_run_id(run_id)
        rec = self.runs.get(run_id)
        if rec is None:
            raise NotFound("run_id", f"no run {run_id!r}")
        return rec

    def queue_position(self, run_id: str) -> int:
        try:
            return self.queue.index(run_id) + 1
        except ValueError:
            return 0

    def run_proto(self, run_id: str) -> pb.Run:
        return self.get(run_id).to_proto(self.queue_position(run_id))

    def list(self, state: int = pb.RUN_STATE_UNSPECIFIED) -> list[pb.Run]:
        recs = [r for r in self.runs.values() if state in (pb.RUN_STATE_UNSPECIFIED, r.state)]
        recs.sort(key=lambda r: (r.create_time or 0.0, r.run_id), reverse=True)
        return [r.to_proto(self.queue_position(r.run_id)) for r in recs]

    # -- mutations ----------------------------------------------------------------------------

    def _transition(self, rec: RunRecord, state: int, reason: str = "") -> None:
        self._emit(rec, state_change=pb.StateChange(state=state, reason=reason))

    def _emit(self, rec: RunRecord, **kind) -> pb.RunEvent:
        ev = rec.log.append(**kind)
        rec.apply(ev)
        # Wake every watcher, then give the next waiters a fresh event to wait on.
        rec.changed.set()
        rec.changed = asyncio.Event()
        return ev

    def create(self, request: pb.TrainRequest) -> RunRecord:
        """Persist a validated request as a new QUEUED run."""
        if self._closing:
            raise FailedPrecondition("", "the sidecar is shutting down")
        if len(self.queue) >= self.max_queue:
            raise ResourceExhausted("", f"the run queue is full ({self.max_queue} waiting); retry later")
        if request.run_id in self.runs:
            raise AlreadyExists("run_id", f"a run {request.run_id!r} already exists")
        folder, request = create_run_folder(self.runs_root, request)
        run_id = request.run_id
        rec = RunRecord(run_id=run_id, folder=folder, request=request, log=EventLog(folder, run_id))
        self.runs[run_id] = rec
        self._transition(rec, pb.RUN_STATE_QUEUED)
        self.queue.append(run_id)
        self._wake.set()
        return rec

    async def cancel(self, run_id: str) -> RunRecord:
        rec = self.get(run_id)
        if rec.state in TERMINAL_STATES:
            raise FailedPrecondition("run_id", f"run {run_id!r} already ended ({pb.RunState.Name(rec.state)})")
        rec.cancel_requested = True
        if run_id in self.queue:
            self.queue.remove(run_id)
            self._transition(rec, pb.RUN_STATE_CANCELLED, "cancelled while queued")
        elif rec.state == pb.RUN_STATE_RUNNING:
            self._transition(rec, pb.RUN_STATE_CANCELLING, "cancel requested; stopping after the current step")
            if rec.process and rec.process.returncode is None:
                rec.process.send_signal(signal.SIGUSR1)
                asyncio.get_running_loop().call_later(CANCEL_GRACE_S, self._kill_if_alive, rec)
        return rec

    @staticmethod
    def _kill_if_alive(rec: RunRecord) -> None:
        if rec.process and rec.process.returncode is None:
            rec.process.kill()

    def list_page(self, state: int, page_size: int, page_token: str) -> tuple[list[pb.Run], str]:
        """One page of runs, newest first, and the next page's token ('' at the end)."""
        size = page_size or DEFAULT_PAGE_SIZE
        if size > MAX_PAGE_SIZE:
            raise InvalidArgument("page_size", f"{size} exceeds the maximum of {MAX_PAGE_SIZE}")
        try:
            start = int(page_token or "0")
        except ValueError:
            raise InvalidArgument("page_token", f"{page_token!r} is not a token from ListRuns") from None
        runs = self.list(state)
        if start < 0 or start > len(runs):
            raise InvalidArgument("page_token", f"{page_token!r} is out of range")
        nxt = str(start + size) if start + size < len(runs) else ""
        return runs[start:start + size], nxt

    async def watch(self, run_id: str, after_seq: int = 0) -> AsyncIterator[pb.RunEvent]:
        """Yield events with seq > after_seq from the log, then live ones until the run ends.

        An after_seq past the end of a finished run is INVALID_ARGUMENT (nothing will ever come)."""
        rec = self.get(run_id)
        if after_seq > rec.log.last_seq and rec.state in TERMINAL_STATES:
            raise InvalidArgument("after_seq", f"{after_seq} is past the run's last seq {rec.log.last_seq}")
        i = after_seq
        while True:
            while i < rec.log.last_seq:
                yield rec.log.events[i]
                i += 1
            if rec.state in TERMINAL_STATES:
                return
            await rec.changed.wait()

    # -- scheduling and the worker ------------------------------------------------------------

    async def _schedule(self) -> None:
        while True:
            while not self.queue:
                self._wake.clear()
                await self._wake.wait()
            run_id = self.queue.popleft()
            rec = self.runs[run_id]
            self.active = run_id
            try:
                await self._run_worker(rec)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug of ours must not stall the queue
                log.exception("run %s: worker supervision failed", run_id)
                if rec.state not in TERMINAL_STATES:
                    self._transition(rec, pb.RUN_STATE_FAILED, f"internal error: {exc}")
            finally:
                self.active = None

    async def _run_worker(self, rec: RunRecord) -> None:
        self._transition(rec, pb.RUN_STATE_RUNNING)
        sock_dir = tempfile.mkdtemp(prefix="pyt-")  # short path: AF_UNIX paths max out at 107 bytes
        sock_path = os.path.join(sock_dir, "events.sock")
        terminal: list[pb.RunEvent] = []
        connected = asyncio.Event()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connected.set()
            try:
                while line := await reader.readline():
                    self._on_worker_event(rec, line, terminal)
            finally:
                writer.close()

        server = await asyncio.start_unix_server(on_connect, path=sock_path, limit=2**24)
        env = dict(os.environ, PY_TRAINER_EVENTS_SOCK=sock_path)
        worker_log = open(rec.folder / "worker.log", "ab")
        try:
            rec.process = await asyncio.create_subprocess_exec(
                *self._argv_for(rec), "--run-dir", str(rec.folder), "--data-root", str(self.data_root),
                stdin=asyncio.subprocess.DEVNULL, stdout=worker_log, stderr=worker_log, env=env,
            )
            if rec.cancel_requested:  # cancelled in the instant between dequeue and spawn
                rec.process.send_signal(signal.SIGUSR1)
            rc = await rec.process.wait()
            # Let the socket reader drain what the worker wrote before it exited.
            await asyncio.sleep(0.05)
        finally:
            server.close()
            await server.wait_closed()
            worker_log.close()
            shutil.rmtree(sock_dir, ignore_errors=True)
        self._finish(rec, rc, terminal)

    def _argv_for(self, rec: RunRecord) -> list[str]:
        n = rec.request.runtime.num_processes
        if n > 1 and self.worker_argv[1:3] == ["-m", "py_trainer.worker"]:
            # Multi-process data parallel: rank 0 reports events, every rank trains.
            return [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(n),
                    "-m", "py_trainer.worker"]
        return list(self.worker_argv)

    def _on_worker_event(self, rec: RunRecord, line: bytes, terminal: list[pb.RunEvent]) -> None:
        try:
            ev = event_from_json(line.decode())
        except Exception:
            log.warning("run %s: unparseable worker event %r", rec.run_id, line[:200])
            return
        kind = ev.WhichOneof("kind")
        if kind == "state_change":
            # The worker proposes the terminal state; the server records it after the exit code.
            terminal.append(ev)
            return
        self._emit(rec, **{kind: getattr(ev, kind)})

    def _finish(self, rec: RunRecord, rc: int, terminal: list[pb.RunEvent]) -> None:
        if rec.state in TERMINAL_STATES:
            return
        proposed = terminal[-1].state_change if terminal else None
        if proposed is not None and rc == 0:
            self._transition(rec, proposed.state, proposed.reason)
        elif proposed is not None and proposed.state == pb.RUN_STATE_FAILED:
            self._transition(rec, pb.RUN_STATE_FAILED, proposed.reason)
        elif rec.cancel_requested:
            self._transition(rec, pb.RUN_STATE_CANCELLED, f"cancelled; worker exited with {rc}")
        else:
            tail = tail_text(rec.folder / "worker.log")
            why = f"killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
            if rc in (-signal.SIGKILL, 137):
                why += " (out of memory?)"
            self._transition(rec, pb.RUN_STATE_FAILED, f"worker {why}; worker.log ends: {tail}")


def create_run_folder(runs_root: Path, request: pb.TrainRequest) -> tuple[Path, pb.TrainRequest]:
    """Create ``<runs_root>/<run_id>/request.json`` atomically (built under a temp name, renamed in,
    so a half-created run never shows); an empty run_id gets a fresh one. Returns (folder, request
    with its run_id)."""
    request = pb.TrainRequest.FromString(request.SerializeToString())
    request.run_id = request.run_id or new_run_id()
    validate_run_id(request.run_id)
    runs_root = Path(runs_root)
    runs_root.mkdir(parents=True, exist_ok=True)
    folder = runs_root / request.run_id
    if folder.exists():
        raise AlreadyExists("run_id", f"a run {request.run_id!r} already exists")
    tmp = Path(tempfile.mkdtemp(dir=runs_root, prefix=f".{request.run_id}."))
    try:
        write_atomic(tmp / REQUEST_FILE, json_format.MessageToJson(request, preserving_proto_field_name=True))
        os.rename(tmp, folder)  # refuses to replace a folder another creator made meanwhile
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if folder.exists():
            raise AlreadyExists("run_id", f"a run {request.run_id!r} already exists") from None
        raise
    return folder, request


def load_request(folder: Path) -> pb.TrainRequest:
    """The effective request of the run in `folder`."""
    return json_format.Parse((Path(folder) / REQUEST_FILE).read_text(), pb.TrainRequest())


@dataclass
class StoredRun:
    """A run as read from disk, without a registry (for `py-trainer evaluate`)."""

    run_id: str
    folder: Path
    state: int


def find_stored_run(runs_root: Path, run_id: str) -> StoredRun:
    """Read one run's state from its events log; NOT_FOUND when there is no such run folder."""
    validate_run_id(run_id)
    folder = Path(runs_root) / run_id
    if not (folder / REQUEST_FILE).is_file():
        raise NotFound("run_id", f"no run {run_id!r} in {runs_root}")
    rec = RunRecord(run_id=run_id, folder=folder, request=load_request(folder), log=EventLog(folder, run_id))
    for ev in rec.log.events:
        rec.apply(ev)
    return StoredRun(run_id=run_id, folder=folder, state=rec.state)


# ---------------------------------------------------------------------------------------------
# Artifacts


def artifact_chunks(folder: Path, rel: str, offset: int, chunk_size: int):
    """Yield DownloadArtifactResponse chunks of one file in a run folder, read from disk piece by
    piece (bounded memory); the last chunk carries the sha256 of the whole file."""
    path = resolve_under(folder, rel, "path")
    if not path.is_file():
        raise InvalidArgument("path", f"{rel!r} is not a file")
    chunk = max(MIN_CHUNK, min(MAX_CHUNK, chunk_size or DEFAULT_CHUNK))
    with open(path, "rb") as f:
        total = os.fstat(f.fileno()).st_size
        if offset > total:
            raise InvalidArgument("offset", f"{offset} is past the end of the file ({total} bytes)")
        digest = hashlib.sha256()
        while piece := f.read(MAX_CHUNK):
            digest.update(piece)
        f.seek(offset)
        off = offset
        while True:
            piece = f.read(chunk)
            last = off + len(piece) >= total
            yield pb.DownloadArtifactResponse(offset=off, data=piece, total_size=total, last=last,
                                              sha256=digest.hexdigest() if last else "")
            off += len(piece)
            if last:
                return


def file_artifacts(folder: Path, rels: list[str]) -> list[pb.Artifact]:
    """Artifact entries (path, size, sha256) for the files and folders `rels` of a run folder."""
    arts = []
    for rel in rels:
        p = Path(folder) / rel
        if p.is_dir():
            arts.extend(file_artifacts(folder, sorted(str(q.relative_to(folder)) for q in p.rglob("*") if q.is_file())))
        elif p.is_file():
            digest = hashlib.sha256()
            with open(p, "rb") as f:
                while piece := f.read(MAX_CHUNK):
                    digest.update(piece)
            arts.append(pb.Artifact(path=rel, size_bytes=p.stat().st_size, sha256=digest.hexdigest()))
    return arts


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-", time.gmtime()) + uuid.uuid4().hex[:6]


def latest_checkpoint(folder: Path) -> str:
    """Relative path of the newest complete checkpoint folder, or ''."""
    ckdir = folder / "checkpoints"
    if not ckdir.is_dir():
        return ""
    steps = []
    for d in ckdir.iterdir():
        name, _, num = d.name.partition("-")
        if d.is_dir() and name == "checkpoint" and num.isdigit():
            steps.append((int(num), d.name))
    return f"checkpoints/{max(steps)[1]}" if steps else ""


def tail_text(path: Path, n: int = 600) -> str:
    try:
        data = path.read_bytes()[-n:]
    except OSError:
        return ""
    return " | ".join(l for l in data.decode(errors="replace").splitlines()[-6:] if l.strip())


