"""The sidecar as standard gRPC tooling sees it: health, reflection, status codes, shutdown, auth."""

from __future__ import annotations

import signal
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from _sidecar import REPO, running_sidecar, sidecar_env
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow  # real sidecar processes


def test_health_reflection_and_not_found(tmp_path):
    with running_sidecar(tmp_path) as sc:
        with grpc.insecure_channel(sc.address) as ch:
            health = health_pb2_grpc.HealthStub(ch)
            for service in ("", "grpo.trainer.v1.TrainerService"):
                res = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
                assert res.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as ei:
                health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
            assert ei.value.code() == grpc.StatusCode.NOT_FOUND

            db = ProtoReflectionDescriptorDatabase(ch)
            services = set(db.get_services())
            assert {"grpo.trainer.v1.TrainerService", "grpc.health.v1.Health"} <= services
            fd = db.FindFileContainingSymbol("grpo.trainer.v1.TrainerService")
            assert fd.name == "grpo/trainer/v1/trainer_service.proto"
            methods = {m.name for m in fd.service[0].method}
            assert {"Train", "WatchRun", "GetRun", "ListRuns", "CancelRun", "DownloadArtifact",
                    "Evaluate"} <= methods

            stub = pb_grpc.TrainerServiceStub(ch)
            with pytest.raises(grpc.RpcError) as ei:
                stub.GetRun(pb.GetRunRequest(run_id="no-such-run"), timeout=10)
            assert ei.value.code() == grpc.StatusCode.NOT_FOUND
            assert "run_id" in ei.value.details()
            for bad in ("../etc", "a/b", "", "x" * 65):
                with pytest.raises(grpc.RpcError) as ei:
                    stub.GetRun(pb.GetRunRequest(run_id=bad), timeout=10)
                assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad
                assert ei.value.details().startswith("run_id:")
            assert stub.ListRuns(pb.ListRunsRequest(), timeout=10).runs == []
            with pytest.raises(grpc.RpcError) as ei:
                stub.ListRuns(pb.ListRunsRequest(page_size=501), timeout=10)
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert ei.value.details().startswith("page_size:")
        assert sc.stop(signal.SIGTERM, timeout=30) == 0
        assert "shutting down: health NOT_SERVING" in sc.log()


def test_health_goes_not_serving_before_stop(tmp_path):
    """Watch health while SIGTERM arrives: NOT_SERVING is announced before the server goes away."""
    with running_sidecar(tmp_path, "--grace", "2") as sc:
        with grpc.insecure_channel(sc.address) as ch:
            watch = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
            first = next(watch)
            assert first.status == health_pb2.HealthCheckResponse.SERVING
            sc.proc.send_signal(signal.SIGTERM)
            seen = []
            try:
                for res in watch:
                    seen.append(res.status)
            except grpc.RpcError:
                pass
            assert health_pb2.HealthCheckResponse.NOT_SERVING in seen
        assert sc.proc.wait(timeout=30) == 0


def test_non_loopback_bind_without_token_is_refused(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "py_trainer.server.cli", "serve", "--host", "0.0.0.0", "--port", "0",
         "--runs-root", str(tmp_path / "runs"), "--data-root", str(tmp_path)],
        capture_output=True, text=True, env=sidecar_env(PY_TRAINER_TOKEN=""), cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert "refusing to bind 0.0.0.0" in proc.stderr and "--token" in proc.stderr


def test_token_required_when_configured(tmp_path):
    with running_sidecar(tmp_path, "--token", "s3cret") as sc:
        with grpc.insecure_channel(sc.address) as ch:
            stub = pb_grpc.TrainerServiceStub(ch)
            for md in ((), (("authorization", "Bearer wrong"),), (("authorization", "s3cret"),)):
                with pytest.raises(grpc.RpcError) as ei:
                    stub.GetRun(pb.GetRunRequest(run_id="x"), metadata=md, timeout=10)
                assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as ei:
                list(stub.WatchRun(pb.WatchRunRequest(run_id="x"), timeout=10))
            assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.RpcError) as ei:
                stub.GetRun(pb.GetRunRequest(run_id="x"), metadata=(("authorization", "Bearer s3cret"),), timeout=10)
            assert ei.value.code() == grpc.StatusCode.NOT_FOUND
            # Health stays open so load balancers and probes work without the token.
            res = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert res.status == health_pb2.HealthCheckResponse.SERVING
        assert sc.stop() == 0
