"""The run scheduler: admits queued runs onto the sidecar's slots and supervises each run's worker.

The registry (`registry.py`) owns the runs, their events and the queue; this module decides when a
queued run starts and follows its worker to the end. It changes a run only through the three
callables the registry hands it (`transition`, `emit`, `fail_disk_full`), so every event still goes
through the registry's one writer. The queue is the registry's deque, shared: the registry appends
and removes, the scheduler pops its head when the head's slots are free (none overtakes it).

The worker's own events are recorded as they come; the state_change it proposes is held back and
recorded only after its exit code (`local_executor.worker_end`), so a worker that says SUCCEEDED and
then crashes is FAILED.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from pathlib import Path
from typing import Callable

from py_trainer.core.errors import is_disk_full
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.artifacts import latest_checkpoint
from py_trainer.runs.events import event_from_json
from py_trainer.runs.launch import WORKER, is_multi_process, launch_argv
from py_trainer.runs.local_executor import WorkerLost, recorded_worker_lines, worker_end
from py_trainer.runs.run_folder import TERMINAL_STATES, RunRecord, reconcile_summary, remove_temp_entries
from py_trainer.runs.runs_root import SpaceReserve
from py_trainer.runs.slots import SlotPool

log = logging.getLogger(__name__)

# While the disk is full, how often the scheduler looks for space before starting a queued run.
SPACE_POLL_S = 1.0


class RunScheduler:
    """Starts queued runs in order as slots free, one supervising task per run holding slots."""

    def __init__(self, runs: dict[str, RunRecord], queue: deque[str], executor, reserve: SpaceReserve, *,
                 data_root: Path, worker_argv: list[str],
                 transition: Callable[..., None],
                 emit: Callable[..., pb.RunEvent | None],
                 fail_disk_full: Callable[[RunRecord, str], None]):
        self.runs = runs
        self.queue = queue
        self.executor = executor
        self.reserve = reserve
        self.data_root = data_root
        self.worker_argv = worker_argv
        self.transition = transition
        """(rec, state, reason="") -> None: record a state change (the registry's `transition`)."""
        self.emit = emit
        """(rec, **kind) -> the event, or None when the disk was full (the registry's `emit`)."""
        self.fail_disk_full = fail_disk_full
        """(rec, path) -> None: FAILED "disk full at <path>" (the registry's `fail_disk_full`)."""
        self.slots: SlotPool  # given in start(), once the executor knows the cluster's size
        self.workers: dict[str, asyncio.Task] = {}
        """The supervising task of each run holding slots, in the order they started."""
        self.closing = False
        """Set by stop(): nothing more is admitted, and a worker that outlives the sidecar is not released."""
        self.task: asyncio.Task | None = None
        self._wake = asyncio.Event()

    def start(self, slots: SlotPool, reattach: list[RunRecord]) -> None:
        """Follow again the runs a previous sidecar left running (a cluster's), then admit queued runs."""
        self.slots = slots
        for rec in reattach:
            rec.slots = self.slots.take(max(1, rec.request.runtime.num_processes)) or []
            rec.cancel_requested = rec.state == pb.RUN_STATE_CANCELLING
            self._start_worker(rec, reattach=True)
        self.task = asyncio.create_task(self._schedule(), name="run-scheduler")

    def wake(self) -> None:
        """A run was queued: look at the queue's head again."""
        self._wake.set()

    def stop(self) -> None:
        """Admit nothing more; the workers run on (the registry stops or leaves them)."""
        self.closing = True
        if self.task:
            self.task.cancel()

    async def _schedule(self) -> None:
        """Admit queued runs in order as slots free (the head waits for its slots; none overtakes it)."""
        while not self.closing:
            self._wake.clear()
            if not self.queue:
                await self._wake.wait()
                continue
            if not self.reserve.ensure():  # disk full: queued runs wait for space
                await asyncio.sleep(SPACE_POLL_S)
                continue
            rec = self.runs[self.queue[0]]
            slots = self.slots.take(max(1, rec.request.runtime.num_processes))
            if slots is None:  # woken when a run ends and gives its slots back
                await self._wake.wait()
                continue
            self.queue.popleft()
            rec.slots = slots
            self._start_worker(rec)

    def _start_worker(self, rec: RunRecord, *, reattach: bool = False) -> None:
        task = asyncio.create_task(self._supervise(rec, reattach), name=f"run-{rec.run_id}")
        self.workers[rec.run_id] = task

    async def _supervise(self, rec: RunRecord, reattach: bool) -> None:
        try:
            await self._run_worker(rec, reattach=reattach)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug of ours must not stall the queue
            log.exception("run %s: worker supervision failed", rec.run_id)
            if rec.state not in TERMINAL_STATES:
                self.transition(rec, pb.RUN_STATE_FAILED, f"internal error: {exc}")
        finally:
            self.workers.pop(rec.run_id, None)
            self.slots.give_back(rec.slots)
            rec.slots, rec.node = [], ""
            if not self.closing:  # a worker that outlives the sidecar (Ray) is not released
                self.executor.release(rec)
                rec.changed.set()  # GetRun shows the slots given back
                self._wake.set()

    async def _run_worker(self, rec: RunRecord, *, reattach: bool = False) -> None:
        cursor = 0
        if reattach:
            cursor = recorded_worker_lines(rec.log.events)
        else:
            self.transition(rec, pb.RUN_STATE_RUNNING)
            if rec.state in TERMINAL_STATES:  # the disk filled before it started
                return
        ranks = max(1, rec.request.runtime.num_processes)
        log.info("run %s on %s", rec.run_id, self.slots.describe(rec.slots, ranks))
        terminal: list[pb.RunEvent] = []
        argv = self._argv_for(rec) + ["--run-dir", str(rec.folder), "--data-root", str(self.data_root)]
        try:
            rc = await self.executor.run(rec, argv, self.slots.env(rec.slots, ranks),
                                         lambda line: self._on_worker_event(rec, line, terminal),
                                         cursor=cursor, reattach=reattach)
        except OSError as err:
            if not is_disk_full(err):
                raise
            self.fail_disk_full(rec, str(rec.folder / "worker.log"))
            return
        except WorkerLost as err:
            ckpt = latest_checkpoint(rec.folder)
            self.transition(rec, pb.RUN_STATE_FAILED, f"{err}{f'; last checkpoint kept at {ckpt}' if ckpt else ''}")
            return
        self._finish(rec, rc, terminal)
        remove_temp_entries(rec.folder)

    def _argv_for(self, rec: RunRecord) -> list[str]:
        if self.worker_argv[1:] == WORKER:  # tests may swap in another real process
            rec.launched = is_multi_process(rec.request.runtime)
            return launch_argv(rec.request.runtime, self.data_root) + (["--resume"] if rec.resume else [])
        return list(self.worker_argv)

    def _on_worker_event(self, rec: RunRecord, line: bytes, terminal: list[pb.RunEvent]) -> None:
        if rec.state in TERMINAL_STATES:  # failed meanwhile (disk full): nothing more is recorded
            return
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
        self.emit(rec, **{kind: getattr(ev, kind)})

    def _finish(self, rec: RunRecord, rc: int, terminal: list[pb.RunEvent]) -> None:
        if rec.state in TERMINAL_STATES:
            return
        self.transition(rec, *worker_end(rec, rc, terminal[-1].state_change if terminal else None, self.closing))
        reconcile_summary(rec)
