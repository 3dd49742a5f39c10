"""Artifacts of a run folder: listing with size and sha256, and resumable chunked reads.

A file's sha256 is computed once, when it is listed (`file_artifacts`, for the result event), and
stored with it; a download of a listed file serves that stored digest. A file that was never
listed (worker.log, a checkpoint) is hashed once per (inode, size, mtime) and the digest is kept in
a small in-process cache, so fetching the last 10 bytes of a large file again costs a seek, not a
re-read. Reads are streamed in chunks of 256 KiB-1 MiB: memory stays bounded by one chunk.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Iterator, Mapping

from py_trainer.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.paths import resolve_under

MIN_CHUNK = 256 * 1024
MAX_CHUNK = 1024 * 1024
DEFAULT_CHUNK = 512 * 1024
DIGEST_CACHE_SIZE = 1024

_digests: OrderedDict[tuple, str] = OrderedDict()
_digests_lock = threading.Lock()


def sha256_of(path: Path) -> str:
    """The sha256 of a file, read in MAX_CHUNK pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(MAX_CHUNK):
            digest.update(piece)
    return digest.hexdigest()


def cached_sha256(path: Path, st: os.stat_result) -> str:
    """sha256 of `path` as it was at `st`, computed at most once per (file, size, mtime)."""
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _digests_lock:
        if key in _digests:
            _digests.move_to_end(key)
            return _digests[key]
    value = sha256_of(path)
    with _digests_lock:
        _digests[key] = value
        while len(_digests) > DIGEST_CACHE_SIZE:
            _digests.popitem(last=False)
    return value


def artifact_chunks(folder: Path, rel: str, offset: int, chunk_size: int,
                    listed: Mapping[str, pb.Artifact] | None = None) -> Iterator[pb.DownloadArtifactResponse]:
    """Yield DownloadArtifactResponse chunks of one file in a run folder, from `offset`, read from
    disk piece by piece; the last chunk carries the sha256 of the whole file: the one stored when
    it was listed (`listed`: path -> Artifact) when the size still matches, else a cached digest."""
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
        f.seek(offset)
        off = offset
        while True:
            piece = f.read(min(chunk, total - off))
            last = off + len(piece) >= total or not piece
            digest = ""
            if last:
                digest = known.sha256 if known is not None and known.size_bytes == total else cached_sha256(path, st)
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
