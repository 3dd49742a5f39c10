"""`py-trainer train --config run.yaml`: one run with no server, the same run folder as a served one.

The YAML/JSON file holds a TrainRequest in proto field names (``grpo: {max_steps: 40}``). It is
validated exactly as the Train RPC validates it, then trained in this process; events are
appended to ``events.jsonl`` and echoed as one line per step on stdout.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from google.protobuf import json_format

from py_trainer.errors import RequestError
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.paths import validate_run_id
from py_trainer.runs import REQUEST_FILE, EventLog, new_run_id, write_atomic


def train_from_config(config: Path, runs_root: Path, data_root: Path, *, run_id: str = "") -> int:
    from py_trainer.train_config import load_request_file, validate_train_request
    from py_trainer.worker import RunStopped, failure_reason, train_run

    try:
        req = load_request_file(config)
        if run_id:
            req.run_id = run_id
        eff = validate_train_request(req, data_root)
        eff.run_id = eff.run_id or new_run_id()
        validate_run_id(eff.run_id)
    except RequestError as err:
        print(f"py-trainer train: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    folder = Path(runs_root) / eff.run_id
    if folder.exists():
        print(f"py-trainer train: run_id: a run {eff.run_id!r} already exists in {runs_root}", file=sys.stderr)
        return 2
    folder.mkdir(parents=True)
    write_atomic(folder / REQUEST_FILE, json_format.MessageToJson(eff, preserving_proto_field_name=True))
    log = EventLog(folder, eff.run_id)

    def emit(ev: pb.RunEvent) -> None:
        kind = ev.WhichOneof("kind")
        log.append(**{kind: getattr(ev, kind)})
        if kind == "train_step":
            m = ev.train_step.metrics
            print(f"step {ev.train_step.step}/{ev.train_step.max_steps} reward {m.get('reward', float('nan')):.3f} "
                  f"kl {m.get('kl', float('nan')):.4f}", flush=True)
        elif kind == "warning":
            print(f"warning [{ev.warning.code}] {ev.warning.message}", flush=True)

    stop = {"flag": False}
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__("flag", True))
    log.append(state_change=pb.StateChange(state=pb.RUN_STATE_RUNNING))
    try:
        state = train_run(folder, Path(data_root), emit, lambda: stop["flag"])
        reason = ""
    except RunStopped:
        state, reason = pb.RUN_STATE_CANCELLED, "interrupted before training"
    except Exception as exc:
        state, reason = pb.RUN_STATE_FAILED, failure_reason(exc)
    log.append(state_change=pb.StateChange(state=state, reason=reason))
    print(f"{eff.run_id}: {pb.RunState.Name(state)} {reason}".rstrip())
    print(f"run folder: {folder}")
    return 0 if state == pb.RUN_STATE_SUCCEEDED else 1
