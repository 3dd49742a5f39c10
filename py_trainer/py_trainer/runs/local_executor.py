"""The local executor: a run's worker as a process of the sidecar's own (the default): a child, or
on a CPU machine a child of its fork server (`forkserver.py`), which dies with it.

An executor starts a run's worker command (`launch.launch_argv`), hands every event line the
worker sends to the registry, asks the worker to stop after its step or kills it, and returns its
exit code; the registry (`runs/registry.py`) records the events and the end. The Ray executor
(`ray_executor.py`) does the same on a cluster node (`can_reattach`, `keeps_running`: its workers
outlive the sidecar). Here the worker's events come over a Unix socket ($PY_TRAINER_EVENTS_SOCK)
and its output goes to the run folder's worker.log.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Callable

from py_trainer.core.errors import FailedPrecondition
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.forkserver import ForkServer
from py_trainer.runs.launch import WORKER, ask_to_stop
from py_trainer.runs.run_folder import disk_full_path, tail_text

OnLine = Callable[[bytes], None]


class ExecutorUnavailable(RuntimeError):
    """The executor cannot serve (no cluster, a node that does not see the runs root): the sidecar
    refuses to start, with this message."""


class WorkerLost(RuntimeError):
    """The worker's machine went away (a cluster node lost): the message is the run's FAILED reason."""


def recorded_worker_lines(events: list[pb.RunEvent]) -> int:
    """How many of the worker's event lines a run's log holds: every event after its last RUNNING
    that is not a state change (the sidecar writes only state changes while a worker runs)."""
    since = max((i for i, e in enumerate(events) if e.state_change.state == pb.RUN_STATE_RUNNING), default=-1)
    return sum(1 for e in events[since + 1:] if not e.HasField("state_change"))


def worker_end(rec, rc: int, proposed: pb.StateChange | None, closing: bool) -> tuple[int, str]:
    """The state and reason a run ends in, from its worker's exit code and the terminal state the
    worker proposed (recorded only after the exit code says the worker got that far)."""
    shutdown = "sidecar shut down during the run; " if closing else ""
    if proposed is not None and rc == 0:
        return proposed.state, shutdown + proposed.reason if shutdown else proposed.reason
    if proposed is not None and proposed.state == pb.RUN_STATE_FAILED:
        where = disk_full_path(proposed.reason, rec.folder)
        return pb.RUN_STATE_FAILED, f"disk full at {where}" if where else proposed.reason
    if rec.cancel_requested:
        return pb.RUN_STATE_CANCELLED, f"{shutdown}cancelled; worker exited with {rc}"
    tail = tail_text(rec.folder / "worker.log")
    where = disk_full_path(tail, rec.folder)
    why = f"killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
    if rc in (-signal.SIGKILL, 137):
        why += " (out of memory?)"
    return pb.RUN_STATE_FAILED, f"disk full at {where}" if where else f"worker {why}; worker.log ends: {tail}"


WORKER_PRELOAD = {pb.TRAIN_MODE_GRPO: ["trl.trainer.grpo_trainer"],
                  pb.TRAIN_MODE_RANKED_PREFERENCE: ["trl.trainer.dpo_trainer"]}
"""What a forked training worker imports anyway, by mode, imported once in the fork server (with
what every run imports: PEFT, datasets, the plot): not the worker module itself, which each child
runs as __main__, as `python -m` does."""
RUN_PRELOAD = ["py_trainer.training.train_grpo", "py_trainer.training.train_preference", "py_trainer.training.train_agent",
               "peft", "datasets", "matplotlib.pyplot"]


class LocalExecutor:
    """Workers as child processes on this machine: forked by the sidecar's fork server when it
    has one (`forkserver.py`: a one-process run), else started as a process of their own."""

    def __init__(self, forks: ForkServer | None = None):
        self.forks = forks

    name = "local"
    keeps_running = False
    """Whether a run's worker outlives the sidecar (to be reattached by the next one)."""

    async def start(self, runs_root: Path, data_root: Path) -> None:
        """Nothing to check: the sidecar's own filesystem is the workers'."""

    def default_slots(self) -> int | None:
        """None: one slot per visible GPU, 1 on CPU (`slots.SlotPool`)."""
        return None

    def uses_local_devices(self) -> bool:
        """Whether requests are checked against this machine's devices and cores (`config.check_launch`)."""
        return True

    def check_request(self, req: pb.TrainRequest) -> None:
        """What these workers cannot run, refused at Train naming the field: ranks on other nodes."""
        if req.runtime.num_nodes > 1:
            raise FailedPrecondition("runtime.num_nodes", f"{req.runtime.num_nodes} nodes asked for, but this sidecar "
                                     "trains on its own machine (--executor local): serve with --executor ray "
                                     "--ray-address HEAD:PORT to span a Ray cluster's nodes, or run py-trainer train "
                                     "--machine-rank R on each node (Slurm: docs/scale.md)")

    def can_reattach(self, rec) -> str:
        """'' when a restarted sidecar can follow the run's worker again, else why not."""
        return "its worker was a child of the sidecar"

    async def run(self, rec, argv: list[str], env: dict[str, str], on_line: OnLine, *, cursor: int = 0,
                  reattach: bool = False) -> int:
        """Run the worker to its end; every event line to `on_line`; the exit code.
        OSError opening worker.log (a full disk) propagates."""
        sock_dir = tempfile.mkdtemp(prefix="pyt-")  # short path: AF_UNIX paths max out at 107 bytes
        sock_path = os.path.join(sock_dir, "events.sock")

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while line := await reader.readline():
                    on_line(line)
            finally:
                writer.close()

        server = await asyncio.start_unix_server(on_connect, path=sock_path, limit=2**24)
        try:
            env = dict(os.environ, **env, PY_TRAINER_EVENTS_SOCK=sock_path)
            with open(rec.folder / "worker.log", "ab") as worker_log:
                rec.process = await self._fork(argv, env, worker_log, rec.request.mode)
                if rec.process is None:
                    rec.process = await asyncio.create_subprocess_exec(
                        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=worker_log, stderr=worker_log, env=env)
            if rec.cancel_requested:  # cancelled in the instant between dequeue and spawn
                self.stop(rec)
            rc = await rec.process.wait()
            # Let the socket reader drain what the worker wrote before it exited.
            await asyncio.sleep(0.05)
        finally:
            server.close()
            await server.wait_closed()
            shutil.rmtree(sock_dir, ignore_errors=True)
        return rc

    async def _fork(self, argv: list[str], env: dict[str, str], worker_log, mode: int):
        """The worker forked by the fork server, or None where it cannot be (no fork server, one
        that refused, or a command other than `python -m py_trainer.workers.train_worker`: an accelerate launch)."""
        if self.forks is None or argv[:3] != [sys.executable, *WORKER]:
            return None
        return await self.forks.spawn_or_none(WORKER[1], argv[3:], env=env, stdout=worker_log, stderr=worker_log,
                                              title=" ".join(argv), preload=[*WORKER_PRELOAD.get(mode, []), *RUN_PRELOAD])

    def stop(self, rec) -> None:
        """Ask the worker to stop after its current step."""
        if rec.process and rec.process.returncode is None:
            ask_to_stop(rec.folder, rec.process, launched=rec.launched)

    def kill(self, rec) -> None:
        if rec.process and rec.process.returncode is None:
            rec.process.kill()

    def release(self, rec) -> None:
        """Forget the run's worker after its end (nothing to free locally)."""

    async def close(self) -> None:
        """Nothing outlives the sidecar here (the fork server is closed by whoever made it)."""
