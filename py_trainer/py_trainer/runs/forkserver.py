"""A fork server: the sidecar's workers forked from one process that has imported torch,
transformers, PEFT and TRL once, instead of each starting an interpreter and importing them again.

Why: a training or inference worker spends most of a short run importing (measured on the 2-core
VM: 6.5-7 s of CPU for torch + transformers + peft + trl, against ~3 s for a 3-step run of the
embedded model after that). A sidecar that trains several runs, or trains and evaluates, paid it
for every worker. The fork server imports, before each fork, what that worker is about to import
(the spawn's `preload` list) unless it already has: each library is imported once per sidecar and
never one a worker would not have imported itself, so a sidecar pays at most what its first
workers paid before; every later worker is a fork of that state, ready in milliseconds. This is
the `multiprocessing` "forkserver" idea with a preload list, kept as a process of our own so that a worker still looks and behaves like `python -m MODULE ARGS`:
- its stdin, stdout and stderr are the files or pipes the sidecar gives it (passed over the
  control socket with SCM_RIGHTS), its environment is exactly the one the sidecar gives it, its
  cwd the sidecar's, its `sys.argv` and its process title (`ps`, `pgrep -f`) those of the command;
- it runs the module as `python -m` does (`runpy.run_module(..., run_name="__main__")`), and its
  exit code is what that command's would be (SystemExit's code, 1 for an uncaught exception, the
  signal that killed it as -N);
- OpenMP/MKL threads follow the OMP_NUM_THREADS it is given (torch.set_num_threads in the child:
  the OpenMP runtime read the variable once, when the fork server loaded it);
- it dies with the fork server (PR_SET_PDEATHSIG, which a worker that sets its own then re-points
  at the fork server), and the fork server dies with the sidecar: a `kill -9` of the sidecar
  still takes every worker with it.
What differs from a fresh interpreter, and why it is safe: the preloaded modules were imported
under the sidecar's environment (the same one, less the few variables the sidecar adds per
worker: the events socket, thread counts, CUDA_VISIBLE_DEVICES, which nothing reads at import);
the fork server runs no torch op and starts no thread before it forks (it checks: a thread or an
initialised CUDA context makes it refuse to start, and the sidecar then starts workers as plain
processes, as it does for multi-rank runs and for the Ray executor). On a machine with a GPU
driver the sidecar never uses it (CUDA cannot be used in a forked child once the parent has
touched it, and a GPU machine does not miss the seconds).

Control protocol, one JSON object per message on a Unix socket pair (fds in SCM_RIGHTS):
sidecar -> server {"id", "module", "args", "env", "title", "preload"} with the child's
stdin/stdout/stderr fds; server -> sidecar {"ready": true} once, then {"id", "pid"}, {"id",
"error"} or {"id", "refused": why} (forking became unsafe while importing) per request, and
{"exit": pid, "rc": code} when a child ends. The server exits when the socket closes, after
its children have ended.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import socket
import sys

from py_trainer.runs.forkserver_process import main, recv_message, send_message

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# The sidecar's side


PIPE = asyncio.subprocess.PIPE


class ForkedProcess:
    """A worker forked by the fork server, with what the sidecar uses of asyncio's Process: pid,
    returncode, wait(), send_signal(), terminate(), kill(), and stdin/stdout/stderr streams for
    the ones asked as PIPE. Signals go through a pidfd, so one sent after the worker ended never
    reaches a process that reused its pid."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._ended = asyncio.get_running_loop().create_future()
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except OSError:  # already reaped: the exit report is on its way
            self._pidfd = None

    def _exited(self, rc: int) -> None:
        if self.returncode is None:
            self.returncode = rc
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
            if not self._ended.done():
                self._ended.set_result(rc)

    async def wait(self) -> int:
        return await asyncio.shield(self._ended)

    def send_signal(self, sig: int) -> None:
        if self.returncode is not None or self._pidfd is None:
            return
        try:
            signal.pidfd_send_signal(self._pidfd, sig)
        except ProcessLookupError:
            pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServerUnavailable(RuntimeError):
    """The fork server could not start or refused to (the caller starts a plain process instead)."""


class ForkServer:
    """The sidecar's fork server: started by the first `spawn`, restarted after it dies."""

    def __init__(self, argv: list[str] | None = None):
        self.argv = argv or [sys.executable, "-m", "py_trainer.runs.forkserver"]
        self.refused = ""
        """Why the fork server would not start ('' until it refused): the caller spawns instead."""
        self._proc: asyncio.subprocess.Process | None = None
        self._sock: socket.socket | None = None
        self._lock = asyncio.Lock()
        self._next_id = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._early_exits: dict[int, int] = {}
        self._ready: asyncio.Future | None = None

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv, str(theirs.fileno()), pass_fds=[theirs.fileno()],
                stdin=asyncio.subprocess.DEVNULL)
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._ready = loop.create_future()
        loop.add_reader(ours.fileno(), self._on_readable)
        log.info("fork server started (pid %d)", self._proc.pid)
        ok, why = await self._ready
        if not ok:
            self.refused = why
            await self._lost()
            raise ForkServerUnavailable(why)

    def _on_readable(self) -> None:
        try:
            message, fds = recv_message(self._sock, max_fds=0)
        except BlockingIOError:
            return
        except OSError:
            message = None
        if message is None:
            asyncio.get_running_loop().create_task(self._lost())
            return
        if "ready" in message:
            self._ready.set_result((message["ready"], message.get("why", "")))
        elif "exit" in message:
            child = self._children.pop(message["exit"], None)
            if child is not None:
                child._exited(message["rc"])
            else:  # reported before the spawn's answer was handled
                self._early_exits[message["exit"]] = message["rc"]
        elif (fut := self._pending.pop(message["id"], None)) is not None and not fut.done():
            fut.set_result(message)

    async def _lost(self) -> None:
        """The fork server is gone: its children died with it (SIGKILL); forget them."""
        sock, proc = self._sock, self._proc
        self._sock, self._proc = None, None
        if sock is not None:
            asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ForkServerUnavailable("the fork server exited"))
        self._pending.clear()
        if self._ready is not None and not self._ready.done():
            self._ready.set_result((False, "the fork server exited while importing"))
        children, self._children = self._children, {}
        for child in children.values():
            child._exited(-signal.SIGKILL)
        if proc is not None:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()

    async def spawn(self, module: str, args: list[str], *, env: dict[str, str], stdin=None, stdout=None,
                    stderr=None, title: str = "", preload: list[str] = ()) -> ForkedProcess:
        """Fork `python -m module args` with exactly `env`; stdin/stdout/stderr: an fd, a file, PIPE or
        None (/dev/null for stdin, the sidecar's own for the others). `preload`: modules the child
        would import, imported in the fork server first (once: later children find them loaded)."""
        async with self._lock:
            if self._proc is None:
                await self._start()
            ends: list[int] = []  # ours, for PIPE
            theirs: list[int] = []
            closing: list[int] = []
            try:
                for i, spec in enumerate((stdin, stdout, stderr)):
                    if spec == PIPE:
                        r, w = os.pipe()
                        ours_fd, child_fd = (w, r) if i == 0 else (r, w)
                        ends.append(ours_fd)
                        closing.append(child_fd)
                        theirs.append(child_fd)
                    else:
                        ends.append(-1)
                        if spec is None:
                            if i == 0:
                                fd = os.open(os.devnull, os.O_RDONLY)
                                closing.append(fd)
                            else:
                                fd = i
                        else:
                            fd = spec if isinstance(spec, int) else spec.fileno()
                        theirs.append(fd)
                self._next_id += 1
                fut = asyncio.get_running_loop().create_future()
                self._pending[self._next_id] = fut
                send_message(self._sock, {"id": self._next_id, "module": module, "args": list(args),
                                          "env": dict(env), "title": title, "preload": list(preload)}, theirs)
                answer = await fut
            except BaseException:
                for fd in ends:
                    if fd >= 0:
                        os.close(fd)
                raise
            finally:
                for fd in closing:
                    os.close(fd)
            if "refused" in answer:
                self.refused = answer["refused"]
                for fd in ends:
                    if fd >= 0:
                        os.close(fd)
                raise ForkServerUnavailable(self.refused)
            if "error" in answer:
                for fd in ends:
                    if fd >= 0:
                        os.close(fd)
                raise OSError(errno.EAGAIN, answer["error"])
            child = ForkedProcess(answer["pid"])
            if (rc := self._early_exits.pop(child.pid, None)) is not None:
                child._exited(rc)
            else:
                self._children[child.pid] = child
            await _attach_pipes(child, ends)
            return child

    async def spawn_or_none(self, module: str, args: list[str], **kw) -> ForkedProcess | None:
        """`spawn`, or None once the fork server refused or could not start (logged): the caller
        then starts the worker as a process of its own."""
        if self.refused:
            return None
        try:
            return await self.spawn(module, args, **kw)
        except ForkServerUnavailable as err:
            log.warning("fork server unavailable (%s): starting %s as a process of its own", err, module)
            return None

    async def close(self) -> None:
        """Close the control socket: the fork server exits once its children have ended (an
        inference worker ends when the sidecar closes its stdin; anything left dies with the
        sidecar, PR_SET_PDEATHSIG)."""
        async with self._lock:
            if self._sock is None:
                return
            sock = self._sock
            asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
            self._sock, self._proc = None, None


class _WritePipeProtocol(asyncio.streams.FlowControlMixin):
    """What a StreamWriter needs of its protocol: flow control (drain) and a close waiter."""

    def __init__(self, loop):
        super().__init__(loop=loop)
        self._closed = loop.create_future()

    def connection_lost(self, exc):
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream):
        return self._closed


async def _attach_pipes(child: ForkedProcess, ends: list[int]) -> None:
    loop = asyncio.get_running_loop()
    stdin, stdout, stderr = ends
    if stdin >= 0:
        transport, protocol = await loop.connect_write_pipe(
            lambda: _WritePipeProtocol(loop), os.fdopen(stdin, "wb", buffering=0))
        child.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
    for name, fd in (("stdout", stdout), ("stderr", stderr)):
        if fd >= 0:
            reader = asyncio.StreamReader(limit=64 * 1024 * 1024, loop=loop)
            await loop.connect_read_pipe(lambda r=reader: asyncio.StreamReaderProtocol(r, loop=loop),
                                         os.fdopen(fd, "rb", buffering=0))
            setattr(child, name, reader)


if __name__ == "__main__":
    sys.exit(main())
