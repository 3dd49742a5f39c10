"""The training process of one run: dispatches on the request's mode, nothing else.

- TRAIN_MODE_GRPO -> `train_grpo.GrpoMode` (TRL GRPOTrainer + PEFT LoRA, rewards from `task_rewards.py`);
- TRAIN_MODE_RANKED_PREFERENCE -> `train_preference.PreferenceMode` (TRL DPOTrainer on pairs
  from K-way rankings);
- TRAIN_MODE_SFT -> `train_sft.SftMode` (the warm start: TRL SFTTrainer + PEFT LoRA on
  demonstration episodes);
both through the one run skeleton in `training/skeleton.py`. The request it reads is the effective one
`validate.validate_train_request` stored (every default filled); `validate.MODE_CHECKS` names the
same modes, so the server, standalone runs and this process agree on what a request means.

Run as a process by the sidecar (``python -m py_trainer.workers.train_worker --run-dir D --data-root R``): events
go to the Unix socket in $PY_TRAINER_EVENTS_SOCK; SIGUSR1 asks it to stop after the current
step (cancel), keeping a checkpoint; it dies with its parent (PR_SET_PDEATHSIG) and when the
events socket breaks, so a killed sidecar never leaves an orphan writing into a run folder.
`py-trainer train --config` calls `train_run` in-process with the same folder layout.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Callable

# A cancel (SIGUSR1, launch.ask_to_stop) that arrives while the imports below run (seconds: torch,
# TRL) must not kill the worker by SIGUSR1's default action ("cancelled; worker exited with -10"):
# ignored until main() installs the handler; the cancel file carries the request meanwhile.
signal.signal(signal.SIGUSR1, signal.SIG_IGN)

from google.protobuf import json_format

from py_trainer.core.errors import InvalidArgument
from py_trainer.core.rewards import RewardFunctionError
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.events import EventLog
from py_trainer.runs.launch import CANCEL_FILE
from py_trainer.runs.run_folder import load_request
from py_trainer.training.skeleton import Emit, RunStopped, close_process_group, run_training
from py_trainer.training.train_agent import AgentMode
from py_trainer.training.train_grpo import GrpoMode
from py_trainer.training.train_preference import PreferenceMode
from py_trainer.training.train_sft import SftMode
from py_trainer.workers.memory_estimate import preflight

log = logging.getLogger(__name__)

MODES = {pb.TRAIN_MODE_GRPO: GrpoMode, pb.TRAIN_MODE_RANKED_PREFERENCE: PreferenceMode, pb.TRAIN_MODE_SFT: SftMode}


def train_run(run_dir: Path, data_root: Path, emit: Emit, should_stop: Callable[[], bool], *,
              resume: bool = False) -> int:
    """Train one run in the mode its request names; return the proposed terminal RunState.
    `resume`: continue from the run's last complete checkpoint."""
    req = load_request(run_dir)
    check_memory(req, data_root)
    mode = AgentMode() if req.mode == pb.TRAIN_MODE_GRPO and req.HasField("agent") else MODES[req.mode]()
    return run_training(run_dir, data_root, emit, should_stop, mode, resume=resume)


def check_memory(req: pb.TrainRequest, data_root: Path) -> None:
    """A GRPO run on CUDA fails before its model loads when the memory estimate exceeds the
    device's free memory, naming the knob to lower (memory_estimate.preflight; never on CPU). A
    base whose config.json is not local cannot be estimated: the run goes on and says so in its log."""
    if req.mode != pb.TRAIN_MODE_GRPO:
        return
    try:
        preflight(req, data_root)
    except InvalidArgument as err:
        log.info("no memory preflight: %s", err)


def failure_reason(exc: BaseException) -> str:
    """The FAILED reason: a reward error (however deeply TRL wrapped it) names reward and sample."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, RewardFunctionError):
        cause = cause.__cause__ or cause.__context__
    text = str(cause) if cause is not None else f"{type(exc).__name__}: {exc}"
    return text[:2000]


# ---------------------------------------------------------------------------------------------
# Process entry point


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class SocketEmitter:
    """Sends events as JSON lines; a broken socket means the sidecar is gone: exit at once."""

    def __init__(self, path: str | None):
        self.sock = None
        if path and int(os.environ.get("RANK", "0")) == 0:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(path)

    def __call__(self, ev: pb.RunEvent) -> None:
        if self.sock is None:
            return
        line = json_format.MessageToJson(ev, indent=None, preserving_proto_field_name=True) + "\n"
        try:
            self.sock.sendall(line.encode())
        except OSError:
            os._exit(3)


class LogEmitter:
    """Rank 0 of a standalone multi-process run: events straight into events.jsonl (no sidecar);
    a state change is recorded too, since no supervisor will."""

    def __init__(self, run_dir: Path):
        self.log = EventLog(run_dir, run_dir.name) if int(os.environ.get("RANK", "0")) == 0 else None

    def __call__(self, ev: pb.RunEvent) -> None:
        if self.log is not None:
            kind = ev.WhichOneof("kind")
            self.log.append(**{kind: getattr(ev, kind)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="py_trainer.workers.train_worker")
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--data-root", type=Path, required=True)
    ap.add_argument("--resume", action="store_true", help="continue from the run's last complete checkpoint")
    ap.add_argument("--events-log", action="store_true",
                    help="no sidecar: rank 0 appends events to the run's events.jsonl itself (standalone runs)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _die_with_parent()
    stop = {"flag": False}
    signal.signal(signal.SIGUSR1, lambda *_: stop.__setitem__("flag", True))
    if args.events_log:
        emit = LogEmitter(args.run_dir)
    else:
        emit = SocketEmitter(os.environ.get("PY_TRAINER_EVENTS_SOCK"))
    cancel_file = args.run_dir / CANCEL_FILE
    try:
        rc = _train_and_report(args, emit, lambda: stop["flag"] or cancel_file.exists())
    except BaseException:
        close_process_group()
        raise
    if close_process_group():
        _exit_now(rc)
    return rc


def _exit_now(rc: int) -> None:
    """A rank of a multi-process run leaves without interpreter finalization or C++ static
    destructors, where gloo's threads can still abort the process (training.close_process_group).
    Everything it writes is already on disk (atomic writes, fsync'd event log, the events socket
    is synchronous); logs and stdio are flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def _train_and_report(args, emit: Emit, should_stop: Callable[[], bool]) -> int:
    try:
        state = train_run(args.run_dir, args.data_root, emit, should_stop, resume=args.resume)
    except RunStopped:
        emit(pb.RunEvent(state_change=pb.StateChange(state=pb.RUN_STATE_CANCELLED, reason="cancelled before training")))
        return 0
    except Exception as exc:
        log.exception("training failed")
        emit(pb.RunEvent(state_change=pb.StateChange(state=pb.RUN_STATE_FAILED, reason=failure_reason(exc))))
        return 1
    reason = "cancelled; stopped after the current step, checkpoint and adapter kept" \
        if state == pb.RUN_STATE_CANCELLED else ""
    emit(pb.RunEvent(state_change=pb.StateChange(state=state, reason=reason)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
