"""Request errors that map one-to-one onto gRPC status codes.

The servicer never answers success with an error string: anything the caller did wrong raises
one of these, and `server/servicer.py` aborts the RPC with the matching status and the message, which
always starts with the offending field (e.g. ``grpo.num_generations: must be in [2, 256] (GRPO
needs a group), got 1``).
"""

from __future__ import annotations

import errno
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import grpc


class RequestError(Exception):
    """A caller mistake; `code` is the gRPC status to answer with."""

    code: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class InvalidArgument(RequestError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(RequestError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(RequestError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(RequestError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhausted(RequestError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class OutOfRange(RequestError):
    code = grpc.StatusCode.OUT_OF_RANGE


# ---------------------------------------------------------------------------------------------
# A file the sidecar may not read: the request's field, never the server's absolute path


def shown_path(path: str | Path | None, roots: tuple[Path, ...]) -> str:
    """`path` as a client may see it: relative to the first of `roots` it lies under, else its
    name alone."""
    if not path:
        return "a file"
    path = Path(os.path.abspath(path))
    for root in roots:
        try:
            return path.relative_to(Path(os.path.abspath(root))).as_posix() or "."
        except ValueError:
            continue
    return path.name


def not_permitted(err: PermissionError, field: str, what: str = "", roots: tuple[Path, ...] = ()) -> FailedPrecondition:
    """FAILED_PRECONDITION naming the request `field` for a file the sidecar may not read (issue 44
    item 5: it was `<absolute path>: Permission denied`, no field)."""
    return FailedPrecondition(field, f"{what}{shown_path(err.filename, roots)}: permission denied "
                                     f"(the sidecar runs as uid {os.getuid()})")


@contextmanager
def permission_refused(field: str, what: str = "", roots: tuple[Path, ...] = ()):
    """Inside it, a PermissionError is `not_permitted` naming `field`."""
    try:
        yield
    except PermissionError as err:
        raise not_permitted(err, field, what, roots) from None


# ---------------------------------------------------------------------------------------------
# A full disk is not a caller mistake, but every writer must recognise it the same way


class DiskFull(OSError):
    """ENOSPC (or EDQUOT) while writing `path`; the writer left nothing torn behind."""

    def __init__(self, path: Path | str):
        self.path = str(path)
        super().__init__(errno.ENOSPC, f"disk full at {self.path}")


def is_disk_full(err: BaseException) -> bool:
    """True for an OSError that means "no space left" (ENOSPC, or a quota's EDQUOT)."""
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)


# ---------------------------------------------------------------------------------------------
# SIGTERM to a py-trainer command: what Ctrl-C does


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so every writer's cleanup runs."""


def term_as_ctrl_c(signum, frame) -> None:
    """SIGTERM does what Ctrl-C does (issue 44: `agent export` forwards it; export left `.<out>.*`):
    the command's own SIGINT handler (train: stop after the step), else KeyboardInterrupt."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not signal.default_int_handler:
        return handler(signal.SIGINT, frame)
    raise Terminated()
