"""Start a real `py-trainer serve` process for a test and stop it (SIGTERM) afterwards; watch its runs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import json_format

from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2_grpc as pb_grpc

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Sidecar:
    proc: subprocess.Popen
    port: int
    runs_root: Path
    data_root: Path
    log_path: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def sidecar_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def launch(runs_root: Path, data_root: Path, *args: str, env: dict | None = None,
           log_path: Path | None = None, timeout: float = 60.0, argv_prefix: list[str] | None = None) -> Sidecar:
    """Start the sidecar on a free port and wait until it prints that it is listening (`argv_prefix`:
    a command it runs under, e.g. setpriv to run it as an ordinary user)."""
    runs_root.mkdir(parents=True, exist_ok=True)
    log_path = log_path or runs_root.parent / f"sidecar-{time.monotonic_ns()}.log"
    logf = open(log_path, "ab")
    proc = subprocess.Popen(
        [*(argv_prefix or []), sys.executable, "-m", "py_trainer.server.cli", "serve", "--host", "127.0.0.1", "--port", "0",
         "--runs-root", str(runs_root), "--data-root", str(data_root), *args],
        stdout=logf, stderr=subprocess.STDOUT, env=env or sidecar_env(), cwd=REPO,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(rb"py-trainer listening on [\d.]+:(\d+)", log_path.read_bytes())
        if m:
            return Sidecar(proc, int(m.group(1)), runs_root, data_root, log_path)
        if proc.poll() is not None:
            raise RuntimeError(f"sidecar exited with {proc.returncode}:\n{log_path.read_text()}")
        time.sleep(0.05)
    proc.kill()
    raise TimeoutError(f"sidecar did not start in {timeout}s:\n{log_path.read_text()}")


@contextmanager
def running_sidecar(tmp_path: Path, *args: str, **kw):
    sc = launch(tmp_path / "runs", tmp_path / "data", *args, **kw)
    (tmp_path / "data").mkdir(exist_ok=True)
    try:
        yield sc
    finally:
        if sc.proc.poll() is None:
            sc.proc.kill()
            sc.proc.wait()


# ---------------------------------------------------------------------------------------------
# Watching a served run

TERMINAL = {pb.RUN_STATE_SUCCEEDED, pb.RUN_STATE_FAILED, pb.RUN_STATE_CANCELLED}


def stub_for(sc: Sidecar):
    ch = grpc.insecure_channel(sc.address)
    return ch, pb_grpc.TrainerServiceStub(ch)


def wait_for(pred, timeout=180.0, every=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise TimeoutError("condition not reached")


def wait_state(stub, run_id, states, timeout=240.0) -> pb.Run:
    return wait_for(lambda: (r := stub.GetRun(pb.GetRunRequest(run_id=run_id), timeout=10).run).state in states and r,
                    timeout)


def read_events(folder: Path) -> list[pb.RunEvent]:
    return [json_format.Parse(l, pb.RunEvent()) for l in (folder / "events.jsonl").read_text().splitlines()]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (its children, theirs, ...): a sidecar's workers are its
    fork server's children."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                kids = [int(c) for c in (task / "children").read_text().split()]
                found += kids
                todo += kids
        except (FileNotFoundError, ProcessLookupError):
            continue  # it exited meanwhile
    return found
