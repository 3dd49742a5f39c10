"""The inference worker: Evaluate and SampleGroups run in a process of their own, like training.

An out-of-memory in one large Evaluate must fail that Evaluate, not the sidecar and every run
with it (issue 22). The sidecar validates a request itself (every refusal up front, nothing
queued), then hands the planned job to this process and streams back what it yields:
- one worker per sidecar, started on the first job and kept warm between jobs: starting one
  costs an interpreter plus torch/transformers/peft imports, measured 7-8.5 s on the 2-core VM,
  against 0.1 s for a small warm Evaluate (docs/usage.md has the numbers), so a process per
  call would make every Evaluate seconds slower;
- one job at a time (`InferenceWorker.run` holds a lock), which is what made concurrent calls
  identical to solo ones when they shared the sidecar's inference thread; inside the worker a job
  runs on that process's `models.INFERENCE` thread, exactly as it did in the sidecar;
- a caller that goes away (a cancel, its deadline) sends CANCEL: the job stops at its next batch
  (or draw) and the worker stays warm; the next job waits until it has stopped (a worker that does
  not stop within CANCEL_GRACE_S is killed). A job building a model (an embedded base not built
  yet, a GGUF conversion: `tiny_model.build_once`) has no batch to stop at and would build on for
  nobody, for minutes on a large task file (issue 30, item 2): the worker removes the half-built
  folder and exits (`stop_building`), and the next job gets a fresh worker;
- a job's RequestError comes back with its status; an out-of-memory (MemoryError, an allocator
  failure, a CUDA OOM) is RESOURCE_EXHAUSTED, and a worker killed by SIGKILL (the kernel's OOM
  killer) is RESOURCE_EXHAUSTED too; either way that worker is discarded and the next job gets a
  fresh one, while the sidecar and its training runs go on.

Wire: frames of (1-byte tag, 4-byte big-endian length, body) on the worker's stdin (JOB: a
pickled (kind, payload) from our own sidecar, messages as their wire bytes; CANCEL) and on a copy of its stdout (MSG: a
serialized response message; ERROR: JSON {code, field, message}; END); its own stdout goes to
its stderr, so a library's print cannot corrupt a frame. The worker exits when its stdin closes
and dies with its parent (PR_SET_PDEATHSIG).

Test hook: PY_TRAINER_INFERENCE_MEMORY_MB caps the worker's address space (RLIMIT_AS) at that
many MiB above what it has mapped when a job starts, so a test can make a real allocation fail.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import io
import json
import logging
import os
import pickle
import resource
import shutil
import signal
import struct
import sys
from typing import AsyncIterator

import grpc
from google.protobuf.message import Message

from py_trainer.core.errors import RequestError, ResourceExhausted
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.inference import InferenceFailed, cause_text, is_out_of_memory
from py_trainer.models.tiny_model import BUILDS_IN_PROGRESS
from py_trainer.runs.forkserver import ForkServer
from py_trainer.workers.evaluate import stream_evaluation
from py_trainer.workers.sampling import stream_groups

log = logging.getLogger(__name__)

MODULE = "py_trainer.workers.inference_worker"
PRELOAD = ["py_trainer.workers.evaluate", "py_trainer.workers.sampling", "py_trainer.models.inference", "grpc", "peft",
           "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto"]
"""What the worker imports before its first job (this module's imports and main()'s), imported
once in the fork server; not this module itself, which the child runs as __main__."""
HEADER = struct.Struct(">cI")
JOB, CANCEL, MSG, ERROR, END = b"J", b"C", b"M", b"E", b"."
CANCEL_GRACE_S = 30.0
"""How long a cancelled job gets to reach its next batch before its worker is killed."""
MEMORY_ENV = "PY_TRAINER_INFERENCE_MEMORY_MB"
DISCARD_CODES = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL)
"""A job that failed with these leaves its worker in doubt: the next job gets a fresh one."""


def frame(tag: bytes, body: bytes = b"") -> bytes:
    return HEADER.pack(tag, len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> tuple[bytes | None, bytes]:
    """(tag, body), or (None, b"") when the other side closed the pipe."""
    try:
        tag, n = HEADER.unpack(await reader.readexactly(HEADER.size))
        return tag, await reader.readexactly(n)
    except asyncio.IncompleteReadError:
        return None, b""


class JobPickler(pickle.Pickler):
    """Pickles protobuf messages as (message name, wire bytes): the generated classes live in a
    module that pickle cannot import by the name protobuf gives it."""

    def reducer_override(self, obj):
        if isinstance(obj, Message):
            return message_from, (type(obj).__name__, obj.SerializeToString())
        return NotImplemented


def message_from(name: str, data: bytes) -> Message:
    return getattr(pb, name).FromString(data)


def job_body(kind: str, payload) -> bytes:
    buf = io.BytesIO()
    JobPickler(buf).dump((kind, payload))
    return buf.getvalue()


def error_body(err: RequestError) -> bytes:
    return json.dumps({"code": err.code.name, "field": err.field, "message": err.message}).encode()


def error_from(body: bytes) -> RequestError:
    d = json.loads(body)
    err = RequestError(d["field"], d["message"])
    err.code = grpc.StatusCode[d["code"]]
    return err


# ---------------------------------------------------------------------------------------------
# The sidecar's side


class InferenceWorker:
    """The sidecar's one inference worker process: started on first use, kept warm, one job at a time."""

    def __init__(self, argv: list[str] | None = None, forks: ForkServer | None = None):
        self.argv = argv or [sys.executable, "-m", MODULE]
        self.forks = forks
        """The sidecar's fork server, which forks the worker when there is one (forkserver.py)."""
        self._lock = asyncio.Lock()
        self._proc: asyncio.subprocess.Process | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=8)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.returncode is None else None

    async def _process(self) -> asyncio.subprocess.Process:
        if self._proc is None or self._proc.returncode is not None:
            self._tail.clear()
            self._proc = await self._fork()
            if self._proc is None:
                self._proc = await asyncio.create_subprocess_exec(
                    *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, limit=64 * 1024 * 1024)
            asyncio.get_running_loop().create_task(self._pump_log(self._proc))
            log.info("inference worker started (pid %d)", self._proc.pid)
        return self._proc

    async def _fork(self):
        """The worker forked by the fork server, or None (no fork server, one that refused, or an argv of a test's)."""
        if self.forks is None or self.argv != [sys.executable, "-m", MODULE]:
            return None
        pipe = asyncio.subprocess.PIPE
        return await self.forks.spawn_or_none(MODULE, [], env=dict(os.environ), stdin=pipe, stdout=pipe, stderr=pipe,
                                              title=" ".join(self.argv), preload=PRELOAD)

    async def _pump_log(self, proc: asyncio.subprocess.Process) -> None:
        """The worker's stderr into the sidecar's, each line marked; the last lines kept for a crash message."""
        async for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            self._tail.append(line)
            sys.stderr.write(f"[inference worker {proc.pid}] {line}\n")

    def _discard(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is None:
            proc.kill()
        if self._proc is proc:
            self._proc = None

    async def _died(self, proc: asyncio.subprocess.Process, kind: str) -> RequestError:
        rc = await proc.wait()
        self._discard(proc)
        if rc == -signal.SIGKILL:
            return ResourceExhausted("", f"the inference worker was killed (SIGKILL) during this {kind}: most likely "
                                         "out of memory (the kernel's OOM killer); the sidecar and its training runs go "
                                         "on. Try a smaller batch_size, max_new_tokens or model")
        tail = " | ".join(l for l in self._tail if l.strip())[-600:]
        return InferenceFailed("", f"the inference worker exited with {rc} during this {kind}; its log ends: {tail}")

    async def run(self, kind: str, payload, response_class) -> AsyncIterator:
        """Run one job ("evaluate" or "sample") and yield its responses; its failure is raised as
        the RequestError the worker sent (or one saying how the worker died)."""
        await self._lock.acquire()  # cancelled while queued: the job never starts
        proc, settled = None, False
        try:
            proc = await self._process()
            proc.stdin.write(frame(JOB, job_body(kind, payload)))
            await proc.stdin.drain()
            while True:
                tag, body = await read_frame(proc.stdout)
                if tag == MSG:
                    yield response_class.FromString(body)
                    continue
                settled = True
                if tag == END:
                    return
                if tag == ERROR:
                    err = error_from(body)
                    if err.code in DISCARD_CODES:
                        self._discard(proc)
                    raise err
                raise await self._died(proc, kind)
        except (BrokenPipeError, ConnectionResetError):
            settled = True
            raise await self._died(proc, kind) from None
        finally:
            if settled or proc is None:
                self._lock.release()
            else:  # the caller went away mid-job: the next job waits until this one has stopped
                asyncio.get_running_loop().create_task(self._stop_job(proc))

    async def _stop_job(self, proc: asyncio.subprocess.Process) -> None:
        try:
            proc.stdin.write(frame(CANCEL))
            await proc.stdin.drain()
            async with asyncio.timeout(CANCEL_GRACE_S):
                while (tag := (await read_frame(proc.stdout))[0]) not in (END, ERROR, None):
                    pass
            if tag is None:
                self._discard(proc)
        except (TimeoutError, OSError):
            log.warning("inference worker %d did not stop a cancelled job in %.0f s: killed", proc.pid, CANCEL_GRACE_S)
            self._discard(proc)
        finally:
            self._lock.release()


# ---------------------------------------------------------------------------------------------
# The worker process


def limit_memory() -> None:
    """PY_TRAINER_INFERENCE_MEMORY_MB (test hook): RLIMIT_AS at that much above what is mapped now."""
    extra = os.environ.get(MEMORY_ENV, "").strip()
    if not extra:
        return
    mapped = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize:"))
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped + int(extra) * 1024 * 1024, hard))


async def run_job(body: bytes, out) -> None:
    """One job: its responses as MSG frames, then END, or one ERROR frame."""
    kind, payload = pickle.loads(body)
    try:
        limit_memory()
        stream = stream_evaluation(*payload) if kind == "evaluate" else stream_groups(*payload)
        async for resp in stream:
            out.write(frame(MSG, resp.SerializeToString()))
            out.flush()  # each progress event and group as it happens, not all at the end
        out.write(frame(END))
    except asyncio.CancelledError:  # CANCEL: the stream stopped its generation; nobody waits for a result
        out.write(frame(END))
    except RequestError as err:
        out.write(frame(ERROR, error_body(err)))
    except Exception as exc:
        log.exception("%s failed", kind)
        err = ResourceExhausted("", f"out of memory during this {kind} ({cause_text(exc)})") if is_out_of_memory(exc) \
            else InferenceFailed("", f"this {kind} failed: {cause_text(exc)}")
        out.write(frame(ERROR, error_body(err)))
    out.flush()


async def serve_jobs(out) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    job: asyncio.Task | None = None
    while True:
        tag, body = await read_frame(reader)
        if tag is None:  # the sidecar is gone
            return
        if tag == JOB:
            job = asyncio.create_task(run_job(body, out))
        elif tag == CANCEL and job is not None:
            if BUILDS_IN_PROGRESS:
                stop_building()
            job.cancel()


def stop_building() -> None:
    """The cancelled job is building a model on the inference thread, which cannot be interrupted:
    remove the half-built folders and exit, so no CPU goes on a build nobody waits for. Its lock
    (an flock) goes with the process; `build_once` clears any leftover of a build cut short."""
    for tmp in list(BUILDS_IN_PROGRESS):
        shutil.rmtree(tmp, ignore_errors=True)
    log.warning("a cancelled job was building a model: half-built folder removed, inference worker exits")
    logging.shutdown()
    os._exit(0)


def main() -> int:
    out = os.fdopen(os.dup(1), "wb")  # frames go to the pipe that was stdout ...
    os.dup2(2, 1)  # ... and anything printed to stdout goes to stderr
    sys.stdout = sys.stderr
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import peft  # noqa: F401  (imported before the first job: what warm means, and what a job's memory excludes)
    import transformers

    transformers.AutoModelForCausalLM, transformers.AutoTokenizer  # noqa: B018  (their lazy modules)
    asyncio.run(serve_jobs(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
