"""Slots on one machine (issue 28, item 1): `py-trainer serve --slots N` trains N runs at once.

The pool's arithmetic (slots per rank, the devices or threads a run gets, FIFO admission) is
checked without processes; one slow test trains two runs at once on a real 2-slot sidecar.
"""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from _builders import small_request
from _sidecar import running_sidecar, sidecar_env, stub_for, wait_for
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.slots import SlotPool


def test_a_run_takes_a_slot_per_rank_and_all_of_them_past_the_count():
    pool = SlotPool(3, gpus=[], cores=6)
    assert pool.take(2) == [0, 1]
    assert pool.take(2) is None  # one free: a 2-rank run waits
    assert pool.take(1) == [2]
    pool.give_back([0, 1])
    assert pool.take(5) is None  # 5 ranks take all 3 slots, and only 2 are free
    pool.give_back([2])
    assert pool.take(5) == [0, 1, 2]


def test_gpu_slots_get_their_devices_and_cpu_slots_their_share_of_threads():
    gpu = SlotPool(None, gpus=["2", "5"], cores=16)
    assert gpu.count == 2 and gpu.env([1], 1) == {"CUDA_VISIBLE_DEVICES": "5"}
    assert gpu.env([0, 1], 2) == {"CUDA_VISIBLE_DEVICES": "2,5"}
    cpu = SlotPool(2, gpus=[], cores=2)
    assert cpu.env([1], 1) == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert SlotPool(None, gpus=[], cores=8).count == 1  # CPU default: one slot, every core
    assert SlotPool(None, gpus=[], cores=8).env([0], 1)["OMP_NUM_THREADS"] == "8"
    assert SlotPool(2, gpus=[], cores=8).env([0], 2)["OMP_NUM_THREADS"] == "2"  # 4 cores over 2 ranks


def test_the_queue_admits_in_order_and_nothing_overtakes_a_head_waiting_for_slots(tmp_path):
    """A 2-rank run at the head of a 2-slot queue waits for both slots; the 1-rank run behind it
    waits too, although one slot is free."""
    from py_trainer.runs.registry import RunRegistry

    started: list[str] = []

    class Recording:
        name, keeps_running = "test", False

        async def start(self, runs_root, data_root): ...
        def default_slots(self): return None
        def uses_local_devices(self): return False
        def can_reattach(self, rec): return "no"
        def stop(self, rec): ...
        def kill(self, rec): ...
        def release(self, rec): ...
        async def close(self): ...

        async def run(self, rec, argv, env, on_line, *, cursor=0, reattach=False):
            started.append(rec.run_id)
            while not rec.cancel_requested:
                await asyncio.sleep(0.01)
            return 0

    async def main():
        reg = RunRegistry(tmp_path / "runs", tmp_path, slots=2, executor=Recording(),
                          worker_argv=[sys.executable, "-c", "pass"])
        await reg.start()
        reg.create(small_request("one"))
        wide = small_request("wide")
        wide.runtime.num_processes = 2
        reg.create(wide)
        reg.create(small_request("after"))
        await asyncio.sleep(0.2)
        assert started == ["one"] and reg.queue_position("wide") == 1 and reg.queue_position("after") == 2
        assert list(reg.run_proto("one").slots) == [0]
        await reg.cancel("one")
        await asyncio.sleep(0.2)
        assert started == ["one", "wide"] and list(reg.run_proto("wide").slots) == [0, 1]
        assert reg.run_proto("one").slots == [] and reg.queue_position("after") == 1
        await reg.cancel("wide")
        await asyncio.sleep(0.2)
        assert started == ["one", "wide", "after"]
        await reg.cancel("after")
        await asyncio.sleep(0.1)
        await reg.close(grace=1)

    asyncio.run(main())


@pytest.mark.slow
def test_two_runs_train_at_once_on_a_two_slot_sidecar(tmp_path, tiny_model_home):
    with running_sidecar(tmp_path, "--slots", "2", env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))) as sc:
        ch, stub = stub_for(sc)
        ends: dict[str, pb.RunEvent] = {}

        def train(run_id: str) -> None:
            ends[run_id] = [r.event for r in stub.Train(small_request(run_id, max_steps=3), timeout=600)][-1]

        threads = [threading.Thread(target=train, args=(r,)) for r in ("a", "b")]
        for t in threads:
            t.start()
        held = wait_for(lambda: (runs := stub.ListRuns(pb.ListRunsRequest(), timeout=10).runs)
                        and all(r.state == pb.RUN_STATE_RUNNING for r in runs) and len(runs) == 2 and runs, 120)
        for t in threads:
            t.join(600)
        runs = {r.run_id: r for r in stub.ListRuns(pb.ListRunsRequest(), timeout=10).runs}
        ch.close()
        sc.stop()
    assert sorted(tuple(r.slots) for r in held) == [(0,), (1,)]  # each held its own slot while running
    for run_id in ("a", "b"):
        assert ends[run_id].state_change.state == pb.RUN_STATE_SUCCEEDED, ends[run_id].state_change.reason
        assert runs[run_id].state == pb.RUN_STATE_SUCCEEDED and list(runs[run_id].slots) == []
    a, b = runs["a"], runs["b"]
    t = lambda ts: ts.ToNanoseconds()  # noqa: E731
    assert t(a.start_time) < t(b.end_time) and t(b.start_time) < t(a.end_time), "RUNNING intervals do not overlap"
    assert sc.log().count("(OMP_NUM_THREADS=1)") == 2, "each run gets half of the 2 cores"
