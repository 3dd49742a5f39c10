"""One run across nodes (issue 28, item 3), the parts that need no cluster: runtime.num_nodes and
its checks, accelerate's multi-node argv, the executors' refusals, and `py-trainer train
--machine-rank`'s flags (one line, exit 2). The real 2-node run is in test_ray_executor.py."""

from __future__ import annotations

import json
import os
import sys

import pytest
from google.protobuf import json_format

from _builders import small_request
from py_trainer.core import config
from py_trainer.core.errors import FailedPrecondition, InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb


def runtime(**kw) -> pb.RuntimeSettings:
    return pb.RuntimeSettings(**kw)


def field_of(ei) -> str:
    return str(ei.value).split(":", 1)[0]


# ---------------------------------------------------------------------------------------------
# accelerate's multi-node argv


def test_a_multi_node_argv_keeps_the_total_ranks_and_names_this_machine_and_the_main_one(tmp_path):
    from py_trainer.runs.launch import launch_argv

    argv = launch_argv(runtime(num_processes=4, num_nodes=2, device="cpu"), tmp_path, (1, "10.0.0.7", 29511))
    assert argv[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert {k: flags[k] for k in ("--num_processes", "--num_machines", "--machine_rank", "--main_process_ip",
                                  "--main_process_port")} == {
        "--num_processes": "4", "--num_machines": "2", "--machine_rank": "1", "--main_process_ip": "10.0.0.7",
        "--main_process_port": "29511"}
    assert argv[-2:] == ["-m", "py_trainer.workers.train_worker"]


def test_a_multi_node_argv_without_a_machine_has_placeholders_each_node_fills(tmp_path):
    from py_trainer.runs.launch import MACHINE_SETTINGS, fill_machine, launch_argv

    rt = runtime(num_processes=2, num_nodes=2)
    argv = launch_argv(rt, tmp_path)
    assert all(p in argv for p in MACHINE_SETTINGS)
    assert fill_machine(argv, 1, "10.0.0.7", 29511) == launch_argv(rt, tmp_path, (1, "10.0.0.7", 29511))


def test_one_node_keeps_one_machine_and_a_free_port(tmp_path):
    from py_trainer.runs.launch import launch_argv

    argv = launch_argv(runtime(num_processes=2, num_nodes=1), tmp_path)
    assert argv[argv.index("--num_machines") + 1] == "1"
    assert "--machine_rank" not in argv and "--main_process_ip" not in argv


# ---------------------------------------------------------------------------------------------
# Validation (config.check_launch, through check_runtime)


def test_num_nodes_defaults_to_one_and_is_echoed():
    rt = runtime()
    config.check_runtime(rt, training=True)
    assert rt.num_nodes == 1


@pytest.mark.parametrize("kw,training,field,text", [
    ({"num_processes": 3, "num_nodes": 2}, True, "runtime.num_processes", "give a multiple of 2"),
    ({"num_nodes": 2}, False, "runtime.num_nodes", "only training runs across nodes"),
    ({"num_nodes": 65}, True, "runtime.num_nodes", "must be in [1, 64]"),
])
def test_num_nodes_mistakes_are_invalid_argument_naming_the_field(kw, training, field, text):
    with pytest.raises(InvalidArgument) as ei:
        config.check_runtime(runtime(device="cpu", **kw), training=training)
    assert field_of(ei) == field and text in str(ei.value), str(ei.value)


def test_the_ranks_per_node_are_what_must_fit_this_machine():
    cores = os.cpu_count() or 1
    config.check_runtime(runtime(device="cpu", num_processes=2 * cores, num_nodes=2), training=True)
    with pytest.raises(FailedPrecondition) as ei:
        config.check_runtime(runtime(device="cpu", num_processes=2 * (cores + 1), num_nodes=2), training=True)
    assert field_of(ei) == "runtime.num_processes"
    assert f"{cores + 1} processes asked for on each of 2 nodes, this machine has {cores} CPU core(s)" in str(ei.value)


def test_workers_elsewhere_are_not_checked_against_this_machine():
    cores = os.cpu_count() or 1
    config.check_runtime(runtime(device="cpu", num_processes=4 * cores, num_nodes=2), training=True, this_machine=False)
    config.check_runtime(runtime(device="cuda"), training=True, this_machine=False)  # no CUDA here: the cluster's


# ---------------------------------------------------------------------------------------------
# The executors' checks


def test_the_local_executor_refuses_several_nodes_saying_what_to_use():
    from py_trainer.runs.local_executor import LocalExecutor

    req = pb.TrainRequest(runtime=runtime(num_processes=2, num_nodes=2))
    with pytest.raises(FailedPrecondition) as ei:
        LocalExecutor().check_request(req)
    assert field_of(ei) == "runtime.num_nodes"
    assert "--executor ray" in str(ei.value) and "docs/scale.md" in str(ei.value)
    LocalExecutor().check_request(pb.TrainRequest(runtime=runtime(num_processes=2, num_nodes=1)))


NODES = [{"node": "10.0.0.1 a", "cpus": 4, "gpus": 0}, {"node": "10.0.0.2 b", "cpus": 1, "gpus": 0}]


@pytest.mark.parametrize("kw,cpus_per_rank,field,text", [
    ({"num_processes": 3, "num_nodes": 3}, 1, "runtime.num_nodes", "3 nodes asked for, the Ray cluster has 2 alive"),
    ({"num_processes": 4, "num_nodes": 2}, 1, "runtime.num_processes",
     "2 rank(s) on each of 2 node(s) need 2 CPU(s) per node (--ray-cpus-per-rank 1); 1 of the Ray cluster's 2"),
    ({"num_processes": 2}, 3, "runtime.num_processes", "need 6 CPU(s) per node"),
    ({"device": "cuda"}, 1, "runtime.device", "no GPU"),
])
def test_the_ray_executor_refuses_what_the_clusters_nodes_cannot_hold(kw, cpus_per_rank, field, text):
    from py_trainer.runs.ray_executor import check_fits

    with pytest.raises(FailedPrecondition) as ei:
        check_fits(runtime(**kw), NODES, cpus_per_rank)
    assert field_of(ei) == field and text in str(ei.value), str(ei.value)


def test_the_ray_executor_takes_what_its_nodes_can_hold():
    from py_trainer.runs.ray_executor import check_fits

    check_fits(runtime(num_processes=2, num_nodes=2), NODES, 1)
    check_fits(runtime(num_processes=4, num_nodes=1), NODES, 1)
    check_fits(runtime(num_processes=4, num_nodes=2, device="cuda"),
               [{"node": n, "cpus": 8, "gpus": 2} for n in "ab"], 1)


# ---------------------------------------------------------------------------------------------
# py-trainer train --machine-rank (Slurm, no Ray)


def two_node_config(tmp_path, run_id="job-1"):
    req = small_request(run_id)
    req.runtime.num_processes, req.runtime.num_nodes, req.runtime.device = 2, 2, "cpu"
    path = tmp_path / "run.json"
    path.write_text(json.dumps(json_format.MessageToDict(req, preserving_proto_field_name=True)))
    return path


@pytest.mark.parametrize("flags,text", [
    (["--machine-rank", "2", "--main-process-ip", "10.0.0.7"], "--machine-rank: 2 must be in [0, 1] (runtime.num_nodes is 2)"),
    (["--machine-rank", "0"], "--main-process-ip: runtime.num_nodes is 2: give machine rank 0's address"),
    (["--main-process-ip", "10.0.0.7"], "--machine-rank: runtime.num_nodes is 2: give this node's machine rank"),
    (["--machine-rank", "1", "--main-process-ip", "10.0.0.7", "--run-id", ""], None),
])
def test_machine_flag_mistakes_are_one_line_exit_2_and_create_nothing(tmp_path, capsys, flags, text):
    from py_trainer.server.cli import main

    config_path = two_node_config(tmp_path, run_id="" if text is None else "job-1")
    runs = tmp_path / "runs"
    rc = main(["train", "--config", str(config_path), "--runs-root", str(runs), "--data-root", str(tmp_path), *flags])
    err = capsys.readouterr().err.strip()
    want = text or "--run-id: runtime.num_nodes is 2: every node must name the same run"
    assert rc == 2 and len(err.splitlines()) == 1 and want in err, err
    assert err.startswith("py-trainer train: ")
    assert not runs.exists()


def test_machine_flags_on_a_one_node_request_are_refused(tmp_path, capsys):
    from py_trainer.server.cli import main

    req = small_request("one")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(json_format.MessageToDict(req, preserving_proto_field_name=True)))
    rc = main(["train", "--config", str(path), "--runs-root", str(tmp_path / "runs"), "--data-root", str(tmp_path),
               "--machine-rank", "0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--machine-rank: only applies when runtime.num_nodes > 1" in err, err


def test_another_machine_waits_for_the_run_folder_and_checks_its_request(tmp_path):
    from py_trainer.runs.multinode import wait_for_run_folder
    from py_trainer.server.validate import validate_train_request

    req = small_request("job-1")
    req.runtime.num_processes, req.runtime.num_nodes = 2, 2
    eff = validate_train_request(req, tmp_path)
    folder = tmp_path / "runs" / "job-1"
    with pytest.raises(FailedPrecondition) as ei:
        wait_for_run_folder(folder, eff, wait_s=0.3)
    assert field_of(ei) == "--run-id" and "did not create" in str(ei.value)
    folder.mkdir(parents=True)
    other = pb.TrainRequest()
    other.CopyFrom(eff)
    other.grpo.seed += 1
    (folder / "request.json").write_text(json_format.MessageToJson(other, preserving_proto_field_name=True))
    with pytest.raises(FailedPrecondition) as ei:
        wait_for_run_folder(folder, eff, wait_s=0.3)
    assert "holds another request" in str(ei.value)
    (folder / "request.json").write_text(json_format.MessageToJson(eff, preserving_proto_field_name=True))
    wait_for_run_folder(folder, eff, wait_s=0.3)
