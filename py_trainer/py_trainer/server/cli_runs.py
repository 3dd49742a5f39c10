"""`py-trainer serve | train | evaluate`: the commands that run jobs on a runs root (the gRPC
sidecar, or one training or evaluation request with no server)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from py_trainer.server.cli_args import UsageError, add_roots, int_in, non_negative_float


def _executor(args: argparse.Namespace):
    """The executor `serve` runs workers with: None = local child processes."""
    if args.executor == "local":
        return None
    from py_trainer.runs.ray_executor import RayExecutor, unreachable
    if not args.ray_address:
        raise UsageError("py-trainer serve: --executor ray needs --ray-address HOST:PORT (or $RAY_ADDRESS)")
    if why := unreachable(args.ray_address):
        raise UsageError(f"py-trainer serve: {why}")
    return RayExecutor(args.ray_address, cpus_per_rank=args.ray_cpus_per_rank)


def _tool_host_name(text: str) -> str:
    """--allow-tool-host: a host name or IP address, no port."""
    from py_trainer.agents.spec import is_host

    if not is_host(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a host name or IP address (give the host alone, no port)")
    return text


def _cmd_serve(args: argparse.Namespace) -> int:
    from py_trainer.server.servicer import InsecureBindError, serve

    def ready(port: int) -> None:
        # Tests and scripts start with --port 0 and read the real port from this line.
        print(f"py-trainer listening on {args.host}:{port}", flush=True)

    try:
        asyncio.run(serve(args.host, args.port, args.runs_root, args.data_root,
                          token=args.token or os.environ.get("PY_TRAINER_TOKEN", ""),
                          tls_cert=args.tls_cert, tls_key=args.tls_key, max_queue=args.max_queue,
                          grace_s=args.grace, ready=ready, slots=args.slots, executor=_executor(args),
                          tool_hosts=args.allow_tool_host))
    except InsecureBindError as err:
        print(f"py-trainer serve: {err}", file=sys.stderr)
        return 2
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from py_trainer.server.standalone import train_from_config

    return train_from_config(args.config, args.runs_root, args.data_root, run_id=args.run_id,
                             machine_rank=args.machine_rank, main_process_ip=args.main_process_ip,
                             main_process_port=args.main_process_port)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from py_trainer.server.standalone import evaluate_from_config

    return evaluate_from_config(args.config, args.out, args.runs_root, args.data_root)


def add_serve_command(sub) -> None:
    """`serve`: the gRPC sidecar's bind, auth, queue and executor flags."""
    p = sub.add_parser("serve", help="run the gRPC sidecar")
    p.add_argument("--host", default="127.0.0.1", help="bind address; non-loopback needs --token or TLS")
    p.add_argument("--port", type=int_in(0, 65535), default=50151, help="0 = pick a free port (printed on start)")
    add_roots(p)
    p.add_argument("--token", default="", help="require 'authorization: Bearer TOKEN' (or $PY_TRAINER_TOKEN)")
    p.add_argument("--tls-cert", type=Path, help="PEM certificate chain for TLS")
    p.add_argument("--tls-key", type=Path, help="PEM private key for TLS")
    p.add_argument("--max-queue", type=int_in(0), default=8, help="runs that may wait for the device")
    p.add_argument("--grace", type=non_negative_float, default=5.0, help="seconds in-flight RPCs get on shutdown")
    p.add_argument("--slots", type=int_in(1), default=None,
                   help="runs that train at once; a run takes one slot per rank (default: one per visible GPU, "
                        "1 on CPU; with --executor ray: the cluster's GPUs, else its CPUs / --ray-cpus-per-rank)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="where run workers train: child processes here (local), or a Ray cluster (ray; "
                        "the runs root must be mounted at the same path on every node, docs/scale.md)")
    p.add_argument("--ray-address", default=os.environ.get("RAY_ADDRESS", ""),
                   help="the Ray cluster's head, HOST:PORT (default: $RAY_ADDRESS); --executor ray only")
    p.add_argument("--ray-cpus-per-rank", type=int_in(1), default=1,
                   help="CPUs each rank of a run takes on the cluster (its OMP_NUM_THREADS); --executor ray only")
    p.add_argument("--allow-tool-host", metavar="HOST", type=_tool_host_name, action="append", default=[],
                   help="a host an agent task's tool_host may name besides loopback and the caller's own address "
                        "(the sidecar connects there to call the tools); repeatable")
    p.set_defaults(func=_cmd_serve)


def add_train_command(sub) -> None:
    """`train`: one TrainRequest file, one node of a multi-node run."""
    p = sub.add_parser("train", help="run one training request from a YAML/JSON file, no server")
    p.add_argument("--config", type=Path, required=True, help="TrainRequest as YAML or JSON (proto field names)")
    p.add_argument("--run-id", default="", help="overrides run_id in the config")
    p.add_argument("--machine-rank", type=int_in(0), default=None,
                   help="runtime.num_nodes > 1: this node's machine rank (Slurm: $SLURM_NODEID); run once per node")
    p.add_argument("--main-process-ip", default="",
                   help="runtime.num_nodes > 1: machine rank 0's address (Slurm: the job's first host)")
    p.add_argument("--main-process-port", type=int_in(1, 65535), default=29500,
                   help="runtime.num_nodes > 1: the ranks' rendezvous port on machine rank 0 (default: 29500)")
    add_roots(p)
    p.set_defaults(func=_cmd_train)


def add_evaluate_command(sub) -> None:
    """`evaluate`: one EvaluateRequest file."""
    p = sub.add_parser("evaluate", help="evaluate base vs adapters from an EvaluateRequest file, no server")
    p.add_argument("--config", type=Path, required=True, help="EvaluateRequest as YAML or JSON (proto field names)")
    p.add_argument("--out", type=Path, help="write the EvaluateResult as JSON here")
    add_roots(p)
    p.set_defaults(func=_cmd_evaluate)
