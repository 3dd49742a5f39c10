"""How a run's training process is started and asked to stop: one worker process, or several
ranks through `accelerate launch`.

- One process: ``python -m py_trainer.workers.train_worker``.
- ``runtime.num_processes`` > 1 or ``runtime.accelerate_config``: ``accelerate launch`` with that
  many ranks (torchrun underneath; without CUDA the ranks train on CPU over the gloo backend);
  with ``runtime.num_nodes`` > 1, one launcher per node (accelerate's multi-node settings).
  Every rank trains; rank 0 alone writes run files and events. A user's accelerate config
  (DeepSpeed ZeRO, FSDP) goes to ``--config_file`` unchanged.
- Stop after the current step: `CANCEL_FILE` in the run folder, which every rank checks at each
  step end (and all agree, `training.stop_on_every_rank`), plus SIGUSR1 for a single worker. An
  accelerate launcher is never sent SIGUSR1: it would die, and its ranks with it, instead of
  stopping cleanly.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from pathlib import Path

from py_trainer.core.paths import resolve_under
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

log = logging.getLogger(__name__)

CANCEL_FILE = "cancel-requested"
"""Touched in the run folder to ask every rank of a worker to stop after the current step."""
WORKER = ["-m", "py_trainer.workers.train_worker"]


def is_multi_process(rt: pb.RuntimeSettings) -> bool:
    return rt.num_processes > 1 or bool(rt.accelerate_config)


def launch_argv(rt: pb.RuntimeSettings, data_root: Path, machine: tuple[int, str, int] | None = None) -> list[str]:
    """The command that starts a run's training (the caller appends --run-dir/--data-root).

    ``runtime.num_nodes`` > 1: one such command runs on each node, with accelerate's multi-node
    settings: ``--num_processes`` stays the total rank count (accelerate runs num_processes /
    num_machines on each node), and `machine` = (machine rank, main process ip, main process port)
    says which node this is and where machine rank 0's rendezvous listens. Without `machine` the
    three values are the placeholders `MACHINE_SETTINGS`, which each node's launcher fills
    (`fill_machine`: the Ray executor knows them only once machine 0 is placed)."""
    if not is_multi_process(rt):
        return [sys.executable, *WORKER]
    nodes = max(1, rt.num_nodes)
    argv = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(max(1, rt.num_processes)),
            "--num_machines", str(nodes)]
    if nodes > 1:
        rank, ip, port = machine or MACHINE_SETTINGS
        argv += ["--machine_rank", str(rank), "--main_process_ip", str(ip), "--main_process_port", str(port)]
    else:
        argv += ["--main_process_port", str(free_port())]
    if rt.accelerate_config:
        argv += ["--config_file", str(resolve_under(data_root, rt.accelerate_config, "runtime.accelerate_config"))]
    else:
        # --multi_gpu selects accelerate's torchrun launcher; without CUDA the ranks run on CPU (gloo)
        argv += ["--multi_gpu", "--mixed_precision", "no", "--dynamo_backend", "no"]
    return argv + WORKER


MACHINE_SETTINGS = ("{machine_rank}", "{main_process_ip}", "{main_process_port}")
"""Placeholders in a multi-node argv built without a machine (`launch_argv`)."""


def fill_machine(argv: list[str], rank: int, ip: str, port: int) -> list[str]:
    """`argv` with `MACHINE_SETTINGS` replaced by this node's machine rank and machine 0's address."""
    subs = dict(zip(MACHINE_SETTINGS, (str(rank), ip, str(port))))
    return [subs.get(a, a) for a in argv]


def free_port() -> int:
    """A TCP port free on loopback right now (for the ranks' rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask_to_stop(folder: Path, process, *, launched: bool) -> None:
    """Ask a running worker (`process`, an asyncio or subprocess process) to stop after its step."""
    try:
        (Path(folder) / CANCEL_FILE).touch()
    except OSError as err:
        log.warning("%s: cannot write %s: %s", folder, CANCEL_FILE, err)
    if process is not None and process.returncode is None and not launched:
        process.send_signal(signal.SIGUSR1)


def clear_stop(folder: Path) -> None:
    """Forget an old stop request (before a worker starts or a run resumes)."""
    (Path(folder) / CANCEL_FILE).unlink(missing_ok=True)
