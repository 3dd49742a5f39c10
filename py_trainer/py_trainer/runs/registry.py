"""Run registry: the run state machine, the events log, the device queue, watch/replay, faults.

A run lives in ``<runs_root>/<run_id>/``. Its ``events.jsonl`` (`events.EventLog`) is the single
source of truth: state, current step and result are all derived from the events, so a sidecar
restarted after a crash rebuilds every run from disk alone.

Lifecycle: QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED, with CANCELLING in between when a
running run is asked to stop; ResumeRun queues a FAILED or CANCELLED run again (its request.json
unchanged and valid, from its newest intact checkpoint), DeleteRun removes a finished one. Runs
train at once as the sidecar's slots allow (`slots.py`: one per rank; one slot per visible GPU by
default, 1 on CPU); later ones wait in a bounded FIFO
queue (RESOURCE_EXHAUSTED past it) and are admitted in order as slots free (`scheduler.py`, which
records through this registry's `transition`, `emit` and `fail_disk_full`). Training happens in a
worker process (`workers/train_worker.py`) started by the executor (`local_executor.py`, a child process that
sends its events over a Unix socket); a crash or OOM there fails the run, never the server.

Faults, and what deliberately happens (tests/test_faults.py):
- the runs root is locked by one sidecar (`runs_root.RunsRootLock`), so no run has two writers;
- one run folder that does not read back (corrupt request.json, a bad events line, a duplicated
  seq, events naming another run, a folder it may not read, a symlink) is listed FAILED
  "unreadable run folder: <what>" and left untouched; the others are served;
- a delete that cannot finish is refused naming what blocks it (`run_removal.trash_run_folder`);
- a full disk anywhere (our events log, or the worker's checkpoint/adapter writes) fails the run
  promptly as FAILED "disk full at <path>": the worker is stopped, the reserve
  (`runs_root.SpaceReserve`) is spent on that one event line, and the slot is free. While the
  disk stays full, Train answers RESOURCE_EXHAUSTED naming the runs root and queued runs wait;
- a SIGTERM'd sidecar lets the active worker stop after its step: the run ends CANCELLED with its
  result, as its summary.json says (state, summary and events agree);
- a run that was QUEUED when the sidecar stopped or died is QUEUED again at the next start (nothing
  of it ran), in the order it was queued; one that was RUNNING fails with the reason;
- temp folders (a half-created run, a worker's half-saved adapter, a deleted run's trash) are removed.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
import uuid
from collections import deque
from pathlib import Path
from typing import AsyncIterator, Callable

from py_trainer.core.errors import (AlreadyExists, DiskFull, FailedPrecondition, InvalidArgument, NotFound, RequestError,
                                    ResourceExhausted)
from py_trainer.core.paths import validate_run_id
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.artifacts import artifact_chunks, find_checkpoint, latest_checkpoint
from py_trainer.runs.events import EventLog
from py_trainer.runs.launch import clear_stop
from py_trainer.runs.local_executor import LocalExecutor
from py_trainer.runs.run_folder import (TERMINAL_STATES, RunRecord, UnreadableRun, create_run_folder, disk_full_error,
                                        is_run_folder, read_run, remove_temp_entries, unreadable_record)
from py_trainer.runs.run_removal import finish_removal, is_leftover, remove_tree, trash_run_folder
from py_trainer.runs.run_request import REQUEST_FILE, check_request_unchanged
from py_trainer.runs.runs_root import RunsRootLock, SpaceReserve
from py_trainer.runs.scheduler import RunScheduler
from py_trainer.runs.slots import SlotPool
from py_trainer.runs.views import follow, page_of

log = logging.getLogger(__name__)

# After a cancel, how long a worker gets to finish its step and save before it is killed.
CANCEL_GRACE_S = 120.0
# On SIGTERM, how long the active worker gets to stop after its step and save its adapter.
SHUTDOWN_GRACE_S = 20.0


# ---------------------------------------------------------------------------------------------
# The registry


class RunRegistry:
    """All runs under `runs_root`; schedules training workers onto the sidecar's slots."""

    def __init__(self, runs_root: Path, data_root: Path, *, max_queue: int = 8,
                 worker_argv: list[str] | None = None, slots: int | None = None, executor=None):
        self.runs_root = Path(runs_root)
        self.data_root = Path(data_root)
        self.max_queue = max_queue
        # The command that trains one run; tests may swap in another real process.
        self.worker_argv = worker_argv or [sys.executable, "-m", "py_trainer.workers.train_worker"]
        self.runs: dict[str, RunRecord] = {}
        self.queue: deque[str] = deque()
        self.executor = executor or LocalExecutor()
        self._slots_asked = slots
        self.slots: SlotPool  # sized in start()
        self.lock = RunsRootLock(self.runs_root)
        self.reserve = SpaceReserve(self.runs_root)
        # When a queued run starts, and its worker followed to the end; it records through these three.
        self.scheduler = RunScheduler(self.runs, self.queue, self.executor, self.reserve, data_root=self.data_root,
                                      worker_argv=self.worker_argv, transition=self.transition, emit=self.emit,
                                      fail_disk_full=self.fail_disk_full)

    @property
    def active(self) -> str | None:
        """The run that started first among those now holding slots; None when all are free."""
        return next(iter(self.scheduler.workers), None)

    # -- startup / shutdown -------------------------------------------------------------------

    async def start(self) -> None:
        """Lock the runs root (RunsRootBusy if another sidecar holds it), load every run, schedule."""
        self.lock.acquire()  # creates the runs root
        self.reserve.ensure()
        try:
            await self.executor.start(self.runs_root, self.data_root)  # Ray: every node sees the runs root
        except BaseException:
            self.lock.release()
            raise
        self.slots = SlotPool(self._slots_asked or self.executor.default_slots(),  # a cluster's size is known now
                              gpus=None if self.executor.uses_local_devices() else [])
        queued: list[tuple[float, str]] = []
        reattach: list[RunRecord] = []
        for folder in sorted(self.runs_root.iterdir()):
            if folder.name.startswith("."):
                if is_leftover(folder):
                    if why := remove_tree(folder):  # never renamed in, or a delete cut short
                        log.error("could not remove %s (%s); left as it is", folder, why)
                continue
            if is_run_folder(folder):
                try:
                    rec = self._load_run(folder)
                except OSError as err:  # read back, but tidying it failed (a checkpoint it may not read)
                    log.error("run folder %s: %s; listed as FAILED", folder, err)
                    rec = self.runs[folder.name] = unreadable_record(folder, f"{err.filename}: {err.strerror}")
                if rec is not None and rec.state == pb.RUN_STATE_QUEUED:
                    queued.append((rec.log.events[-1].time.ToNanoseconds() if rec.log.events else 0, rec.run_id))
                elif rec is not None and rec.state not in TERMINAL_STATES:
                    reattach.append(rec)
        self.queue.extend(run_id for _, run_id in sorted(queued))  # in the order they were queued
        self.scheduler.start(self.slots, reattach)  # a cluster run the previous sidecar left running: followed again

    def _load_run(self, folder: Path) -> RunRecord | None:
        try:
            rec = read_run(folder)
        except UnreadableRun as err:
            log.error("run folder %s is unreadable (%s); listed as FAILED, left as it is", folder, err)
            self.runs[folder.name] = unreadable_record(folder, str(err), err.refusal)
            return None
        self.runs[rec.run_id] = rec
        if rec.state == pb.RUN_STATE_QUEUED:
            # Nothing of it ran: it stays QUEUED and is trained (from its checkpoint if a resume
            # queued it: a run that has been RUNNING before was queued again by ResumeRun).
            rec.resume = rec.start_time is not None
        elif rec.state not in TERMINAL_STATES and not (why := self.executor.can_reattach(rec)):
            return rec  # its worker runs on (a cluster node): start() follows it again
        elif rec.state not in TERMINAL_STATES:
            # A previous sidecar died with this run queued or running: its worker died with it
            # (PDEATHSIG / broken events socket). Fail it with the reason; files stay as they are.
            ckpt = latest_checkpoint(folder)
            note = f"; last checkpoint kept at {ckpt}" if ckpt else ""
            why = "" if self.executor.name == "local" else f"; {why}"
            self.transition(rec, pb.RUN_STATE_FAILED,
                            f"sidecar restarted while the run was {pb.RunState.Name(rec.state)}{why}{note}")
        remove_temp_entries(folder)
        return rec

    async def close(self, grace: float = SHUTDOWN_GRACE_S) -> None:
        """Stop scheduling; ask the active worker to stop after its step (CANCELLED with its result,
        as its summary says), killing it after `grace` seconds (FAILED); release the runs root.
        Queued runs stay QUEUED (nothing of them ran): the next sidecar on this root trains them.
        An executor whose workers outlive the sidecar (Ray) leaves them running, RUNNING in their
        logs: the next sidecar on this root reattaches to them."""
        self.scheduler.stop()
        self.queue.clear()
        running = {run_id: task for run_id, task in self.scheduler.workers.items() if not task.done()}
        if self.executor.keeps_running:
            for task in running.values():
                task.cancel()
            await self.executor.close()
            self.lock.release()
            return
        for run_id in running:
            rec = self.runs[run_id]
            rec.cancel_requested = True
            self.executor.stop(rec)
        if running:
            _, late = await asyncio.wait(set(running.values()), timeout=grace)
            for run_id, task in running.items():
                if task in late:
                    self._kill_worker(self.runs[run_id])
            if late:
                await asyncio.wait(late, timeout=10)
        for run_id in running:
            rec = self.runs[run_id]
            if rec.state not in TERMINAL_STATES:
                self.transition(rec, pb.RUN_STATE_FAILED, "sidecar shut down during the run")
        await self.executor.close()
        self.lock.release()

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

    def download(self, run_id: str, path: str, offset: int, chunk_size: int):
        """Chunks of one file of a run (blocking reads: iterate in a thread)."""
        rec = self.get(run_id)
        if rec.unreadable:
            raise FailedPrecondition("run_id", f"run {run_id!r}: {rec.reason}")
        return artifact_chunks(rec.folder, path, offset, chunk_size, rec.listed_artifacts())

    # -- mutations ----------------------------------------------------------------------------

    def transition(self, rec: RunRecord, state: int, reason: str = "") -> None:
        """Record a state change (a full disk fails the run instead: `fail_disk_full`)."""
        self.emit(rec, state_change=pb.StateChange(state=state, reason=reason))

    def emit(self, rec: RunRecord, **kind) -> pb.RunEvent | None:
        """Append one event (`kind`: one RunEvent field) and apply it; None when the disk was full."""
        try:
            ev = rec.log.append(**kind)
        except DiskFull as err:
            self.fail_disk_full(rec, err.path)
            return None
        self._applied(rec, ev)
        return ev

    def _applied(self, rec: RunRecord, ev: pb.RunEvent) -> None:
        rec.apply(ev)
        # Wake every watcher, then give the next waiters a fresh event to wait on.
        rec.changed.set()
        rec.changed = asyncio.Event()

    def fail_disk_full(self, rec: RunRecord, path: str) -> None:
        """FAILED "disk full at <path>": stop the worker first (it cannot write anything useful and
        must not take the freed space), then spend the reserve on this one event line."""
        if rec.state in TERMINAL_STATES:
            return
        log.error("run %s: disk full at %s; failing the run", rec.run_id, path)
        self._kill_worker(rec)
        self.reserve.release()
        reason = f"disk full at {path}"
        try:
            ev = rec.log.append(state_change=pb.StateChange(state=pb.RUN_STATE_FAILED, reason=reason))
        except DiskFull:
            # Not even the reserve was enough: the state lives in memory until a restart, which
            # reads the run as interrupted. Its log on disk still ends in a complete line.
            ev = pb.RunEvent(seq=rec.log.last_seq + 1, run_id=rec.run_id,
                             state_change=pb.StateChange(state=pb.RUN_STATE_FAILED, reason=reason))
            ev.time.GetCurrentTime()
        self._applied(rec, ev)

    def create(self, request: pb.TrainRequest) -> RunRecord:
        """Persist a validated request as a new QUEUED run (nothing is left behind on failure)."""
        if self.scheduler.closing:
            raise FailedPrecondition("", "the sidecar is shutting down")
        if len(self.queue) >= self.max_queue:
            raise ResourceExhausted("", f"the run queue is full ({self.max_queue} waiting); retry later")
        if request.run_id in self.runs:
            raise AlreadyExists("run_id", f"a run {request.run_id!r} already exists")
        if not self.reserve.ensure():
            raise disk_full_error(self.runs_root)
        folder, request = create_run_folder(self.runs_root, request)
        run_id = request.run_id
        rec = RunRecord(run_id=run_id, folder=folder, request=request, log=EventLog(folder, run_id))
        try:
            ev = rec.log.append(state_change=pb.StateChange(state=pb.RUN_STATE_QUEUED))
        except DiskFull:
            shutil.rmtree(folder, ignore_errors=True)
            raise disk_full_error(self.runs_root) from None
        self.runs[run_id] = rec
        self._applied(rec, ev)
        self.queue.append(run_id)
        self.scheduler.wake()
        return rec

    async def cancel(self, run_id: str) -> RunRecord:
        rec = self.get(run_id)
        if rec.state in TERMINAL_STATES:
            raise FailedPrecondition("run_id", f"run {run_id!r} already ended ({pb.RunState.Name(rec.state)})")
        rec.cancel_requested = True
        if run_id in self.queue:
            self.queue.remove(run_id)
            self.transition(rec, pb.RUN_STATE_CANCELLED, "cancelled while queued")
        elif rec.state == pb.RUN_STATE_RUNNING:
            self.transition(rec, pb.RUN_STATE_CANCELLING, "cancel requested; stopping after the current step")
            self.executor.stop(rec)
            asyncio.get_running_loop().call_later(CANCEL_GRACE_S, self._kill_worker, rec)
        return rec

    async def resume(self, run_id: str,
                     validate: Callable[[pb.TrainRequest], object] | None = None) -> RunRecord:
        """Queue a FAILED or CANCELLED run again, to continue from its newest intact checkpoint
        as the same run (events continue from the last seq). Its request.json must be the one
        Train stored (FAILED_PRECONDITION naming request.json otherwise) and pass `validate` (the
        server passes Train's validation; its error becomes FAILED_PRECONDITION naming request.json).
        Newer checkpoints that are damaged are skipped, each named in a RunWarning."""
        rec = self.get(run_id)
        if rec.refusal is not None:  # its request.json is no longer the one it trained with
            raise rec.refusal
        if rec.state not in (pb.RUN_STATE_FAILED, pb.RUN_STATE_CANCELLED) or rec.unreadable:
            raise FailedPrecondition("run_id", f"run {run_id!r} is {pb.RunState.Name(rec.state)}"
                                               f"{' (unreadable)' if rec.unreadable else ''}; only FAILED or "
                                               "CANCELLED runs resume")
        request = check_request_unchanged(rec.folder, rec.request, rec.log.events)
        if validate is not None:
            try:  # off the loop (it may read a tokenizer); the run is looked at again after
                await asyncio.to_thread(validate, request)
            except RequestError as err:
                raise FailedPrecondition(REQUEST_FILE, f"{err} (re-validated as Train would)") from None
            if self.get(run_id) is not rec or rec.state not in (pb.RUN_STATE_FAILED, pb.RUN_STATE_CANCELLED):
                raise FailedPrecondition("run_id", f"run {run_id!r} changed while its request was validated; retry")
        ckpt, damaged = find_checkpoint(rec.folder)
        if not ckpt:
            why = "".join(f"; {what}" for _, what in damaged)
            raise FailedPrecondition("run_id", f"run {run_id!r} has no complete checkpoint to resume from{why}")
        if self.scheduler.closing:
            raise FailedPrecondition("", "the sidecar is shutting down")
        if len(self.queue) >= self.max_queue:
            raise ResourceExhausted("", f"the run queue is full ({self.max_queue} waiting); retry later")
        if not self.reserve.ensure():
            raise disk_full_error(self.runs_root)
        try:  # written before anything changes: a full disk refuses the resume, the run stays as it was
            for step, what in damaged:
                self._applied(rec, rec.log.append(warning=pb.RunWarning(
                    code="checkpoint_damaged", step=step, message=f"{what}; skipped, resuming from {ckpt}")))
            ev = rec.log.append(state_change=pb.StateChange(state=pb.RUN_STATE_QUEUED, reason=f"resumed from {ckpt}"))
        except DiskFull:
            raise disk_full_error(self.runs_root) from None
        clear_stop(rec.folder)
        rec.cancel_requested, rec.resume = False, True
        self._applied(rec, ev)
        self.queue.append(run_id)
        self.scheduler.wake()
        return rec

    async def delete(self, run_id: str) -> pb.Run:
        """Remove a finished run (SUCCEEDED, FAILED or CANCELLED, an unreadable one included) and
        its folder; the run as it was. Its folder is renamed to a trash name first (one atomic
        step: the id is free at once, and a delete cut short is finished at the next start), then
        removed off the event loop. FAILED_PRECONDITION for an active run, NOT_FOUND for an unknown one."""
        rec = self.get(run_id)
        if rec.state not in TERMINAL_STATES:
            raise FailedPrecondition("run_id", f"run {run_id!r} is {pb.RunState.Name(rec.state)}; only a finished "
                                               "run (SUCCEEDED, FAILED or CANCELLED) is deleted: cancel it first")
        before = rec.to_proto()
        # a symlink loses its link only; a folder it may not remove is refused, nothing removed
        trash = trash_run_folder(rec.folder, self.runs_root / f".{run_id}.deleted-{uuid.uuid4().hex[:8]}")
        del self.runs[run_id]
        rec.changed.set()
        if trash is not None and (why := await asyncio.to_thread(finish_removal, trash, rec.folder)):
            if rec.folder.exists():
                self._load_run(rec.folder)  # listed again as what is left of it
            raise FailedPrecondition("run_id", f"run {run_id!r}: {why}")
        log.info("run %s deleted", run_id)
        return before

    def _kill_worker(self, rec: RunRecord) -> None:
        self.executor.kill(rec)

    def list_page(self, state: int, page_size: int, page_token: str) -> tuple[list[pb.Run], str]:
        """One page of runs, newest first, and the next page's token ('' at the end)."""
        if state not in pb.RunState.values():
            raise InvalidArgument("state", f"unknown run state {state}")
        return page_of(self.list(state), page_size, page_token)

    def watch(self, run_id: str, after_seq: int = 0) -> AsyncIterator[pb.RunEvent]:
        """Events with seq > after_seq from the log, then live ones until the run ends (`views.follow`)."""
        return follow(self.get(run_id), after_seq)
