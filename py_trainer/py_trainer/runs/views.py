"""How a client sees runs: ListRuns' pages and WatchRun's events, replayed then followed live.

A page token is the offset of the page it asks for, as a decimal string ('' = the first page; the last
page answers ''). Offsets are positions in the list at the time of the call: a run created between
two calls shifts the later pages by one, as in any offset-paginated listing.
"""

from __future__ import annotations

from typing import AsyncIterator, Sequence, TypeVar

from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.run_folder import TERMINAL_STATES, RunRecord

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500

T = TypeVar("T")


def page_of(items: Sequence[T], page_size: int, page_token: str) -> tuple[list[T], str]:
    """The page `page_token` asks for (`page_size` items; 0 = DEFAULT_PAGE_SIZE) and the next token;
    INVALID_ARGUMENT naming page_size or page_token when either is not one ListRuns could take."""
    size = page_size or DEFAULT_PAGE_SIZE
    if size > MAX_PAGE_SIZE:
        raise InvalidArgument("page_size", f"{size} exceeds the maximum of {MAX_PAGE_SIZE}")
    if page_token and not page_token.isdigit():
        raise InvalidArgument("page_token", f"{page_token!r} is not a token from ListRuns")
    start = int(page_token or "0")
    if start > len(items):
        raise InvalidArgument("page_token", f"{page_token!r} is out of range")
    nxt = str(start + size) if start + size < len(items) else ""
    return list(items[start:start + size]), nxt


def follow(rec: RunRecord, after_seq: int = 0) -> AsyncIterator[pb.RunEvent]:
    """A run's events with seq > after_seq from its log, then live ones until the run ends.

    Checked up front (not at the first iteration): an after_seq past the run's last seq is
    INVALID_ARGUMENT whatever its state, since seqs are gap-free: a client that claims to have seen
    seq N+1 of an N-event run is confused."""
    if after_seq > rec.log.last_seq:
        raise InvalidArgument("after_seq", f"{after_seq} is past the run's last seq {rec.log.last_seq}"
                                           f" ({pb.RunState.Name(rec.state)})")
    return _replay_then_follow(rec, after_seq)


async def _replay_then_follow(rec: RunRecord, after_seq: int) -> AsyncIterator[pb.RunEvent]:
    i = after_seq
    while True:
        while i < rec.log.last_seq:
            yield rec.log.events[i]
            i += 1
        if rec.state in TERMINAL_STATES:
            return
        await rec.changed.wait()
