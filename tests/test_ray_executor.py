"""The Ray executor (issue 28, items 2 and 5): `py-trainer serve --executor ray` on a real two-node
Ray cluster on 127.0.0.1 (no mocks): a head and a second node started with `ray start`, one CPU
each, a small object store, no dashboard; both are stopped by the PIDs of their processes.

Each node has one CPU, so two runs at once take one node each, and a run of num_nodes 2 takes
one rank on each (item 3). Node loss is the worker node's processes killed (SIGKILL) mid-run; the
head's GCS is told to notice a dead node within ~2 s (that test runs last: it leaves one node).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from _builders import small_request
from _sidecar import TERMINAL, launch, sidecar_env, stub_for, wait_for, wait_state
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.launch import free_port

pytest.importorskip("ray")

RAY = str(Path(sys.executable).with_name("ray"))
# Small and quiet: the object store at Ray's floor, no dashboard, no usage report; a dead node is
# noticed after two failed health checks 0.5 s apart (Ray's default takes ~30 s).
NODE_ARGS = ["--num-cpus", "1", "--object-store-memory", str(78643200), "--disable-usage-stats",
             "--node-ip-address", "127.0.0.1"]
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_health_check_initial_delay_ms": "0",
           "RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
           "RAY_health_check_failure_threshold": "2"}


def node_pids(temp_dir: Path) -> list[int]:
    """Every process of the Ray node whose temp dir is `temp_dir` (its daemons and their children)."""
    parents: dict[int, int] = {}
    own: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if str(temp_dir).encode() in cmd:
            own.add(int(entry.name))
    grown = True
    while grown:
        kids = {p for p, pp in parents.items() if pp in own} - own
        grown = bool(kids)
        own |= kids
    return sorted(own)


def node_id(temp_dir: Path) -> str:
    """The node id its raylet was started with."""
    for pid in node_pids(temp_dir):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for a in args:
            if a.startswith(b"--node_id="):
                return a.split(b"=", 1)[1].decode()
    raise AssertionError(f"no raylet under {temp_dir}")


def kill_node(temp_dir: Path, sig: int = signal.SIGKILL) -> None:
    for pid in node_pids(temp_dir):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class Cluster:
    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.head, self.worker = root / "head", root / "worker"
        self.env = dict(sidecar_env(), **RAY_ENV)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_head(self, tries: int = 3) -> None:
        """`ray start --head`; a start that fails (a port free_port picked and another process took,
        a GCS that did not come up in time) is stopped and tried again on a fresh port; the last
        failure's output is in the error (it named the socket path that was too long, see `cluster`)."""
        for attempt in range(1, tries + 1):
            r = subprocess.run([RAY, "start", "--head", "--port", str(self.port), "--include-dashboard=false",
                                "--temp-dir", str(self.head), *NODE_ARGS], env=self.env, capture_output=True, text=True)
            if r.returncode == 0:
                return
            kill_node(self.head)
            if attempt == tries:
                raise RuntimeError(f"ray start --head failed {tries} times; the last said:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
            self.port = free_port()

    def start_worker(self) -> None:
        subprocess.run([RAY, "start", "--address", self.address, "--temp-dir", str(self.worker), *NODE_ARGS],
                       env=self.env, check=True, capture_output=True)

    def stop(self) -> None:
        for temp in (self.worker, self.head):
            kill_node(temp, signal.SIGTERM)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and (node_pids(self.worker) or node_pids(self.head)):
            time.sleep(0.2)
        for temp in (self.worker, self.head):
            kill_node(temp)
        for pid in client_server_pids(self.port):  # a daemon whose command line does not name the temp dir
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def client_server_pids(gcs_port: int) -> list[int]:
    """The head's Ray client server (`ray.util.client.server --address=IP:<gcs port>`): it runs
    detached from the node's processes, so `node_pids` does not find it, and it outlived the test."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"ray.util.client.server" in cmd and f":{gcs_port}\0".encode() in cmd.replace(b" ", b"\0") + b"\0":
            found.append(int(entry.name))
    return found


def test_the_event_tail_hands_on_complete_lines_and_skips_those_the_log_already_holds(tmp_path):
    from py_trainer.runs.ray_executor import EventTail

    path, got = tmp_path / "worker-events.jsonl", []
    tail = EventTail(path, skip=2)
    tail.pump(got.append)  # no file yet
    path.write_bytes(b'{"train_step": 1}\n{"warning": 2}\n{"train_step": 3}\n{"train_st')
    tail.pump(got.append)
    with open(path, "ab") as f:
        f.write(b'ep": 4}\n{"state_change": 5}\n')
    tail.pump(got.append)
    assert got == [b'{"train_step": 3}\n', b'{"train_step": 4}\n', b'{"state_change": 5}\n']


@pytest.mark.slow
def test_stopping_the_sidecar_waits_for_a_released_bridge_to_free_the_runs_actors(tmp_path):
    """A run's end is recorded, its bridge is told to release (kill the detached actors, remove the
    placement group) and the sidecar stops at once: the bridge dies with its parent (PDEATHSIG), so
    close() must wait for it, or the actors hold their CPUs on the cluster for good. CI saw that:
    a two-node run's placement group outlived its sidecar and the next test's runs were never placed."""
    import asyncio
    from types import SimpleNamespace

    from py_trainer.runs.ray_executor import MARKER_FILE, RayExecutor

    freed = tmp_path / "freed"

    async def scenario():
        ex = RayExecutor("127.0.0.1:1")
        # a stand-in for the bridge: it reads its commands to the end, then takes a moment to free
        bridge = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import sys, time; cmds = sys.stdin.read().split(); time.sleep(1.0); "
                                  f"open({str(freed)!r}, 'w').write(' '.join(cmds))",
            stdin=asyncio.subprocess.PIPE)
        rec = SimpleNamespace(run_id="r", folder=tmp_path, process=bridge, launched=False, cancel_requested=False)
        (tmp_path / MARKER_FILE).write_text("{}")
        ex.bridges["r"] = bridge
        ex.release(rec)
        await ex.close()
        return bridge.returncode

    assert asyncio.run(scenario()) == 0
    assert freed.read_text() == "release"


def test_serve_with_the_ray_executor_and_no_address_is_one_line_and_exit_2(capsys, monkeypatch):
    from py_trainer.server.cli import main

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert main(["serve", "--executor", "ray", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "py-trainer serve: --executor ray needs --ray-address HOST:PORT (or $RAY_ADDRESS)"


def test_serve_with_no_ray_cluster_at_the_address_is_one_line_and_exit_2_at_once(capsys, monkeypatch):
    """Issue 45 item 4: it waited for the probe's 180 s timeout, silent; now a TCP connect first."""
    import socket
    import time

    from py_trainer.server import servicer as server
    from py_trainer.server.cli import main

    def started(*args, **kwargs):
        raise AssertionError("serve started: the address was not checked first")

    monkeypatch.setattr(server, "serve", started)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"  # nothing listens once it is closed
    t0 = time.monotonic()
    assert main(["serve", "--executor", "ray", "--ray-address", address, "--port", "0"]) == 2
    assert time.monotonic() - t0 < 10
    assert capsys.readouterr().err.strip() == (
        f"py-trainer serve: --ray-address: no Ray cluster answers at {address} (Connection refused): start one "
        f"(ray start --head) or check the address")


@pytest.fixture(scope="module")
def cluster():
    # A short temp dir of its own, not tmp_path_factory's: Ray puts its Unix sockets under
    # <temp dir>/session_<date>_<time>_<pid>/sockets/, and an AF_UNIX path cannot exceed 107 bytes.
    # Under pytest-xdist (make test) the factory's dirs are /tmp/pytest-of-<user>/pytest-<n>/popen-gw<k>/
    # ray0/head/: 111 bytes with the socket's name, and every `ray start --head` failed.
    root = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    c = Cluster(root)
    try:
        c.start_head()
        c.start_worker()
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


def ray_sidecar(tmp_path: Path, cluster: Cluster, home: Path, runs: Path | None = None):
    return launch(runs or tmp_path / "runs", tmp_path, "--executor", "ray", "--ray-address", cluster.address,
                  env=sidecar_env(PY_TRAINER_HOME=str(home)), timeout=120)


def free_cpus(cluster: Cluster) -> float:
    """The cluster's CPUs no actor or placement group holds, as a Ray driver of its own sees them."""
    code = ("import json, logging, ray; ray.init(address=%r, log_to_driver=False, logging_level=logging.ERROR); "
            "print(json.dumps(ray.available_resources().get('CPU', 0)))" % cluster.address)
    out = subprocess.run([sys.executable, "-c", code], env=cluster.env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return float(out.stdout.strip().splitlines()[-1])


def running_on_nodes(stub, run_ids) -> dict[str, pb.Run]:
    """The runs, once all are RUNNING and placed on a node."""
    def placed():
        runs = {r: stub.GetRun(pb.GetRunRequest(run_id=r), timeout=10).run for r in run_ids}
        ended = [r for r in runs.values() if r.state in TERMINAL]
        assert not ended, f"{ended[0].run_id} ended before it was seen placed: {ended[0].reason}"
        return all(r.state == pb.RUN_STATE_RUNNING and r.node for r in runs.values()) and runs
    return wait_for(placed, 120)


@pytest.mark.slow
def test_two_runs_at_once_train_on_the_cluster_and_a_restarted_sidecar_reattaches(tmp_path, cluster, tiny_model_home):
    sc = ray_sidecar(tmp_path, cluster, tiny_model_home)
    try:
        ch, stub = stub_for(sc)
        for run_id in ("a", "b"):
            next(stub.Train(small_request(run_id, max_steps=3), timeout=60))  # QUEUED: the stream may go
        placed = running_on_nodes(stub, ("a", "b"))
        assert {r.node.split()[1] for r in placed.values()} == {node_id(cluster.head), node_id(cluster.worker)}
        ch.close()
        assert sc.stop() == 0  # SIGTERM: the workers run on
        sc = ray_sidecar(tmp_path, cluster, tiny_model_home)
        ch, stub = stub_for(sc)
        ends = {r: wait_state(stub, r, TERMINAL, 240)
                for r in ("a", "b")}
        events = {r: [w.event for w in stub.WatchRun(pb.WatchRunRequest(run_id=r), timeout=30)] for r in ("a", "b")}
        ch.close()
    finally:
        sc.stop()
    for run_id, run in ends.items():
        assert run.state == pb.RUN_STATE_SUCCEEDED, run.reason
        assert (tmp_path / "runs" / run_id / "adapter" / "adapter_model.safetensors").is_file()
        steps = [e.train_step.step for e in events[run_id] if e.HasField("train_step")]
        assert steps == sorted(set(steps)) and steps[-1] == 3, f"{run_id}: each step once, in order: {steps}"
    assert sc.log().count("reattaching to its Ray worker") == 2


@pytest.mark.slow
def test_a_two_node_run_one_rank_per_node_trains_and_returns_one_adapter(tmp_path, cluster, tiny_model_home,
                                                                         tiny_model_dir):
    """Issue 28 item 3: num_nodes 2, num_processes 2 on the 2-node cluster (one CPU each): a
    placement group puts one launcher on each node, the two ranks meet over gloo; rank 0 alone
    reports; one adapter comes back. Before the cluster's other test kills its worker node."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    req = small_request("spread", max_steps=2)
    req.runtime.num_processes, req.runtime.num_nodes, req.runtime.device = 2, 2, "cpu"
    sc = ray_sidecar(tmp_path, cluster, tiny_model_home)
    try:
        ch, stub = stub_for(sc)
        next(stub.Train(req, timeout=60))
        placed = running_on_nodes(stub, ("spread",))["spread"]
        end = wait_state(stub, "spread", TERMINAL, 300)
        events = [w.event for w in stub.WatchRun(pb.WatchRunRequest(run_id="spread"), timeout=30)]
        ch.close()
    finally:
        sc.stop()
    assert end.state == pb.RUN_STATE_SUCCEEDED, end.reason
    # the sidecar stopped right after the run's end: its actors and placement group were freed
    assert wait_for(lambda: free_cpus(cluster) == 2, 30, every=1)
    assert sorted(n.split()[1] for n in placed.node.split(", ")) == sorted([node_id(cluster.head),
                                                                            node_id(cluster.worker)]), placed.node
    folder = tmp_path / "runs" / "spread"
    machine0, machine1 = (folder / "worker.log").read_text(), (folder / "worker-node1.log").read_text()
    assert "rank 0/2 finished step 2" in machine0 and "rank 1/2" not in machine0, machine0[-3000:]
    assert "rank 1/2 finished step 2" in machine1 and "rank 0/2" not in machine1, machine1[-3000:]
    # rank 0 alone reports: each step once, gap-free seqs, one adapter, one summary of 2 ranks
    assert [e.train_step.step for e in events if e.HasField("train_step")] == [1, 2]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert json.loads((folder / "summary.json").read_text())["world_size"] == 2
    assert not list(folder.glob(".adapter.*"))
    # the adapter loads with PEFT and moves the model off its base
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ids = torch.tensor([[1, 5, 9, 13, 17, 21]])
    with torch.no_grad():
        before = base(ids).logits
        after = PeftModel.from_pretrained(base, folder / "adapter")(ids).logits
    assert (after - before).abs().max().item() > 1e-6


@pytest.mark.slow
def test_a_lost_node_fails_its_run_naming_it_and_resume_finishes_it_on_the_node_left(tmp_path, cluster,
                                                                                       tiny_model_home):
    from py_trainer.runs.artifacts import latest_checkpoint

    lost = node_id(cluster.worker)
    sc = ray_sidecar(tmp_path, cluster, tiny_model_home)
    try:
        ch, stub = stub_for(sc)
        for run_id in ("c", "d"):
            next(stub.Train(small_request(run_id, max_steps=4), timeout=60))
        placed = running_on_nodes(stub, ("c", "d"))
        victim = next(r.run_id for r in placed.values() if r.node.split()[1] == lost)
        survivor = next(r for r in placed if r != victim)
        wait_for(lambda: latest_checkpoint(tmp_path / "runs" / victim), 120, every=0.05)
        kill_node(cluster.worker)
        failed = wait_state(stub, victim, TERMINAL, 60)
        stub.ResumeRun(pb.ResumeRunRequest(run_id=victim), timeout=30)
        resumed_on = running_on_nodes(stub, (victim,))[victim].node
        resumed = wait_state(stub, victim, TERMINAL, 240)
        other = wait_state(stub, survivor, TERMINAL, 240)
        ch.close()
    finally:
        sc.stop()
    assert failed.state == pb.RUN_STATE_FAILED, failed.reason
    assert re.fullmatch(rf"Ray node \S+ {lost} was lost during the run; last checkpoint kept at checkpoints/checkpoint-\d+",
                        failed.reason), failed.reason
    assert resumed_on.split()[1] == node_id(cluster.head)
    assert resumed.state == pb.RUN_STATE_SUCCEEDED, resumed.reason
    assert other.state == pb.RUN_STATE_SUCCEEDED, other.reason
    assert "resumed from" in (tmp_path / "runs" / victim / "events.jsonl").read_text()
