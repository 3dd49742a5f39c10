"""The gRPC sidecar: a thin grpc.aio servicer that translates between the wire and `runs/registry.py`.

Nothing here knows about TRL: Train requests are validated by `validate.py`, runs, pagination and artifact chunks live in `runs/registry.py`, evaluation in
`evaluate.py`, group sampling in `sampling.py`; both are validated here and run in the inference
worker process (`inference_worker.py`), so an out-of-memory there fails that call only. Errors raised there as
`RequestError` become the matching gRPC status with a message that names the field.

Standard tooling works against it: grpc.health.v1 health checking (service "" and the
TrainerService name) and server reflection are on. SIGTERM/SIGINT shut down gracefully: health
flips to NOT_SERVING first, queued runs stay QUEUED (the next sidecar on the runs root trains them),
the active training worker is asked to stop after its current step (its run ends CANCELLED with
its adapter, summary and last checkpoint; FAILED only if it does not stop within
`runs.SHUTDOWN_GRACE_S`), then the server stops with a grace period.

Every request is decoded through `wire.decode_request` (an interceptor swaps each method's
deserializer), so bytes that are not a valid message get INVALID_ARGUMENT naming the field instead
of grpc's INTERNAL. Only one sidecar serves a runs root (`runs_root.RunsRootLock`): a second one
exits with status 2 naming the holder's pid.

Security: by default the server binds 127.0.0.1. Any other address needs a bearer token
(``authorization: Bearer <token>`` metadata, compared in constant time) or TLS; without either
the server refuses to start.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import os
import signal
import sys
import urllib.parse
from collections.abc import Collection
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from py_trainer.core.devices import gpu_driver_present
from py_trainer.core.errors import RequestError, not_permitted
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2_grpc as pb_grpc
from py_trainer.runs.forkserver import ForkServer
from py_trainer.runs.local_executor import ExecutorUnavailable, LocalExecutor
from py_trainer.runs.registry import RunRegistry
from py_trainer.runs.runs_root import RunsRootBusy
from py_trainer.server.validate import validate_train_request
from py_trainer.server.wire import UndecodableRequest, decode_request
from py_trainer.workers.evaluate import plan_evaluation
from py_trainer.workers.inference_worker import InferenceWorker
from py_trainer.workers.memory_estimate import estimate_request
from py_trainer.workers.sampling import validate_sample_request

log = logging.getLogger(__name__)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["TrainerService"].full_name


async def _abort(context: grpc.aio.ServicerContext, err: RequestError):
    await context.abort(err.code, str(err))


def _not_permitted(err: PermissionError, service: "TrainerService", request) -> RequestError:
    """A file under the roots the sidecar may not read or write (was UNKNOWN): FAILED_PRECONDITION
    naming the request's run_id when it has one, the file shown under the run folder or the roots,
    never as the server's absolute path (issue 44 item 5)."""
    reg, run_id = service.registry, getattr(request, "run_id", "")
    roots = (Path(reg.runs_root) / run_id,) if run_id else ()
    return not_permitted(err, "run_id" if run_id else "", f"run {run_id!r}: " if run_id else "",
                         (*roots, Path(reg.runs_root), Path(reg.data_root)))


def _guard(method: Callable) -> Callable:
    """Map RequestError raised by a unary handler onto its gRPC status."""

    async def wrapper(self, request, context):
        try:
            return await method(self, request, context)
        except RequestError as err:
            await _abort(context, err)
        except PermissionError as err:
            await _abort(context, _not_permitted(err, self, request))

    wrapper.__name__ = method.__name__
    return wrapper


def _guard_stream(method: Callable) -> Callable:
    """Map RequestError raised by a server-streaming handler onto its gRPC status."""

    async def wrapper(self, request, context):
        try:
            async for item in method(self, request, context):
                yield item
        except RequestError as err:
            await _abort(context, err)
        except PermissionError as err:
            await _abort(context, _not_permitted(err, self, request))

    wrapper.__name__ = method.__name__
    return wrapper


def peer_host(peer: str) -> str:
    """The calling peer's address from grpc's `context.peer()` ("ipv4:1.2.3.4:5678",
    "ipv6:[::1]:5678", brackets maybe percent-encoded); "" for any other transport (unix sockets)."""
    kind, _, address = urllib.parse.unquote(peer).partition(":")
    if kind not in ("ipv4", "ipv6") or ":" not in address:
        return ""
    return address.rsplit(":", 1)[0].strip("[]")


FORK_SERVER_ENV = "PY_TRAINER_FORK_SERVER"


def make_fork_server() -> ForkServer | None:
    """The sidecar's fork server (forkserver.py), or None: on a machine with a GPU driver (CUDA and
    fork do not mix) or with $PY_TRAINER_FORK_SERVER=0, every worker starts as a process of its own."""
    if gpu_driver_present() or os.environ.get(FORK_SERVER_ENV, "1") == "0":
        return None
    return ForkServer()


class TrainerService(pb_grpc.TrainerServiceServicer):
    """Translates TrainerService RPCs onto the run registry and the evaluator."""

    def __init__(self, registry: RunRegistry, forks: ForkServer | None = None, tool_hosts: Collection[str] = ()):
        self.registry = registry
        self.inference = InferenceWorker(forks=forks)  # Evaluate and SampleGroups run there, one job at a time
        self.tool_hosts = tuple(tool_hosts)
        """hosts besides loopback an agent task's tool_host may name (serve --allow-tool-host)"""

    def _tool_hosts(self, context) -> tuple[str, ...]:
        """The hosts a request of this caller may name as tool_host: the serve flag's and its own address."""
        peer = peer_host(context.peer() or "")
        return self.tool_hosts + ((peer,) if peer else ())

    def _validate(self, request: pb.TrainRequest, tool_hosts: tuple[str, ...]) -> pb.TrainRequest:
        """The effective request, checked against where its workers run: this machine's devices
        (local executor) or the cluster's nodes (`executor.check_request`); `tool_hosts`: `_tool_hosts`."""
        executor = self.registry.executor
        effective = validate_train_request(request, self.registry.data_root, this_machine=executor.uses_local_devices(),
                                           tool_hosts=tool_hosts, find_run=self.registry.get)
        executor.check_request(effective)
        return effective

    @_guard_stream
    async def Train(self, request: pb.TrainRequest, context) -> AsyncIterator[pb.TrainResponse]:
        effective = await asyncio.to_thread(self._validate, request, self._tool_hosts(context))  # off the loop (health)
        rec = self.registry.create(effective)
        # If the client goes away, grpc cancels this generator; the run itself keeps going.
        async for ev in self.registry.watch(rec.run_id, 0):
            yield pb.TrainResponse(event=ev)

    @_guard_stream
    async def WatchRun(self, request: pb.WatchRunRequest, context) -> AsyncIterator[pb.WatchRunResponse]:
        async for ev in self.registry.watch(request.run_id, request.after_seq):
            yield pb.WatchRunResponse(event=ev)

    @_guard
    async def GetRun(self, request: pb.GetRunRequest, context) -> pb.GetRunResponse:
        return pb.GetRunResponse(run=self.registry.run_proto(request.run_id))

    @_guard
    async def ListRuns(self, request: pb.ListRunsRequest, context) -> pb.ListRunsResponse:
        runs, nxt = self.registry.list_page(request.state, request.page_size, request.page_token)
        return pb.ListRunsResponse(runs=runs, next_page_token=nxt)

    @_guard
    async def ResumeRun(self, request: pb.ResumeRunRequest, context) -> pb.ResumeRunResponse:
        # request.json is re-validated as Train validated it: the data root or the models may have changed.
        tool_hosts = self._tool_hosts(context)
        rec = await self.registry.resume(request.run_id, validate=lambda req: self._validate(req, tool_hosts))
        return pb.ResumeRunResponse(run=rec.to_proto(self.registry.queue_position(rec.run_id)))

    @_guard
    async def CancelRun(self, request: pb.CancelRunRequest, context) -> pb.CancelRunResponse:
        rec = await self.registry.cancel(request.run_id)
        return pb.CancelRunResponse(run=rec.to_proto())

    @_guard
    async def DeleteRun(self, request: pb.DeleteRunRequest, context) -> pb.DeleteRunResponse:
        return pb.DeleteRunResponse(run=await self.registry.delete(request.run_id))

    @_guard_stream
    async def DownloadArtifact(self, request: pb.DownloadArtifactRequest, context):
        chunks = self.registry.download(request.run_id, request.path, request.offset, request.chunk_size)
        done = object()
        while (chunk := await asyncio.to_thread(next, chunks, done)) is not done:
            yield chunk

    @_guard_stream
    async def Evaluate(self, request: pb.EvaluateRequest, context):
        # refusals up front, before the job queues; off the loop (a tokenizer read, an import: issue 44)
        plan = await asyncio.to_thread(plan_evaluation, request, self.registry, self._tool_hosts(context))
        async for resp in self.inference.run("evaluate", (plan, self.registry.data_root), pb.EvaluateResponse):
            yield resp

    @_guard
    async def EstimateMemory(self, request: pb.EstimateMemoryRequest, context) -> pb.EstimateMemoryResponse:
        # validated as Train validates it (errors name the TrainRequest's fields); config.json only, off the loop
        effective = await asyncio.to_thread(self._validate, request.request, self._tool_hosts(context))
        return await asyncio.to_thread(estimate_request, effective, self.registry.data_root)

    @_guard_stream
    async def SampleGroups(self, request: pb.SampleGroupsRequest, context):
        req, adapter = await asyncio.to_thread(validate_sample_request, request, self.registry.data_root, self.registry)
        async for resp in self.inference.run("sample", (req, self.registry.data_root, adapter), pb.SampleGroupsResponse):
            yield resp


# ---------------------------------------------------------------------------------------------
# Decoding, auth and startup


class RequestDecodeInterceptor(grpc.aio.ServerInterceptor):
    """Decode unary requests with `wire.decode_request`: bytes that are not a valid message are
    INVALID_ARGUMENT naming the field (grpc's own deserializer failure is INTERNAL, no field)."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        message_class = getattr(handler.request_deserializer, "__self__", None)
        if message_class is None or not hasattr(message_class, "DESCRIPTOR"):
            return handler

        def deserialize(raw: bytes):
            return decode_request(message_class, raw)

        if handler.response_streaming:
            inner_stream = handler.unary_stream

            async def unary_stream(request, context):
                if isinstance(request, UndecodableRequest):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
                result = inner_stream(request, context)
                if hasattr(result, "__aiter__"):
                    async for item in result:
                        yield item
                else:  # a handler that writes with context.write (grpc's health Watch)
                    await result

            return grpc.unary_stream_rpc_method_handler(unary_stream, request_deserializer=deserialize,
                                                        response_serializer=handler.response_serializer)
        inner = handler.unary_unary

        async def unary_unary(request, context):
            if isinstance(request, UndecodableRequest):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, request_deserializer=deserialize,
                                                   response_serializer=handler.response_serializer)


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Require ``authorization: Bearer <token>`` on every RPC except health checks."""

    def __init__(self, token: str):
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(self, continuation, handler_call_details):
        if handler_call_details.method.startswith("/grpc.health.v1.Health/"):
            return await continuation(handler_call_details)
        got = dict(handler_call_details.invocation_metadata or ()).get("authorization", "")
        if hmac.compare_digest(got.encode(), self._expected):
            return await continuation(handler_call_details)

        async def deny(request, context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

        handler = await continuation(handler_call_details)
        if handler is not None and handler.response_streaming:
            async def deny_stream(request, context):
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
                yield  # pragma: no cover - makes this an async generator
            return grpc.unary_stream_rpc_method_handler(
                deny_stream, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        return grpc.unary_unary_rpc_method_handler(
            deny, request_deserializer=handler.request_deserializer if handler else None,
            response_serializer=handler.response_serializer if handler else None)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class InsecureBindError(RuntimeError):
    pass


def unbindable(host: str, port: int) -> str:
    """'' when host:port can be listened on now, else why not ("address already in use"): checked
    before anything starts, since grpc's failed bind is a RuntimeError after its own log line."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as grpc does: TIME_WAIT is no obstacle
            probe.bind(address)
    except OSError as err:
        return (err.strerror or str(err)).lower()
    return ""


async def serve(host: str, port: int, runs_root: Path, data_root: Path, *, token: str = "",
                tls_cert: Path | None = None, tls_key: Path | None = None, max_queue: int = 8,
                grace_s: float = 5.0, ready: Callable[[int], Awaitable[None] | None] | None = None,
                slots: int | None = None, executor=None, tool_hosts: Collection[str] = ()) -> None:
    """Run the sidecar until SIGTERM/SIGINT. `ready(port)` is called once it is listening.
    `slots`: runs that train at once (None: one per visible GPU, 1 on CPU, or the Ray cluster's
    size). `executor`: where workers run (None: `LocalExecutor`; `ray_executor.RayExecutor`).
    `tool_hosts`: hosts besides loopback and the caller an agent task's tool_host may name."""
    if not is_loopback(host) and not token and not (tls_cert and tls_key):
        raise InsecureBindError(
            f"refusing to bind {host}: a non-loopback address needs --token (or PY_TRAINER_TOKEN) or --tls-cert/--tls-key")
    if why := unbindable(host, port):  # a user mistake, refused before anything starts: one line, exit 2
        print(f"py-trainer serve: --host/--port: cannot listen on {host}:{port}: {why}", file=sys.stderr, flush=True)
        raise SystemExit(2)
    forks = make_fork_server()
    try:
        registry = RunRegistry(runs_root, data_root, max_queue=max_queue, slots=slots,
                                executor=executor or LocalExecutor(forks))
        await registry.start()
    except (RunsRootBusy, ExecutorUnavailable) as err:
        print(f"py-trainer serve: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    # Auth first: an unauthenticated caller learns nothing, not even whether its bytes decode.
    interceptors = ([BearerTokenInterceptor(token)] if token else []) + [RequestDecodeInterceptor()]
    server = grpc.aio.server(interceptors=interceptors, options=[
        ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ])
    pb_grpc.add_TrainerServiceServicer_to_server(TrainerService(registry, forks, tool_hosts), server)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server)
    address = f"{host}:{port}"
    if tls_cert and tls_key:
        creds = grpc.ssl_server_credentials([(tls_key.read_bytes(), tls_cert.read_bytes())])
        bound = server.add_secure_port(address, creds)
    else:
        bound = server.add_insecure_port(address)
    await server.start()
    for svc in ("", SERVICE_NAME):
        await health.set(svc, health_pb2.HealthCheckResponse.SERVING)
    log.info("py-trainer sidecar listening on %s:%d (runs: %s, data: %s)", host, bound, runs_root, data_root)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        maybe = ready(bound)
        if asyncio.iscoroutine(maybe):
            await maybe
    await stop.wait()
    log.info("shutting down: health NOT_SERVING, stopping the active run, grace %.1fs", grace_s)
    await health.enter_graceful_shutdown()
    await registry.close()
    await server.stop(grace_s)
    if forks is not None:
        await forks.close()
    log.info("stopped")
