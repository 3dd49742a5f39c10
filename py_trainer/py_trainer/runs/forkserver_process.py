"""The fork server's own process (`python -m py_trainer.runs.forkserver FD`, started by
`forkserver.ForkServer`): it imports what a worker is about to import, forks, and the child becomes
`python -m MODULE ARGS`; and the control messages both sides exchange (one JSON object per
message on a Unix socket pair, fds in SCM_RIGHTS). Why, and what differs from a fresh
interpreter: forkserver.py."""

from __future__ import annotations

import ctypes
import importlib
import json
import logging
import os
import select
import signal
import socket
import sys
import threading

log = logging.getLogger(__name__)

MAX_MESSAGE = 1 << 20
"""Bytes one control message may take (an environment and a command line fit easily)."""


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def send_message(sock: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.sendall(data)


def recv_message(sock: socket.socket, max_fds: int = 3) -> tuple[dict | None, list[int]]:
    """One message and the fds that came with it; (None, []) when the other side closed."""
    data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, max_fds)
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data), fds


# ---------------------------------------------------------------------------------------------
# The server (its own process: python -m py_trainer.runs.forkserver FD)


def exit_code(exc: BaseException | None) -> int:
    """What `python -m` exits with after the module raised `exc` (None: it returned)."""
    if exc is None:
        return 0
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code & 0xFF
        print(code, file=sys.stderr)
        return 1
    import traceback

    traceback.print_exception(exc)
    return 1


def _run_child(request: dict, fds: list[int], closing: list[int], server: int) -> None:
    """In the forked child of `server`: become `python -m MODULE ARGS` and exit with its code. Never returns."""
    code = 1
    try:
        _die_with_parent()  # fork cleared it; a module that sets its own keeps it pointed at us
        if os.getppid() != server:  # the fork server died before prctl: nobody would kill us
            os._exit(1)
        signal.set_wakeup_fd(-1)
        for fd in closing:
            os.close(fd)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):  # stdin, stdout, stderr
            os.dup2(fd, target)
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        if title := request.get("title"):  # before the environment changes: setproctitle needs it as it was
            try:
                import setproctitle

                setproctitle.setproctitle(title)
            except ImportError:  # pragma: no cover - a dependency; only `ps` would show less
                pass
        os.environ.clear()
        os.environ.update(request["env"])
        threads = request["env"].get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0 and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(threads))
        sys.argv = [request["module"], *request["args"]]
        import runpy

        exc: BaseException | None = None
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        except BaseException as err:  # noqa: BLE001 - the child's exit code, as python -m gives it
            exc = err
        if isinstance(exc, KeyboardInterrupt):  # as python does: die by the signal
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        code = exit_code(exc)
        import atexit

        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def preload(modules: list[str]) -> str:
    """Import `modules`; '' when forking is safe afterwards, else why not."""
    for name in modules:
        importlib.import_module(name)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA was initialised while importing"
    if threading.active_count() > 1:
        return f"importing started threads: {[t.name for t in threading.enumerate()]}"
    return ""


def serve(ctl: socket.socket) -> int:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the sidecar's to handle
    why = preload(["setproctitle"])
    if why:
        send_message(ctl, {"ready": False, "why": why})
        return 1
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the wakeup fd
    send_message(ctl, {"ready": True})
    children: set[int] = set()
    open_ = True
    while open_ or children:
        try:
            ready, _, _ = select.select([ctl, wake_r] if open_ else [wake_r], [], [])
        except InterruptedError:  # pragma: no cover - PEP 475 retries select
            continue
        if wake_r in ready:
            os.read(wake_r, 4096)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            children.discard(pid)
            if open_:
                send_message(ctl, {"exit": pid, "rc": os.waitstatus_to_exitcode(status)})
        if open_ and ctl in ready:
            request, fds = recv_message(ctl)
            if request is None:
                open_ = False
                continue
            try:
                why = preload(request.get("preload", []))
            except Exception as err:  # noqa: BLE001 - the child would fail the same import: let it say so
                why, request["preload"] = "", []
                log.warning("preloading for %s: %s", request["module"], err)
            if why:
                send_message(ctl, {"id": request["id"], "refused": why})
                for fd in fds:
                    os.close(fd)
                continue
            try:
                me = os.getpid()
                pid = os.fork()
            except OSError as err:
                send_message(ctl, {"id": request["id"], "error": f"fork: {err}"})
                for fd in fds:
                    os.close(fd)
                continue
            if pid == 0:
                _run_child(request, fds, [ctl.fileno(), wake_r, wake_w], me)
            for fd in fds:
                os.close(fd)
            children.add(pid)
            send_message(ctl, {"id": request["id"], "pid": pid})
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ctl = socket.socket(fileno=int(argv[0]))
    os.dup2(2, 1)  # a library's print goes to stderr, never onto the control socket
    return serve(ctl)
