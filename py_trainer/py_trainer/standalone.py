"""`py-trainer train --config run.yaml` and `py-trainer evaluate --config eval.yaml`: one job with
no server, the same run folder (and the same validation) as the served RPCs.

A config file holds the request in proto field names (``grpo: {max_steps: 40}``) as YAML or JSON.
A train request is validated exactly as the Train RPC validates it, its run folder is created
atomically through `runs.create_run_folder`, then it trains in this process; events are appended
to ``events.jsonl`` and echoed as one line per step on stdout.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

from google.protobuf import json_format

from py_trainer.errors import InvalidArgument, RequestError
from py_trainer.evaluate import plan_evaluation, run_evaluation
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs import EventLog, create_run_folder, find_stored_run
from py_trainer.worker import RunStopped, failure_reason, train_run, validate_train_request


def load_request_file(path: Path, message):
    """A request message from YAML or JSON (proto field names); errors name the file."""
    import yaml

    try:
        obj = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as err:
        raise InvalidArgument("config", f"{path}: not valid YAML/JSON: {err}") from None
    if not isinstance(obj, dict):
        raise InvalidArgument("config", f"{path}: expected a mapping at the top level")
    try:
        return json_format.ParseDict(obj, message)
    except json_format.ParseError as err:
        raise InvalidArgument("config", f"{path}: {err}") from None


def train_from_config(config: Path, runs_root: Path, data_root: Path, *, run_id: str = "") -> int:
    try:
        req = load_request_file(config, pb.TrainRequest())
        if run_id:
            req.run_id = run_id
        eff = validate_train_request(req, data_root)
        folder, eff = create_run_folder(runs_root, eff)
    except RequestError as err:
        print(f"py-trainer train: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
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


class _StoredRuns:
    """What `evaluate.plan_evaluation` needs of a registry, read from a runs root on disk."""

    def __init__(self, runs_root: Path, data_root: Path):
        self.runs_root, self.data_root = Path(runs_root), Path(data_root)

    def get(self, run_id: str):
        return find_stored_run(self.runs_root, run_id)


def evaluate_from_config(config: Path, output: Path | None, runs_root: Path, data_root: Path) -> int:
    """Evaluate an EvaluateRequest file; print each variant's mean scores; write the result as
    proto JSON to `output` (atomically) when given."""
    from py_trainer.atomic import write_atomic

    try:
        req = load_request_file(config, pb.EvaluateRequest())
        plan = plan_evaluation(req, _StoredRuns(runs_root, data_root))
    except RequestError as err:
        print(f"py-trainer evaluate: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    last = {"variant": "", "shown": -1}

    def progress(p: pb.EvaluateProgress) -> None:
        if p.variant != last["variant"] or p.tasks_done == p.tasks_total or p.tasks_done - last["shown"] >= 64:
            last.update(variant=p.variant, shown=p.tasks_done)
            print(f"{p.variant}: {p.tasks_done}/{p.tasks_total} tasks", flush=True)

    result = run_evaluation(plan, Path(data_root), progress)
    for v in result.variants:
        scores = "  ".join(f"{name} {v.mean_scores[name]:.3f}" for name in sorted(v.mean_scores))
        print(f"{v.name}: {scores} on {len(v.tasks)} tasks")
    if output is not None:
        write_atomic(Path(output), json.dumps(json_format.MessageToDict(result, preserving_proto_field_name=True),
                                              indent=1) + "\n")
        print(f"result: {output}")
    return 0
