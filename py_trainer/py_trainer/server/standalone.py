"""`py-trainer train --config run.yaml` and `py-trainer evaluate --config eval.yaml`: one job with
no server, the same run folder (and the same validation) as the served RPCs.

A config file holds the request in proto field names (``grpo: {max_steps: 40}``) as YAML or JSON.
A train request is validated exactly as the Train RPC validates it, its run folder is created
atomically through `run_folder.create_run_folder`, then it trains in this process; events are appended
to ``events.jsonl`` and echoed as one line per step on stdout.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import grpc
from google.protobuf import json_format

from py_trainer.core.errors import FailedPrecondition, InvalidArgument, RequestError
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.base_models import conversion_pending
from py_trainer.runs.events import EventLog
from py_trainer.runs.launch import is_multi_process
from py_trainer.runs.multinode import DEFAULT_PORT, Machine, check_machine_flags, train_on_other_machine
from py_trainer.runs.run_folder import create_run_folder, find_stored_run, tail_text
from py_trainer.server.progress import ProgressLine, TrainProgress, clock
from py_trainer.server.request_files import load_request_file
from py_trainer.server.validate import validate_train_request
from py_trainer.training.skeleton import RunStopped
from py_trainer.workers.evaluate import plan_evaluation, run_evaluation
from py_trainer.workers.train_worker import failure_reason, train_run


# ---------------------------------------------------------------------------------------------
# Jobs


def train_from_config(config: Path, runs_root: Path, data_root: Path, *, run_id: str = "",
                      machine_rank: int | None = None, main_process_ip: str = "",
                      main_process_port: int = DEFAULT_PORT) -> int:
    """One run with no server. The request is checked first (a mistake creates nothing); then the
    run holds the runs root's lock like a sidecar (a sidecar serving the same root is refused in
    one line, exit 2), and a full disk ends it with one line, never a traceback. A request with
    runtime.num_nodes > 1 runs once per node (`multinode.py`): machine rank 0 is this run, the
    others run their ranks in its folder."""
    from py_trainer.core.errors import DiskFull
    from py_trainer.runs.runs_root import RunsRootBusy, RunsRootLock

    try:
        req = load_request_file(config, pb.TrainRequest())
        if run_id:
            req.run_id = run_id
        eff = validate_train_request(req, data_root)
        machine = check_machine_flags(eff, machine_rank, main_process_ip, main_process_port)
    except RequestError as err:
        print(f"py-trainer train: {err.message if err.field == 'config' else err}", file=sys.stderr)
        return 2
    if machine is not None and machine.rank > 0:
        return train_on_other_machine(eff, machine, runs_root, data_root)
    lock = RunsRootLock(runs_root)
    try:
        lock.acquire()
    except RunsRootBusy as err:
        print(f"py-trainer train: {err}", file=sys.stderr)
        return 2
    try:
        return _train_locked(eff, runs_root, data_root, machine)
    except DiskFull as err:
        print(f"py-trainer train: {err}", file=sys.stderr)
        return 1
    finally:
        lock.release()


def _train_locked(eff: pb.TrainRequest, runs_root: Path, data_root: Path, machine: Machine | None = None) -> int:
    try:
        folder, eff = create_run_folder(runs_root, eff)
    except RequestError as err:
        print(f"py-trainer train: {err}", file=sys.stderr)
        return 2
    log = EventLog(folder, eff.run_id)

    line = ProgressLine(every_steps=max(1, eff.grpo.max_steps // 10))
    progress = TrainProgress(eff.mode, line)
    line.say(f"{eff.run_id}: training {eff.grpo.max_steps} steps ({pb.TrainMode.Name(eff.mode)}); run folder {folder}")

    def emit(ev: pb.RunEvent) -> None:
        kind = ev.WhichOneof("kind")
        log.append(**{kind: getattr(ev, kind)})
        if kind == "train_step":
            progress.step(ev.train_step.step, ev.train_step.max_steps, ev.train_step.metrics)
        elif kind == "warning":
            line.say(f"warning [{ev.warning.code}] at step {ev.warning.step}: {ev.warning.message}")

    stop = {"flag": False}
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__("flag", True))
    log.append(state_change=pb.StateChange(state=pb.RUN_STATE_RUNNING))
    if is_multi_process(eff.runtime):
        state, reason = train_in_ranks(folder, Path(data_root), eff.runtime, log, progress, line, machine)
        line.end()
        print(f"{eff.run_id}: {pb.RunState.Name(state)} {reason}".rstrip())
        print(f"run folder: {folder}")
        return 0 if state == pb.RUN_STATE_SUCCEEDED else 1
    try:
        state = train_run(folder, Path(data_root), emit, lambda: stop["flag"])
        reason = ""
    except RunStopped:
        state, reason = pb.RUN_STATE_CANCELLED, "interrupted before training"
    except Exception as exc:
        state, reason = pb.RUN_STATE_FAILED, failure_reason(exc)
    log.append(state_change=pb.StateChange(state=state, reason=reason))
    line.end()
    print(f"{eff.run_id}: {pb.RunState.Name(state)} {reason}".rstrip())
    print(f"run folder: {folder}")
    return 0 if state == pb.RUN_STATE_SUCCEEDED else 1


def train_in_ranks(folder: Path, data_root: Path, rt: pb.RuntimeSettings, log: EventLog, progress, line,
                   machine: Machine | None = None):
    """Several ranks through `accelerate launch` (`launch.launch_argv`; on machine rank 0 of several
    `machine`), as the sidecar runs them; rank 0 appends the events itself (``--events-log``) and
    this process shows them as they come. Ctrl-C asks every rank to stop after its step. Returns
    (state, reason)."""
    import subprocess

    from py_trainer.runs.launch import ask_to_stop, clear_stop, launch_argv

    clear_stop(folder)
    where = (machine.rank, machine.ip, machine.port) if machine else None
    argv = launch_argv(rt, data_root, where) + ["--run-dir", str(folder), "--data-root", str(data_root), "--events-log"]
    with open(folder / "worker.log", "ab") as worker_log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=worker_log, stderr=worker_log)
    signal.signal(signal.SIGINT, lambda *_: ask_to_stop(folder, proc, launched=True))
    seen = log.last_seq

    def show_new() -> EventLog:
        nonlocal seen
        current = EventLog(folder, folder.name)
        for ev in current.events[seen:]:
            kind = ev.WhichOneof("kind")
            if kind == "train_step":
                progress.step(ev.train_step.step, ev.train_step.max_steps, ev.train_step.metrics)
            elif kind == "warning":
                line.say(f"warning [{ev.warning.code}] at step {ev.warning.step}: {ev.warning.message}")
        seen = current.last_seq
        return current

    while proc.poll() is None:
        time.sleep(0.5)
        show_new()
    current = show_new()
    last = next((e.state_change for e in reversed(current.events) if e.WhichOneof("kind") == "state_change"), None)
    if last is not None and last.state in (pb.RUN_STATE_SUCCEEDED, pb.RUN_STATE_FAILED, pb.RUN_STATE_CANCELLED):
        return last.state, last.reason
    reason = f"ranks exited with {proc.returncode}; worker.log ends: {tail_text(folder / 'worker.log')}"
    current.append(state_change=pb.StateChange(state=pb.RUN_STATE_FAILED, reason=reason))
    return pb.RUN_STATE_FAILED, reason


class _StoredRuns:
    """What `evaluate.plan_evaluation` needs of a registry, read from a runs root on disk."""

    def __init__(self, runs_root: Path, data_root: Path):
        self.runs_root, self.data_root = Path(runs_root), Path(data_root)

    def get(self, run_id: str):
        return find_stored_run(self.runs_root, run_id)


USER_MISTAKES = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND,
                 grpc.StatusCode.ALREADY_EXISTS)
"""The statuses py-trainer exits 2 for (the user's mistake, refused before any work); out of memory
or an internal failure exits 1 (docs/usage.md's one exit-code rule)."""


def evaluate_from_config(config: Path, output: Path | None, runs_root: Path, data_root: Path) -> int:
    """Evaluate an EvaluateRequest file; print each variant's mean scores; write the result as
    proto JSON to `output` (atomically) when given."""
    from py_trainer.core.atomic import write_atomic

    try:
        req = load_request_file(config, pb.EvaluateRequest())
        plan = plan_evaluation(req, _StoredRuns(runs_root, data_root))
    except RequestError as err:
        print(f"py-trainer evaluate: {err.message if err.field == 'config' else err}", file=sys.stderr)
        return 2
    line = ProgressLine(every_steps=1_000_000)  # off a TTY: every 10 s, and each variant's end
    t0 = time.monotonic()
    last = {"variant": ""}

    def progress(p: pb.EvaluateProgress) -> None:
        if p.variant != last["variant"]:
            last["variant"] = p.variant
            line.say(f"evaluating {p.variant} on {p.tasks_total} tasks")
        line.update(f"{p.variant}: {p.tasks_done}/{p.tasks_total} tasks, elapsed {clock(time.monotonic() - t0)}",
                    force=p.tasks_done == p.tasks_total)

    if note := conversion_pending(plan.base_model, Path(data_root), before="the eval", later="later loads use"):
        line.say(f"warning [base_model_conversion]: {note}")  # a minute unsaid otherwise (issue 45)
    try:
        result = run_evaluation(plan, Path(data_root), progress)
    except RequestError as err:  # found only when loading or generating (a NaN adapter, out of memory)
        line.end()
        print(f"py-trainer evaluate: {err}", file=sys.stderr)
        return 2 if err.code in USER_MISTAKES else 1
    line.end()
    for v in result.variants:
        scores = "  ".join(f"{name} {v.mean_scores[name]:.3f}" for name in sorted(v.mean_scores))
        print(f"{v.name}: {scores} on {len(v.tasks)} tasks")
    if output is not None:
        write_atomic(Path(output), json.dumps(json_format.MessageToDict(result, preserving_proto_field_name=True),
                                              indent=1) + "\n")
        print(f"result: {output}")
    return 0


def export_adapter(adapter: Path, out: Path, *, merge: bool, base_model: str | None = None,
                   data_root: Path = Path("."), check_tasks: Path | None = None, check_split: str = "test",
                   check_n: int = 32) -> str:
    """Write `adapter` (a PEFT folder) to `out` as a PEFT adapter folder, or with `merge` as a full
    model (LoRA folded into the base by peft's merge_and_unload, plus the base's tokenizer) that
    `AutoModelForCausalLM.from_pretrained(out)` loads. The base is `base_model` when given ("" =
    the embedded default model), else the adapter's own base_model_name_or_path. `out` appears
    whole or not at all (built in a temp folder next to it, then renamed). Returns what was written.

    A merge is verified before it appears (`export_check`): the merged model, loaded from disk,
    against base + adapter on the first `check_n` prompts of `check_split` in `check_tasks`
    (under the data root; default: the embedded model's task file); the result is
    out/export-check.json, and on a mismatch `out` is not written, the result goes to
    <out>.export-check.json and MergeMismatch names the first differing prompt."""
    import shutil
    import tempfile

    adapter, out = Path(adapter), Path(out)
    cfg_path = adapter / "adapter_config.json"
    if not cfg_path.is_file():
        raise InvalidArgument("--adapter", f"{adapter}: no adapter_config.json (not a PEFT adapter folder)")
    check_export_out(out)
    if merge:  # the check's prompts up front: a wrong task file is refused before anything loads
        from py_trainer.models.tiny_model import default_tasks_path
        from py_trainer.workers.export_check import check_prompts, quiet_libraries

        tasks = Path(data_root) / check_tasks if check_tasks is not None else default_tasks_path()
        rows = check_prompts(tasks, check_split, check_n)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        if not merge:
            for f in adapter.iterdir():
                if f.is_file():
                    shutil.copy2(f, tmp / f.name)
            what = "PEFT adapter"
        else:
            quiet_libraries()
            from peft import PeftModel
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from py_trainer.models.loading import resolve_model_path

            if base_model is None:
                base_model = json.loads(cfg_path.read_text()).get("base_model_name_or_path") or ""
            base_path = resolve_model_path(base_model, data_root)
            base = AutoModelForCausalLM.from_pretrained(base_path)
            merged = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
            merged.save_pretrained(tmp)
            AutoTokenizer.from_pretrained(base_path).save_pretrained(tmp)
            del base, merged
            check = verify_export(base_path, adapter, tmp, out, rows, {"tasks": str(tasks), "split": check_split})
            what = (f"merged model (base {base_model or 'the embedded default model'}), checked on {check['prompts']} "
                    f"test prompts: greedy completions identical, logits within {check['atol']:g} + "
                    f"{check['rtol']:g} x |logit| ({check['dtype']}; max difference {check['max_abs_logit_diff']:.2g})")
        try:
            if out.exists():
                out.rmdir()
            tmp.rename(out)
        except OSError as err:  # another export to the same --out finished first (ENOTEMPTY / EEXIST)
            raise FailedPrecondition("--out", f"{out} was filled meanwhile (another export to it finished first: "
                                              f"{err.strerror}); this export wrote nothing: choose another --out") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return what


def check_export_out(out: Path) -> None:
    """--out must be a folder to create (its parent made if missing) or an empty one; a file, or a
    parent that is a file, is INVALID_ARGUMENT naming it (was a NotADirectoryError traceback)."""
    if out.exists() and not out.is_dir():
        raise InvalidArgument("--out", f"{out}: is a file; give a folder to create")
    if out.is_dir() and any(out.iterdir()):
        raise InvalidArgument("--out", f"{out}: exists and is not empty")
    parent = next((p for p in out.parents if p.exists()), Path("."))
    if not parent.is_dir():
        raise InvalidArgument("--out", f"{parent}: is a file, so {out} cannot be created under it")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvalidArgument("--out", f"{out.parent}: cannot be created ({err.strerror})") from None


def verify_export(base_path: str, adapter: Path, tmp: Path, out: Path, rows: list[pb.TaskRow], source: dict) -> dict:
    """`export_check` on the merged model in `tmp` over `rows`; its result in tmp/export-check.json
    (it moves with the export), or on a mismatch in <out>.export-check.json before MergeMismatch
    goes up."""
    from py_trainer.core.atomic import write_atomic
    from py_trainer.workers.export_check import MergeMismatch, verify_merged_folder

    try:
        result = verify_merged_folder(base_path, adapter, tmp, rows)
    except MergeMismatch as err:
        write_atomic(out.parent / f"{out.name}.export-check.json", json.dumps({**err.result, **source}, indent=1) + "\n")
        raise
    write_atomic(tmp / "export-check.json", json.dumps({**result, **source}, indent=1) + "\n")
    (out.parent / f"{out.name}.export-check.json").unlink(missing_ok=True)  # an earlier failed attempt's
    return result
