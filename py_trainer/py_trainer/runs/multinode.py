"""One run's ranks across machines without Ray: `py-trainer train --config run.yaml --run-id R
--machine-rank M --main-process-ip IP [--main-process-port P]` once on each node (under Slurm:
`srun` with ``$SLURM_NODEID`` and the first host of ``$SLURM_JOB_NODELIST``; docs/scale.md).

Every node validates the request as the Train RPC does (`validate.validate_train_request`, against
its own devices and cores: num_processes / num_nodes ranks per node). Machine rank 0 is the
standalone run as on one machine (it holds the runs root's lock, creates the run folder, and its
global rank 0 writes the events, the checkpoints and the adapter); it runs `accelerate launch`
with accelerate's multi-node settings (`launch.launch_argv`). The other machines never create or
lock anything: they find the run folder by its run id on the shared runs root (so every node
must be given the same ``--run-id``, a fresh one per job), wait for machine 0 to create it, check
it holds the same request, and run their own launcher with ``--events-log`` (no rank of theirs is
global rank 0, so nothing is written but their log, ``worker-node<M>.log`` in the run folder).
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from py_trainer.core.errors import FailedPrecondition, InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.launch import launch_argv
from py_trainer.runs.run_folder import REQUEST_FILE, load_request

DEFAULT_PORT = 29500
"""accelerate's default --main_process_port."""
FOLDER_WAIT_S = 600.0
"""How long a machine rank > 0 waits for machine rank 0 to create the run folder."""


@dataclass(frozen=True)
class Machine:
    rank: int
    ip: str
    port: int = DEFAULT_PORT


def check_machine_flags(req: pb.TrainRequest, rank: int | None, ip: str, port: int) -> Machine | None:
    """The machine this process is, from the flags; InvalidArgument naming the flag when they do not
    fit the (validated) request: flags on a one-node request, a missing or out-of-range
    --machine-rank, no --main-process-ip, no run id (every node must name the same run)."""
    nodes = max(1, req.runtime.num_nodes)
    if nodes == 1:
        if rank is not None or ip:
            flag = "--machine-rank" if rank is not None else "--main-process-ip"
            raise InvalidArgument(flag, "only applies when runtime.num_nodes > 1 (this request runs on one machine)")
        return None
    if rank is None:
        raise InvalidArgument("--machine-rank", f"runtime.num_nodes is {nodes}: give this node's machine rank, "
                                                f"0 to {nodes - 1} (under Slurm: $SLURM_NODEID)")
    if not 0 <= rank < nodes:
        raise InvalidArgument("--machine-rank", f"{rank} must be in [0, {nodes - 1}] (runtime.num_nodes is {nodes})")
    if not ip:
        raise InvalidArgument("--main-process-ip", f"runtime.num_nodes is {nodes}: give machine rank 0's address "
                                                   "(under Slurm: the first host of $SLURM_JOB_NODELIST)")
    if not req.run_id:
        raise InvalidArgument("--run-id", f"runtime.num_nodes is {nodes}: every node must name the same run "
                                          "(e.g. --run-id job-$SLURM_JOB_ID)")
    return Machine(rank, ip, port)


def wait_for_run_folder(folder: Path, req: pb.TrainRequest, wait_s: float = FOLDER_WAIT_S) -> None:
    """Wait until machine rank 0 has created `folder` with this request; FailedPrecondition naming
    --run-id when it does not appear in time or holds another request (a run id used before)."""
    deadline = time.monotonic() + wait_s
    while not (folder / REQUEST_FILE).is_file():
        if time.monotonic() > deadline:
            raise FailedPrecondition("--run-id", f"machine rank 0 did not create {folder} within {wait_s:.0f} s "
                                                 "(is the runs root shared, and the same --run-id given to every node?)")
        time.sleep(0.5)
    if load_request(folder) != req:
        raise FailedPrecondition("--run-id", f"{folder} holds another request than this one: a run id used "
                                             "before? Give every node a fresh --run-id")


def train_on_other_machine(req: pb.TrainRequest, machine: Machine, runs_root: Path, data_root: Path) -> int:
    """Machine rank > 0: this node's ranks, in the run folder machine rank 0 creates. 0 when they
    exited 0, 1 otherwise (the run's state is machine 0's to record); 2 for a folder that never came."""
    folder = Path(runs_root) / req.run_id
    print(f"{req.run_id}: machine rank {machine.rank} of {req.runtime.num_nodes}, waiting for {folder}", flush=True)
    try:
        wait_for_run_folder(folder, req)
    except FailedPrecondition as err:
        print(f"py-trainer train: {err}", file=sys.stderr)
        return 2
    log_path = folder / f"worker-node{machine.rank}.log"
    argv = launch_argv(req.runtime, Path(data_root), (machine.rank, machine.ip, machine.port))
    with open(log_path, "ab") as out:
        rc = subprocess.run(argv + ["--run-dir", str(folder), "--data-root", str(data_root), "--events-log"],
                            stdin=subprocess.DEVNULL, stdout=out, stderr=out).returncode
    print(f"{req.run_id}: machine rank {machine.rank}'s ranks exited with {rc}; their log: {log_path}")
    return 0 if rc == 0 else 1
