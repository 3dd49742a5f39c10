"""Artifacts of a run folder: listing with size and sha256, resumable chunked reads that serve
only the listed bytes, and the checkpoints' completion markers.

A file's sha256 is computed once, when it is listed (`file_artifacts`, for the result event), and
stored with it. A download of a listed file serves only bytes that still match that listing: a
size or digest that changed on disk is DATA_LOSS naming the artifact, never a digest computed
afresh (a client that trusted the stream's digest would take the changed bytes). Whether a file
still matches is hashed once per (inode, size, mtime) and kept in a small in-process cache, as is
the digest of a file that was never listed (worker.log), so fetching the last 10 bytes of a large
file again costs a seek, not a re-read. Reads are streamed in chunks of 256 KiB-1 MiB: memory
stays bounded by one chunk.

A checkpoint counts once the training callback has written its completion marker
(`CHECKPOINT_COMPLETE`, listing each file's size and sha256; HF writes checkpoint-N in place, so a
full disk or a kill mid-save leaves a folder without one). `find_checkpoint` verifies the listing:
a checkpoint damaged after its marker (truncated, edited) is skipped and named, and the newest
intact one is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import BinaryIO, Iterator, Mapping

import grpc

from py_trainer.core.atomic import TEMP_SUFFIX, write_json_atomic
from py_trainer.core.errors import InvalidArgument, RequestError
from py_trainer.core.paths import resolve_under
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

MIN_CHUNK = 256 * 1024
MAX_CHUNK = 1024 * 1024
DEFAULT_CHUNK = 512 * 1024
DIGEST_CACHE_SIZE = 1024
CHECKPOINT_COMPLETE = "checkpoint-complete.json"
"""Written into checkpoints/checkpoint-N by the training callback once HF has saved all of it,
with every file's size and sha256; a checkpoint folder without it does not count."""
# Written by the other ranks while rank 0 lists the checkpoint: not in the listing.
OTHER_RANK_FILE_RE = re.compile(r"rng_state_[1-9][0-9]*\.pth")

_digests: OrderedDict[tuple, str] = OrderedDict()
_digests_lock = threading.Lock()


class DataLoss(RequestError):
    """Stored bytes that no longer match what was recorded about them."""

    code = grpc.StatusCode.DATA_LOSS


def sha256_of(path: Path) -> str:
    """The sha256 of a file, read in MAX_CHUNK pieces."""
    with open(path, "rb") as f:
        return sha256_of_open(f)


def sha256_of_open(f: BinaryIO) -> str:
    """The sha256 of the open file `f` from its start (pread: `f`'s position is left alone)."""
    digest = hashlib.sha256()
    off = 0
    while piece := os.pread(f.fileno(), MAX_CHUNK, off):
        digest.update(piece)
        off += len(piece)
    return digest.hexdigest()


def cached_sha256(path: Path, st: os.stat_result, f: BinaryIO | None = None) -> str:
    """sha256 of `path` (read through `f` when given) as it was at `st`, computed at most once per
    (file, size, mtime)."""
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _digests_lock:
        if key in _digests:
            _digests.move_to_end(key)
            return _digests[key]
    value = sha256_of(path) if f is None else sha256_of_open(f)
    with _digests_lock:
        _digests[key] = value
        while len(_digests) > DIGEST_CACHE_SIZE:
            _digests.popitem(last=False)
    return value


def _changed_since_listed(rel: str, known: pb.Artifact, size: int, digest: str = "") -> DataLoss:
    what = (f"is {size} bytes on disk, listed as {known.size_bytes} bytes" if size != known.size_bytes else
            f"has sha256 {digest[:16]}... on disk, listed as {known.sha256[:16]}...")
    return DataLoss("path", f"{rel} {what}: it changed after the run listed it, so it is not served "
                            "(the run's result no longer describes it)")


def artifact_chunks(folder: Path, rel: str, offset: int, chunk_size: int,
                    listed: Mapping[str, pb.Artifact] | None = None) -> Iterator[pb.DownloadArtifactResponse]:
    """Yield DownloadArtifactResponse chunks of one file in a run folder, from `offset`, read from
    disk piece by piece; the last chunk carries the sha256 of the whole file. A listed file
    (`listed`: path -> Artifact) is checked against its listing before the first chunk (DATA_LOSS
    naming it when size or sha256 changed) and again at the end (changed while it was read); its
    chunk carries the listed sha256. An unlisted file gets a cached digest."""
    path = resolve_under(folder, rel, "path")
    if not path.is_file():
        raise InvalidArgument("path", f"{rel!r} is not a file")
    chunk = max(MIN_CHUNK, min(MAX_CHUNK, chunk_size or DEFAULT_CHUNK))
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        total = st.st_size
        if offset > total:
            raise InvalidArgument("offset", f"{offset} is past the end of the file ({total} bytes)")
        known = (listed or {}).get(rel)
        if known is not None:
            if total != known.size_bytes:
                raise _changed_since_listed(rel, known, total)
            on_disk = cached_sha256(path, st, f)
            if on_disk != known.sha256:
                raise _changed_since_listed(rel, known, total, on_disk)
        f.seek(offset)
        off = offset
        while True:
            piece = f.read(min(chunk, total - off))
            last = off + len(piece) >= total or not piece
            digest = ""
            if last:
                now = os.fstat(f.fileno())
                if known is not None and (now.st_size, now.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
                    raise DataLoss("path", f"{rel} changed on disk while it was read; download it again")
                digest = known.sha256 if known is not None else cached_sha256(path, st, f)
            yield pb.DownloadArtifactResponse(offset=off, data=piece, total_size=total, last=last, sha256=digest)
            off += len(piece)
            if last:
                return


def file_artifacts(folder: Path, rels: list[str]) -> list[pb.Artifact]:
    """Artifact entries (path, size, sha256) for the files and folders `rels` of a run folder."""
    arts = []
    for rel in rels:
        p = Path(folder) / rel
        if p.is_dir():
            arts.extend(file_artifacts(folder, sorted(str(q.relative_to(folder)) for q in p.rglob("*") if q.is_file())))
        elif p.is_file():
            arts.append(pb.Artifact(path=rel, size_bytes=p.stat().st_size, sha256=sha256_of(p)))
    return arts


# ---------------------------------------------------------------------------------------------
# Checkpoints: the completion marker and its verification


def write_checkpoint_marker(ckdir: Path, step: int) -> None:
    """Mark checkpoint folder `ckdir` complete: its step, the time, and each file's size and sha256."""
    files = {}
    for p in sorted(ckdir.rglob("*")):
        if p.is_file() and p.name != CHECKPOINT_COMPLETE and not p.name.endswith(TEMP_SUFFIX) \
                and not OTHER_RANK_FILE_RE.fullmatch(p.name):
            files[str(p.relative_to(ckdir))] = {"size": p.stat().st_size, "sha256": sha256_of(p)}
    write_json_atomic(ckdir / CHECKPOINT_COMPLETE, {"step": step, "time": time.time(), "files": files})


def safetensors_damage(path: Path, rel: str) -> str:
    """'' when the safetensors file `path` is as long as its header says, else what is wrong."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            n = int.from_bytes(f.read(8), "little")
            if size < 8 or 8 + n > size:
                return f"{rel} is truncated ({size} bytes, shorter than its safetensors header)"
            header = json.loads(f.read(n))
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
        return f"{rel}: its safetensors header does not read back ({type(err).__name__})"
    if 8 + n + end > size:
        return f"{rel} is truncated ({size} bytes, its safetensors header says {8 + n + end})"
    return ""


def checkpoint_damage(ckdir: Path) -> str:
    """'' when the marked checkpoint `ckdir` is as its marker lists it, else what differs. A marker
    written before markers listed files (step and time only) has its safetensors files checked
    against their own headers."""
    try:
        marker = json.loads((ckdir / CHECKPOINT_COMPLETE).read_text(encoding="utf-8"))
        files = marker.get("files") if isinstance(marker, dict) else None
        if files is None:
            return next((why for p in sorted(ckdir.glob("*.safetensors"))
                         if (why := safetensors_damage(p, p.name))), "")
        listed = [(str(rel), int(want["size"]), str(want["sha256"])) for rel, want in files.items()]
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
        return f"{CHECKPOINT_COMPLETE} does not read back ({type(err).__name__}: {str(err)[:200]})"
    for rel, size, sha in listed:
        p = ckdir / rel
        try:
            got = p.stat().st_size
        except OSError:
            return f"{rel} is missing"
        if got != size:
            return f"{rel} is {got} bytes, its completion marker says {size}"
        if sha256_of(p) != sha:
            return f"{rel} has another sha256 than its completion marker says"
    return ""


def find_checkpoint(folder: Path) -> tuple[str, list[tuple[int, str]]]:
    """The newest marked checkpoint of run folder `folder` that is intact (relative path, '' if
    none), and the newer marked ones that are damaged: (step, "checkpoints/checkpoint-N: <what>")."""
    ckdir = Path(folder) / "checkpoints"
    if not ckdir.is_dir():
        return "", []
    marked = []
    for d in ckdir.iterdir():
        name, _, num = d.name.partition("-")
        if d.is_dir() and name == "checkpoint" and num.isdigit() and (d / CHECKPOINT_COMPLETE).is_file():
            marked.append((int(num), d))
    damaged = []
    inside = Path(os.path.realpath(folder))
    for step, d in sorted(marked, key=lambda sd: sd[0], reverse=True):
        real = Path(os.path.realpath(d))
        why = f"resolves to {real}, outside the run folder" if inside not in real.parents else checkpoint_damage(d)
        if not why:
            return f"checkpoints/{d.name}", damaged
        damaged.append((step, f"checkpoints/{d.name}: {why}"))
    return "", damaged


def latest_checkpoint(folder: Path) -> str:
    """Relative path of the newest complete, intact checkpoint folder of a run, or ''."""
    return find_checkpoint(folder)[0]
