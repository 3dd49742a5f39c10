"""A run's ``request.json``: immutable once Train wrote it. Its sha256 is stored where the sidecar
alone writes (`digest_file`: ``<runs_root>/.request-digests/``, not the run folder, which its worker
and its user write into) and `check_request_unchanged` refuses an edited one; a run without a stored
digest has its request checked against its events (`request_vs_events`: the run id, max_steps and the
learning rate its steps logged). A request that is no longer what the run trained with
(`request_changed`) makes its folder unreadable (run_folder.read_run)."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

from google.protobuf import json_format

from py_trainer.core.errors import FailedPrecondition
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

REQUEST_FILE = "request.json"
REQUEST_DIGEST_FILE = "request.json.sha256"
"""``<sha256>  request.json`` (sha256sum's format), as runs stored it in their folder before DIGESTS_DIR;
still read for those runs."""
DIGESTS_DIR = ".request-digests"
"""``<runs_root>/.request-digests/<run_id>.sha256``: each run's request digest, written by the sidecar
alone when Train creates the run."""
RESUME_HINT = "a run resumes only with the request it started with: put the original back, or Train a new run"


def digest_file(folder: Path) -> Path:
    """Where the sidecar keeps the sha256 of run folder `folder`'s request.json (`DIGESTS_DIR`)."""
    return Path(folder).parent / DIGESTS_DIR / f"{Path(folder).name}.sha256"


def linear_lr(peak: float, warmup_ratio: float, max_steps: int, step: int) -> float:
    """transformers' default schedule (linear, warmup_steps = ceil(warmup_ratio x max_steps)) after `step` steps."""
    warm = math.ceil(max_steps * warmup_ratio)
    if step < warm:
        return peak * step / max(1, warm)
    return peak * max(0.0, (max_steps - step) / max(1, max_steps - warm))


def request_vs_events(request: pb.TrainRequest, run_id: str, events: list[pb.RunEvent]) -> str:
    """'' when `request` could be what the run in these events trained with, else what differs: the
    run id, the steps' max_steps, or a learning rate its steps logged that grpo.learning_rate does
    not give. transformers' Trainer logs at step s the rate step s trained at, read before its
    scheduler steps: `linear_lr(lr, warmup, max_steps, s - 1)`, compared to 1e-6 relative (the
    events keep doubles). A step that trained at 0 (the first, under warmup) tells no rate apart."""
    if request.run_id != run_id:
        return f"it names run {request.run_id!r}, its folder and events run {run_id!r}"
    g = request.grpo
    steps = [ev.train_step for ev in events if ev.WhichOneof("kind") == "train_step"]
    for st in steps:
        if g.HasField("max_steps") and st.max_steps and st.max_steps != g.max_steps:
            return f"grpo.max_steps is {g.max_steps}, its step {st.step} ran with max_steps {st.max_steps}"
    if g.HasField("learning_rate") and request.mode != pb.TRAIN_MODE_RANKED_PREFERENCE:
        for st in steps:
            got = st.metrics.get("learning_rate")
            if got is None or not st.max_steps or st.step < 1:
                continue
            want = linear_lr(g.learning_rate, g.warmup_ratio, st.max_steps, st.step - 1)
            if not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12 * abs(g.learning_rate)):
                return f"grpo.learning_rate is {g.learning_rate:g}, but its step {st.step} trained at {got:g}"
    return ""


def stored_digest(folder: Path) -> str:
    """The stored sha256 of the run's request.json ('' when none was stored); ValueError/OSError when it does not read."""
    for path in (digest_file(folder), Path(folder) / REQUEST_DIGEST_FILE):
        try:
            return path.read_text(encoding="ascii").split()[0]
        except FileNotFoundError:
            continue
    return ""


def check_request_unchanged(folder: Path, loaded: pb.TrainRequest,
                            events: list[pb.RunEvent] | None = None) -> pb.TrainRequest:
    """The run's request.json as Train stored it, or FAILED_PRECONDITION naming request.json: its
    bytes must match the stored sha256; without one (a folder from before digests, or a digest
    deleted) it must match the run's `events` (`request_vs_events`) and `loaded`, the request the
    registry read at startup; and it must parse."""
    folder = Path(folder)
    try:
        raw = (folder / REQUEST_FILE).read_bytes()
        request = json_format.Parse(raw.decode("utf-8"), pb.TrainRequest())
    except (OSError, json_format.Error, ValueError, RecursionError) as err:
        raise FailedPrecondition(REQUEST_FILE, f"does not read back ({type(err).__name__}: {str(err)[:200]}); "
                                               f"{RESUME_HINT}") from None
    if not request_changed(folder, raw, request, events or []) and request != loaded:
        raise FailedPrecondition(REQUEST_FILE, f"changed since the sidecar loaded it; {RESUME_HINT}")
    return request


def request_changed(folder: Path, raw: bytes, request: pb.TrainRequest, events: list[pb.RunEvent]) -> bool:
    """FAILED_PRECONDITION naming request.json when its bytes `raw` (parsed: `request`) are not what
    Train stored: they differ from the stored sha256, or, with none stored, `request` does not match
    the run's `events` (`request_vs_events`). Returns whether a digest was stored (False: only the
    events vouch for it)."""
    try:
        stored = stored_digest(folder)
    except (OSError, ValueError, IndexError) as err:
        raise FailedPrecondition(REQUEST_FILE, f"its digest {REQUEST_DIGEST_FILE} does not read back ({err}); "
                                               f"{RESUME_HINT}") from None
    now = hashlib.sha256(raw).hexdigest()
    if stored and now != stored:
        raise FailedPrecondition(REQUEST_FILE, f"changed since Train stored it (sha256 {now[:16]}..., "
                                               f"{REQUEST_DIGEST_FILE} says {stored[:16]}...); {RESUME_HINT}")
    why = "" if stored else request_vs_events(request, Path(folder).name, events)
    if why:
        raise FailedPrecondition(REQUEST_FILE, f"has no stored digest and does not match the run's events: {why}; "
                                               f"{RESUME_HINT}")
    return bool(stored)
