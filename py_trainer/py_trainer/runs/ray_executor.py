"""The Ray executor (`py-trainer serve --executor ray --ray-address ADDR`): each run's worker on a
Ray cluster, with the run folders on a runs root every node mounts at the same path.

The sidecar never imports ray (a Ray driver inside its grpc.aio event loop made it stop answering
RPCs and ignore SIGTERM): each run gets a child process, `ray_bridge.py`, that is the Ray driver.
The bridge places a detached actor with the run's resources (``cpus_per_rank`` CPUs per rank, and
one GPU per rank when the run's device is cuda, or auto on a cluster with GPUs); the actor runs the
same worker command as the local executor on its node. What the sidecar sees:

- events: the worker's lines, appended to the run folder's ``worker-events.jsonl`` on the node,
  tailed here and handed to the registry as a local worker's socket lines are;
- cancel: the run folder's cancel file (every rank checks it) plus SIGUSR1 through the actor for a
  single worker; kill: the actor is killed, and its worker with it;
- the end: the worker's exit code, or `WorkerLost` naming the node when the node (or the actor)
  died: the run FAILS and ResumeRun continues it from its last checkpoint on any node left;
- a sidecar that stops leaves the actors running (`keeps_running`); the next one on the same runs
  root reattaches to each RUNNING run (``ray-worker.json`` marks a run placed by this executor),
  skipping the event lines its log already holds, or fails it with the reason.

At start, `start` has a task on every alive node write a probe file into the runs root and reads
each back here: a node that does not share the runs root refuses the start, naming the path. The
probe also lists each alive node's CPUs and GPUs: a Train the cluster cannot hold (more nodes
than it has, ranks per node no node can hold, cuda without a GPU) is refused up front naming the
field (`check_fits`), instead of waiting for resources that never come.

A run with ``runtime.num_nodes`` > 1 spans that many nodes: the bridge places one actor per node
in a placement group, each running ``accelerate launch`` with its machine rank (ray_bridge.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
from pathlib import Path

from py_trainer.core.atomic import write_json_atomic
from py_trainer.core.errors import FailedPrecondition
from py_trainer.runs.launch import ask_to_stop
from py_trainer.runs.local_executor import ExecutorUnavailable, OnLine, WorkerLost
from py_trainer.runs.run_folder import tail_text

log = logging.getLogger(__name__)

BRIDGE = [sys.executable, "-m", "py_trainer.workers.ray_bridge"]
EVENTS_FILE = "worker-events.jsonl"
"""The worker's event lines, in the run folder (ray_bridge.EVENTS_FILE)."""
MARKER_FILE = "ray-worker.json"
"""In the run folder while its worker is on the cluster: the next sidecar reattaches to it."""
RELEASE_WAIT_S = 15.0
"""How long a stopping sidecar waits for its bridges to end (a release frees actors over Ray)."""
BRIDGE_LOG = "ray-bridge.log"
FORWARDED_PREFIXES = ("PY_TRAINER_", "HF_", "TRANSFORMERS_")
PROBE_TIMEOUT_S = 180.0
REACH_TIMEOUT_S = 5.0
"""How long `serve` waits for a TCP connect to --ray-address before the probe (which waits 180 s)."""
TAIL_EVERY_S = 0.25


def unreachable(address: str, timeout: float = REACH_TIMEOUT_S) -> str:
    """Why nothing answers at a Ray address's HOST:PORT (one TCP connect, no Ray imported), as the
    line `serve` prints; "" when something does, or when the address names no port ("auto")."""
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not port.isdigit():
        return ""
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout).close()
    except OSError as err:
        why = err.strerror or str(err) or type(err).__name__
        return f"--ray-address: no Ray cluster answers at {address} ({why}): start one (ray start --head) or check the address"
    return ""


class EventTail:
    """The complete lines appended to a file since the last call; the first `skip` event lines
    that are not state changes (already in the run's log) are not handed on."""

    def __init__(self, path: Path, skip: int = 0):
        self.path, self.skip, self.offset = path, skip, 0

    def pump(self, on_line: OnLine) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines(keepends=True):
            if self.skip and b'"state_change"' not in line:
                self.skip -= 1
                continue
            on_line(line)


class RayExecutor:
    """Workers as detached Ray actors on a cluster, each driven by a bridge process."""

    name = "ray"
    keeps_running = True

    def __init__(self, address: str, *, cpus_per_rank: int = 1):
        self.address = address
        self.cpus_per_rank = cpus_per_rank
        self.runs_root = Path()
        self.cpus = self.gpus = 0
        self.nodes: list[dict] = []
        """The alive nodes at start, each {"node", "cpus", "gpus"} (`check_fits`)."""
        self.bridges: dict[str, asyncio.subprocess.Process] = {}
        self.releasing: list[asyncio.subprocess.Process] = []
        """Bridges told to release (free the run's actors and placement group), not yet exited."""

    async def start(self, runs_root: Path, data_root: Path) -> None:
        """Check that every alive node writes into the runs root and that the files read back here."""
        self.runs_root = Path(runs_root).resolve()
        proc = await asyncio.create_subprocess_exec(
            *BRIDGE, "probe", "--address", self.address, "--runs-root", str(self.runs_root),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), PROBE_TIMEOUT_S)
        except asyncio.TimeoutError:
            proc.kill()
            raise ExecutorUnavailable(f"--executor ray: the probe of the cluster at {self.address} did not answer "
                                      f"in {PROBE_TIMEOUT_S:.0f} s") from None
        answer = _last_json(out)
        if answer is None or "error" in answer:
            why = answer["error"] if answer else f"the probe exited with {proc.returncode}: {_tail(err)}"
            raise ExecutorUnavailable(f"--executor ray: {why}")
        for p in answer["probes"]:
            path = Path(p["path"])
            try:
                got = path.read_text()
            except OSError:
                got = None
            path.unlink(missing_ok=True)
            if got != p["token"]:
                seen = "did not appear here" if got is None else "reads back other bytes here"
                raise ExecutorUnavailable(
                    f"--executor ray: the runs root {self.runs_root} is not shared with Ray node {p['node']}: the "
                    f"probe file it wrote, {path}, {seen}; every node must mount the runs root at the same path")
        self.cpus, self.gpus, self.nodes = answer["cpus"], answer["gpus"], answer["nodes"]

    def default_slots(self) -> int | None:
        """One slot per GPU of the cluster, else one per `cpus_per_rank` of its CPUs."""
        return self.gpus or max(1, self.cpus // self.cpus_per_rank)

    def uses_local_devices(self) -> bool:
        return False

    def check_request(self, req) -> None:
        """What the cluster cannot hold, refused at Train naming the field (`check_fits`)."""
        check_fits(req.runtime, self.nodes, self.cpus_per_rank)

    def can_reattach(self, rec) -> str:
        if (rec.folder / MARKER_FILE).is_file():
            return ""
        return "it was not placed on the Ray cluster"

    def resources(self, rec) -> tuple[int, int, int]:
        """(CPUs, GPUs) each node's actor asks for, and the number of nodes (one actor on each)."""
        rt = rec.request.runtime
        nodes = max(1, rt.num_nodes)
        ranks = max(1, rt.num_processes) // nodes
        return ranks * self.cpus_per_rank, ranks if on_gpu(rt, self.gpus) else 0, nodes

    async def run(self, rec, argv: list[str], env: dict[str, str], on_line: OnLine, *, cursor: int = 0,
                  reattach: bool = False) -> int:
        """Run the worker on the cluster to its end; every event line to `on_line`; its exit code.
        WorkerLost when its node or actor died (or, reattaching, is gone)."""
        events = rec.folder / EVENTS_FILE
        cpus, gpus, nodes = self.resources(rec)
        command = [*BRIDGE, "run", "--address", self.address, "--runs-root", str(self.runs_root), "--run-id", rec.run_id,
                   "--nodes", str(nodes)]
        if reattach:
            log.info("run %s: reattaching to its Ray worker", rec.run_id)
            command.append("--attach")
        else:
            events.unlink(missing_ok=True)
            write_json_atomic(rec.folder / MARKER_FILE, {"address": self.address, "runs_root": str(self.runs_root)})
        threads = str(self.cpus_per_rank)
        spec = {"argv": argv, "env": {**forwarded_env(), **env, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads},
                "cwd": os.getcwd(), "cpus": cpus, "gpus": gpus, "nodes": nodes, "events_file": str(events),
                "log_file": str(rec.folder / "worker.log")}
        with open(rec.folder / BRIDGE_LOG, "ab") as bridge_log:
            bridge = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=bridge_log)
        rec.process = self.bridges[rec.run_id] = bridge
        if not reattach:
            self._send(rec, json.dumps(spec))
        if rec.cancel_requested:
            self.stop(rec)
        tail = EventTail(events, skip=cursor)
        end = None
        while end is None:
            try:
                line = await asyncio.wait_for(bridge.stdout.readline(), TAIL_EVERY_S)
            except asyncio.TimeoutError:
                tail.pump(on_line)
                continue
            if not line:
                break
            msg = _json_object(line)
            if msg is None:  # not one of ours (a library's print)
                continue
            if "node" in msg:
                rec.node = msg["node"]
            else:
                end = msg
        await asyncio.sleep(TAIL_EVERY_S)
        tail.pump(on_line)
        if end is None:
            rc = await bridge.wait()
            raise WorkerLost(f"the Ray bridge exited with {rc} before the worker ended; {BRIDGE_LOG} ends: "
                             f"{tail_text(rec.folder / BRIDGE_LOG)}")
        if "rc" in end:
            return int(end["rc"])
        why = end.get("lost") or end.get("gone") or end.get("error")
        raise WorkerLost(f"sidecar restarted; {why}" if reattach else why)

    def _send(self, rec, command: str) -> None:
        bridge = self.bridges.get(rec.run_id)
        if bridge is not None and bridge.returncode is None and not bridge.stdin.is_closing():
            bridge.stdin.write(command.encode() + b"\n")

    def stop(self, rec) -> None:
        """Ask the worker to stop after its current step: the cancel file on the shared runs root
        (every rank checks it) and, for a single worker, SIGUSR1 on its node."""
        ask_to_stop(rec.folder, None, launched=True)
        if not rec.launched:
            self._send(rec, "stop")

    def kill(self, rec) -> None:
        self._send(rec, "kill")

    def release(self, rec) -> None:
        """The run's end is recorded: free its actor, forget its bridge."""
        self._send(rec, "release")
        bridge = self.bridges.pop(rec.run_id, None)
        if bridge is not None and bridge.returncode is None:
            bridge.stdin.close()
            self.releasing = [b for b in self.releasing if b.returncode is None] + [bridge]
        (rec.folder / MARKER_FILE).unlink(missing_ok=True)

    async def close(self) -> None:
        """End the bridges of running runs; their actors (and workers) run on for the next sidecar.
        A released bridge is waited for: it dies with this process (PDEATHSIG), and a detached
        actor or placement group it had not freed yet would hold its CPUs on the cluster for good."""
        running = [b for b in self.bridges.values() if b.returncode is None]
        for bridge in running:
            bridge.send_signal(signal.SIGTERM)
        ending = running + [b for b in self.releasing if b.returncode is None]
        if ending:
            await asyncio.wait([asyncio.ensure_future(b.wait()) for b in ending], timeout=RELEASE_WAIT_S)


def on_gpu(rt, cluster_gpus: int) -> bool:
    """Whether a run's ranks take a GPU each: device cuda, or auto on a cluster with GPUs."""
    return rt.device == "cuda" or (rt.device in ("", "auto") and cluster_gpus > 0)


def check_fits(rt, nodes: list[dict], cpus_per_rank: int) -> None:
    """FailedPrecondition naming the field when the cluster's alive nodes (`nodes`: each
    {"node", "cpus", "gpus"}, as the start-up probe saw them) cannot hold the run: cuda on a
    cluster with no GPU, more nodes than it has, or ranks per node (num_processes / num_nodes)
    that fewer than num_nodes of its nodes can hold (cpus_per_rank CPUs, and a GPU on GPU, each)."""
    want = max(1, rt.num_nodes)
    per_node = max(1, rt.num_processes) // want
    gpus = sum(n["gpus"] for n in nodes)
    if rt.device == "cuda" and not gpus:
        raise FailedPrecondition("runtime.device", f"cuda requested but the Ray cluster's {len(nodes)} node(s) "
                                                   "have no GPU")
    if want > len(nodes):
        raise FailedPrecondition("runtime.num_nodes", f"{want} nodes asked for, the Ray cluster has {len(nodes)} "
                                                      "alive node(s)")
    need_cpus, need_gpus = per_node * cpus_per_rank, per_node if on_gpu(rt, gpus) else 0
    fit = sum(1 for n in nodes if n["cpus"] >= need_cpus and n["gpus"] >= need_gpus)
    if fit < want:
        need = f"{need_cpus} CPU(s)" + (f" and {need_gpus} GPU(s)" if need_gpus else "")
        largest = max(nodes, key=lambda n: (n["gpus"], n["cpus"]), default=None)
        have = f" (the largest: {largest['cpus']} CPU(s), {largest['gpus']} GPU(s))" if largest else ""
        raise FailedPrecondition("runtime.num_processes",
                                 f"{per_node} rank(s) on each of {want} node(s) need {need} per node (--ray-cpus-per-rank "
                                 f"{cpus_per_rank}); {fit} of the Ray cluster's {len(nodes)} node(s) have that{have}")


def forwarded_env() -> dict[str, str]:
    """The sidecar's settings a worker on another node needs (the model cache, offline mode): its
    PY_TRAINER_*, HF_* and TRANSFORMERS_* variables. The rest (PATH, devices) is the node's own."""
    return {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIXES)}


def _json_object(line: bytes) -> dict | None:
    try:
        got = json.loads(line)
    except ValueError:
        return None
    return got if isinstance(got, dict) else None


def _last_json(out: bytes) -> dict | None:
    return next((got for line in reversed(out.splitlines()) if (got := _json_object(line)) is not None), None)


def _tail(err: bytes) -> str:
    return " | ".join(err.decode(errors="replace").strip().splitlines()[-4:])[:600]
