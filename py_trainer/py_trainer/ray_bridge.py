"""The Ray driver of `py-trainer serve --executor ray`, in a process of its own (never the sidecar's).

The sidecar (`ray_executor.py`) starts this module as a child process, one per run plus one for the
start-up probe, and reads one JSON object per line from its stdout. Only this process calls
``ray.init``: a Ray driver inside the sidecar's grpc.aio event loop made the sidecar stop answering
RPCs and ignore SIGTERM on a real two-node cluster, so the sidecar never imports ray.

- ``probe``: one task on every alive node writes a probe file into the runs root (which every
  node must mount); prints ``{"probes": [{"node", "path", "token"}], "cpus", "gpus"}`` and the
  sidecar reads each file back. ``{"error": ...}`` when the cluster cannot be reached.
- ``run``: a detached actor (`WorkerHost`, named after the runs root and the run) holds the
  run's resources on one node and runs the run's worker command there as a subprocess, the same
  entry point the local executor runs. The worker's event lines (its Unix socket, as locally) go
  to ``worker-events.jsonl`` in the run folder, which the sidecar tails; its output to worker.log.
  Prints ``{"node"}`` once placed, then ``{"rc"}`` when the worker exits, or ``{"lost"}`` when the
  actor or its node died. ``--attach``: follow the actor a previous sidecar started (``{"gone"}``
  when it no longer exists). Commands on stdin: ``stop`` (SIGUSR1 to a single worker), ``kill``
  (kill the actor, and the worker with it), ``release`` (the sidecar recorded the end: free the
  actor). SIGTERM or stdin closing ends this process and leaves the actor running: the next
  sidecar reattaches to it.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

NAMESPACE = "py-trainer"
NODE_DEATH_WAIT_S = 10.0
EVENTS_FILE = "worker-events.jsonl"
"""In the run folder: the worker's event lines, appended by its host on the node (fsync'd)."""


def say(**obj) -> None:
    print(json.dumps(obj), flush=True)


def connect(address: str) -> None:
    ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)


def node_name(node_id: str) -> str:
    """'<node ip> <node id>' (what Run.node shows)."""
    for n in ray.nodes():
        if n["NodeID"] == node_id:
            return f"{n['NodeManagerAddress']} {node_id}"
    return f"? {node_id}"


def node_lost(node_id: str, wait_s: float = NODE_DEATH_WAIT_S) -> bool:
    """Whether the cluster declares the node dead within `wait_s` (its actor's process can be
    reported dead a moment before its node is)."""
    deadline = time.monotonic() + wait_s
    while any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


# ---------------------------------------------------------------------------------------------
# The probe


@ray.remote(num_cpus=0, max_retries=0)
def write_probe(path: str, token: str) -> str:
    Path(path).write_text(token)
    return ray.get_runtime_context().get_node_id()


def probe(runs_root: Path) -> int:
    nodes = [n for n in ray.nodes() if n["Alive"]]
    jobs = []
    for n in nodes:
        token = uuid.uuid4().hex
        path = str(runs_root / f".ray-probe-{token}")
        where = NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
        jobs.append((n, path, token, write_probe.options(scheduling_strategy=where).remote(path, token)))
    probes = []
    for n, path, token, ref in jobs:
        name = f"{n['NodeManagerAddress']} {n['NodeID']}"
        try:
            ray.get(ref, timeout=120)
        except Exception as err:  # the node could not write there
            say(error=f"Ray node {name} cannot write its probe file {path}: {type(err).__name__}: "
                      f"{str(err).splitlines()[-1][:300]}")
            return 1
        probes.append({"node": name, "path": path, "token": token})
    total = ray.cluster_resources()
    say(probes=probes, cpus=int(total.get("CPU", 0)), gpus=int(total.get("GPU", 0)))
    return 0


# ---------------------------------------------------------------------------------------------
# The worker's host on its node


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@ray.remote(max_restarts=0, max_concurrency=4)
class WorkerHost:
    """Runs one worker command on this actor's node until it exits; its event lines to
    `events_file`, its output to `log_file`."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, events_file: str, log_file: str):
        self.node_id = ray.get_runtime_context().get_node_id()
        self.rc: int | None = None
        self.done = threading.Event()
        self.process: subprocess.Popen | None = None
        self.started = threading.Event()
        sock_dir = tempfile.mkdtemp(prefix="pyt-")
        self.sock_path = os.path.join(sock_dir, "events.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.sock_path)
        self.server.listen(1)
        threading.Thread(target=self._copy_events, args=(events_file,), daemon=True).start()
        # The thread that starts the worker lives until it exits: PR_SET_PDEATHSIG follows the
        # parent thread, and the worker dies with this actor (ray.kill, a lost node).
        threading.Thread(target=self._run, args=(argv, env, cwd, log_file), daemon=True).start()
        self.started.wait(60)

    def _copy_events(self, events_file: str) -> None:
        conn, _ = self.server.accept()
        with conn, open(events_file, "ab") as out, conn.makefile("rb") as lines:
            for line in lines:
                out.write(line)
                out.flush()
                os.fsync(out.fileno())

    def _run(self, argv: list[str], env: dict[str, str], cwd: str, log_file: str) -> None:
        try:
            with open(log_file, "ab") as log:
                self.process = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=cwd if os.path.isdir(cwd) else None,
                    env=dict(os.environ, **env, PY_TRAINER_EVENTS_SOCK=self.sock_path))
        except OSError as err:
            self.rc = 127
            Path(log_file).open("a").write(f"ray worker host: cannot start {argv[0]}: {err}\n")
        finally:
            self.started.set()
        if self.process is not None:
            self.rc = self.process.wait()
            time.sleep(0.1)  # the event copier drains the socket
        self.done.set()

    def node(self) -> str:
        return self.node_id

    def wait(self, timeout: float) -> int | None:
        """The worker's exit code, or None while it runs (after `timeout` seconds)."""
        self.done.wait(timeout)
        return self.rc if self.done.is_set() else None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR1)


def actor_name(runs_root: Path, run_id: str) -> str:
    return f"pyt-{hashlib.sha1(str(runs_root).encode()).hexdigest()[:10]}-{run_id}"


def follow(args: argparse.Namespace) -> int:
    """Start (or with --attach find) the run's actor, report its node, then its end."""
    name = actor_name(args.runs_root, args.run_id)
    if args.attach:
        try:
            host = ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            say(gone=f"its Ray actor {name} no longer exists")
            return 0
    else:
        try:
            ray.kill(ray.get_actor(name, namespace=NAMESPACE))  # a stale one from an earlier try
        except Exception:  # none, or already dead with its node
            pass
        spec = json.loads(sys.stdin.readline())
        host = WorkerHost.options(
            name=name, namespace=NAMESPACE, lifetime="detached", num_cpus=spec["cpus"], num_gpus=spec["gpus"],
            scheduling_strategy="SPREAD",
        ).remote(spec["argv"], spec["env"], spec["cwd"], spec["events_file"], spec["log_file"])
    commands: list[str] = []
    threading.Thread(target=_read_commands, args=(commands,), daemon=True).start()
    placed = host.node.remote()  # answers once the actor runs: it may wait for its resources
    node_id = node = ""
    killed = False
    while True:
        if "eof" in commands:
            return 0  # the sidecar is gone: the actor runs on for the next one
        if "kill" in commands and not killed:
            ray.kill(host, no_restart=True)
            killed = True
        if "stop" in commands and node_id:
            commands.remove("stop")
            host.stop.remote()
        try:
            if not node_id:
                node_id = ray.get(placed, timeout=1)
                node = node_name(node_id)
                say(node=node)
                continue
            rc = ray.get(host.wait.remote(0.5), timeout=30)
        except ray.exceptions.GetTimeoutError:
            continue
        except ray.exceptions.ActorUnavailableError:  # unreachable for now; dead would be ActorDiedError
            time.sleep(0.5)
            continue
        except ray.exceptions.RayActorError as err:
            if killed:
                say(rc=-signal.SIGKILL)
            elif not node_id:
                say(lost=f"its Ray actor {name} died before the worker started: {_first_line(err)}")
            elif node_lost(node_id):
                say(lost=f"Ray node {node} was lost during the run")
            else:
                say(lost=f"its Ray actor on node {node} died: {_first_line(err)}")
            break
        if rc is not None:
            say(rc=rc)
            break
    while "release" not in commands and "eof" not in commands:
        time.sleep(0.1)
    if "release" in commands:
        try:
            ray.kill(host, no_restart=True)
        except Exception:  # already gone with its node
            pass
    return 0


def _read_commands(commands: list[str]) -> None:
    for line in sys.stdin:
        commands.append(line.strip())
    commands.append("eof")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return (text.splitlines() or [type(err).__name__])[0][:300]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="py_trainer.ray_bridge")
    ap.add_argument("command", choices=["probe", "run"])
    ap.add_argument("--address", required=True)
    ap.add_argument("--runs-root", type=Path, required=True)
    ap.add_argument("--run-id", default="")
    ap.add_argument("--attach", action="store_true")
    args = ap.parse_args(argv)
    _die_with_parent()
    try:
        connect(args.address)
    except Exception as err:
        say(error=f"cannot connect to the Ray cluster at {args.address}: {_first_line(err)}")
        return 1
    # After ray.init (which may install handlers of its own): end at once, the actor runs on and
    # the next sidecar reattaches to it.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    return probe(args.runs_root) if args.command == "probe" else follow(args)


if __name__ == "__main__":
    sys.exit(main())
