"""The Ray driver of `py-trainer serve --executor ray`, in a process of its own (never the sidecar's).

The sidecar (`ray_executor.py`) starts this module as a child process, one per run plus one for the
start-up probe, and reads one JSON object per line from its stdout. Only this process calls
``ray.init``: a Ray driver inside the sidecar's grpc.aio event loop made the sidecar stop answering
RPCs and ignore SIGTERM on a real two-node cluster, so the sidecar never imports ray.

- ``probe``: one task on every alive node writes a probe file into the runs root (which every
  node must mount); prints ``{"probes": [{"node", "path", "token"}], "cpus", "gpus", "nodes":
  [{"node", "cpus", "gpus"}]}`` and the sidecar reads each file back. ``{"error": ...}`` when the
  cluster cannot be reached.
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
- ``run --nodes N`` (runtime.num_nodes > 1): a detached placement group of N bundles, one per
  node (STRICT_SPREAD; each bundle = one node's ranks' CPUs and GPUs), and one actor per bundle
  (machine rank = bundle index). Machine rank 0's actor picks a free port on its node and reports
  its node's address; each actor runs ``accelerate launch --num_machines N --machine_rank r
  --main_process_ip IP --main_process_port PORT`` (`launch.fill_machine`). Only machine 0's worker
  sends events (global rank 0 lives there); the others' output goes to ``worker-node<r>.log``.
  ``{"node"}`` names every node, joined with ", ". The run ends when every worker has exited
  (``{"rc": 0}``) or at the first failure: machine 0's non-zero exit code, or ``{"lost"}`` naming
  the node whose worker failed or that was lost; the other actors are killed at once (their ranks
  would otherwise wait in a collective until the gloo/NCCL timeout). ``release`` frees the actors
  and the placement group; ``--attach`` finds every actor by name, or frees what is left.
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
from ray.util.placement_group import get_placement_group, placement_group, remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

from py_trainer.runs.launch import fill_machine
from py_trainer.runs.run_folder import tail_text

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
    each = [{"node": f"{n['NodeManagerAddress']} {n['NodeID']}", "cpus": int(n["Resources"].get("CPU", 0)),
             "gpus": int(n["Resources"].get("GPU", 0))} for n in nodes]
    say(probes=probes, cpus=int(total.get("CPU", 0)), gpus=int(total.get("GPU", 0)), nodes=each)
    return 0


# ---------------------------------------------------------------------------------------------
# The worker's host on its node


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@ray.remote(max_restarts=0, max_concurrency=4)
class WorkerHost:
    """Runs one worker command on this actor's node until it exits; its event lines to
    `events_file` (None: none are expected, machine ranks > 0 of a multi-node run), its output to
    `log_file`. `machine` = [machine rank, main ip, main port] for one node of a multi-node run:
    machine rank 0 picks a free port on its node and its node's address (`main_address`)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, events_file: str | None, log_file: str,
                 machine: list | None = None):
        self.node_id = ray.get_runtime_context().get_node_id()
        self.rc: int | None = None
        self.done = threading.Event()
        self.process: subprocess.Popen | None = None
        self.started = threading.Event()
        self.main: tuple[str, int] | None = None
        if machine is not None:
            rank, ip, port = machine
            if ip is None:
                with socket.socket() as s:
                    s.bind(("", 0))
                    ip, port = ray.util.get_node_ip_address(), s.getsockname()[1]
            self.main = (ip, port)
            argv = fill_machine(argv, rank, ip, port)
        self.sock_path = ""
        if events_file is not None:
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
                    env=dict(os.environ, **env, **({"PY_TRAINER_EVENTS_SOCK": self.sock_path} if self.sock_path else {})))
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

    def main_address(self) -> tuple[str, int] | None:
        """(ip, port) of machine rank 0's rendezvous (a multi-node run's first host)."""
        return self.main

    def wait(self, timeout: float) -> int | None:
        """The worker's exit code, or None while it runs (after `timeout` seconds)."""
        self.done.wait(timeout)
        return self.rc if self.done.is_set() else None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR1)


def actor_name(runs_root: Path, run_id: str) -> str:
    return f"pyt-{hashlib.sha1(str(runs_root).encode()).hexdigest()[:10]}-{run_id}"


def host_names(name: str, nodes: int) -> list[str]:
    """The run's actors: `name` on machine rank 0, `name`-node<r> on the others."""
    return [name] + [f"{name}-node{r}" for r in range(1, nodes)]


def free(names: list[str], hosts: list = ()) -> None:
    """Kill the run's actors (found by name when `hosts` is empty) and remove its placement group."""
    for host in hosts or [h for n in names if (h := _actor(n)) is not None]:
        try:
            ray.kill(host, no_restart=True)
        except Exception:  # already gone with its node
            pass
    try:
        remove_placement_group(get_placement_group(f"{names[0]}-pg"))
    except Exception:  # none (one node), or already removed
        pass


def _actor(name: str):
    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return None


class Interrupted(Exception):
    """A command ("eof" or "kill") or a cluster too small for the run arrived while placing it."""


def _get(call, commands: list[str], nodes: int = 0):
    """ray.get(call()), giving way to the sidecar's commands (called again when its actor was
    unreachable for a moment); while a placement group of `nodes` bundles waits, a cluster with
    fewer alive nodes ends the wait (Interrupted)."""
    ref = call()
    while True:
        for command in ("eof", "kill"):
            if command in commands:
                raise Interrupted(command)
        try:
            return ray.get(ref, timeout=1)
        except ray.exceptions.ActorUnavailableError:  # unreachable for now; dead would be ActorDiedError
            time.sleep(0.5)
            ref = call()
        except ray.exceptions.GetTimeoutError:
            if nodes and (alive := sum(1 for n in ray.nodes() if n["Alive"])) < nodes:
                raise Interrupted(f"the run needs {nodes} Ray nodes (runtime.num_nodes), the cluster has {alive} "
                                  "alive") from None


def place(spec: dict, names: list[str], commands: list[str]) -> list:
    """The run's actors: one (SPREAD) for a one-node run; for num_nodes > 1 a placement group of
    one bundle per node (STRICT_SPREAD) and one actor per bundle, machine rank = bundle index,
    each told machine 0's address once machine 0's actor has picked it."""
    opts = {"namespace": NAMESPACE, "lifetime": "detached", "num_cpus": spec["cpus"], "num_gpus": spec["gpus"]}
    args = (spec["argv"], spec["env"], spec["cwd"])
    nodes = spec.get("nodes", 1)
    if nodes == 1:
        return [WorkerHost.options(name=names[0], scheduling_strategy="SPREAD", **opts).remote(
            *args, spec["events_file"], spec["log_file"])]
    bundle = {"CPU": spec["cpus"], **({"GPU": spec["gpus"]} if spec["gpus"] else {})}
    pg = placement_group([bundle] * nodes, strategy="STRICT_SPREAD", name=f"{names[0]}-pg", lifetime="detached")
    _get(pg.ready, commands, nodes)
    hosts, main = [], (None, None)
    for rank, name in enumerate(names):
        where = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=rank)
        log_file = spec["log_file"] if rank == 0 else str(Path(spec["log_file"]).with_name(f"worker-node{rank}.log"))
        hosts.append(WorkerHost.options(name=name, scheduling_strategy=where, **opts).remote(
            *args, spec["events_file"] if rank == 0 else None, log_file, [rank, *main]))
        if rank == 0:
            main = _get(hosts[0].main_address.remote, commands)
    return hosts


def follow(args: argparse.Namespace) -> int:
    """Start (or with --attach find) the run's actors, report their nodes, then the run's end."""
    names = host_names(actor_name(args.runs_root, args.run_id), args.nodes)
    commands: list[str] = []
    if args.attach:
        hosts = [_actor(n) for n in names]
        if None in hosts:
            free(names)
            say(gone=f"its Ray actor {names[hosts.index(None)]} no longer exists")
            return 0
        threading.Thread(target=_read_commands, args=(commands,), daemon=True).start()
    else:
        free(names)  # stale ones from an earlier try
        spec = json.loads(sys.stdin.readline())
        threading.Thread(target=_read_commands, args=(commands,), daemon=True).start()
        try:
            hosts = place(spec, names, commands)
        except Interrupted as why:
            if str(why) == "eof":
                return 0  # the sidecar is gone: the next one finds the run not placed and fails it
            free(names)
            say(**{"rc": -signal.SIGKILL} if str(why) == "kill" else {"lost": str(why)})
            hosts = []
        except ray.exceptions.RayActorError as err:
            free(names)
            say(lost=f"its Ray actor {names[0]} died before the worker started: {_first_line(err)}")
            hosts = []
    if hosts:
        end = watch(hosts, names, commands, args.runs_root / args.run_id)
        if end is None:
            return 0  # the sidecar is gone: the actors run on for the next one
        if len(hosts) > 1 and (end.get("lost") or end.get("rc")):
            free(names, hosts)  # the others' ranks would wait in a collective for the gloo/NCCL timeout
        say(**end)
    while "release" not in commands and "eof" not in commands:
        time.sleep(0.1)
    if "release" in commands:
        free(names, hosts)
    return 0


def watch(hosts: list, names: list[str], commands: list[str], folder: Path) -> dict | None:
    """Follow the run's actors until the run ends: {"rc": the first non-zero exit code of machine
    rank 0's worker, else 0 once every host's worker exited 0}, or {"lost": why} naming the node
    (a lost node or actor; another machine rank's worker exiting non-zero, with its log's tail).
    None when the sidecar went away (stdin closed)."""
    placed = [h.node.remote() for h in hosts]  # answers once the actor runs: it may wait for its resources
    node_ids: list[str] = []
    nodes: list[str] = []
    rcs: list[int | None] = [None] * len(hosts)
    killed = False
    while True:
        if "eof" in commands:
            return None
        if "kill" in commands and not killed:
            free(names, hosts)
            killed = True
        if "stop" in commands and node_ids:
            commands.remove("stop")
            hosts[0].stop.remote()
        if not node_ids:
            try:
                node_ids = ray.get(placed, timeout=1)
            except ray.exceptions.GetTimeoutError:
                continue
            except ray.exceptions.ActorUnavailableError:  # unreachable for now; dead would be ActorDiedError
                time.sleep(0.5)
                placed = [h.node.remote() for h in hosts]
                continue
            except ray.exceptions.RayActorError as err:
                return {"rc": -signal.SIGKILL} if killed else {
                    "lost": f"its Ray actor {names[0]} died before the worker started: {_first_line(err)}"}
            nodes = [node_name(n) for n in node_ids]
            say(node=", ".join(nodes))
            continue
        waits = {i: h.wait.remote(0.5) for i, h in enumerate(hosts) if rcs[i] is None}
        for i, ref in waits.items():
            try:
                rcs[i] = ray.get(ref, timeout=30)
            except (ray.exceptions.GetTimeoutError, ray.exceptions.ActorUnavailableError):
                # unreachable for now; dead would be ActorDiedError
                continue
            except ray.exceptions.RayActorError as err:
                if killed:
                    return {"rc": -signal.SIGKILL}
                if node_lost(node_ids[i]):
                    return {"lost": f"Ray node {nodes[i]} was lost during the run"}
                return {"lost": f"its Ray actor on node {nodes[i]} died: {_first_line(err)}"}
            if rcs[i] and not killed and i > 0:
                log = folder / f"worker-node{i}.log"
                return {"lost": f"the worker of machine rank {i} on Ray node {nodes[i]} exited with {rcs[i]}; "
                                f"{log.name} ends: {tail_text(log)}"}
            if rcs[i]:
                return {"rc": rcs[i]}
        if all(rc == 0 for rc in rcs):
            return {"rc": 0}


def _read_commands(commands: list[str]) -> None:
    for line in sys.stdin:
        commands.append(line.strip())
    commands.append("eof")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return (text.splitlines() or [type(err).__name__])[0][:300]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="py_trainer.workers.ray_bridge")
    ap.add_argument("command", choices=["probe", "run"])
    ap.add_argument("--address", required=True)
    ap.add_argument("--runs-root", type=Path, required=True)
    ap.add_argument("--run-id", default="")
    ap.add_argument("--attach", action="store_true")
    ap.add_argument("--nodes", type=int, default=1, help="the run's runtime.num_nodes: one actor on each")
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
