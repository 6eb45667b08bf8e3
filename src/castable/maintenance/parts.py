"""The multipart upload of a spliced object: its bytes as ranges of the old object (copied
server-side with UploadPartCopy) and new bytes, grouped into parts that obey S3's size rules,
then uploaded, or aborted if anything fails (docs/format.md section 11).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from castable.format.manifest import DataFile
from castable.maintenance.rowgroups import Transfer, get_range
from castable.store import MAX_PART_SIZE, MIN_PART_SIZE, ObjectInfo, ObjectStore


@dataclass(frozen=True)
class Copy:
    """Bytes [start, end) of the old object."""

    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Data:
    """New bytes made by the client."""

    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


Segment = Copy | Data


@dataclass(frozen=True)
class CopyPart:
    """A part copied server-side (UploadPartCopy)."""

    source: Copy


@dataclass(frozen=True)
class UploadPart:
    """A part uploaded by the client: new bytes, and old ranges downloaded to widen it."""

    pieces: tuple[Segment, ...]

    @property
    def size(self) -> int:
        return sum(p.size for p in self.pieces)


Part = CopyPart | UploadPart


def plan_parts(segments: Iterable[Segment], min_size: int = MIN_PART_SIZE, max_size: int = MAX_PART_SIZE) -> list[Part]:
    """Group the new object's segments into multipart parts that obey S3's size rules.

    A copy range of at least ``min_size`` becomes copy parts (split under ``max_size``);
    new bytes accumulate into an upload part, which is widened with the head of the next copy
    range until it reaches ``min_size`` (or swallows a range too small to stand alone). Only
    the last part may be small.
    """
    parts: list[Part] = []
    pending: list[Segment] = []

    def pending_size() -> int:
        return sum(p.size for p in pending)

    def flush() -> None:
        if pending:
            parts.append(UploadPart(tuple(pending)))
            pending.clear()

    for seg in segments:
        if seg.size == 0:
            continue
        if isinstance(seg, Data):
            pending.append(seg)
            continue
        if pending and pending_size() < min_size:
            need = min_size - pending_size()
            if seg.size - need < min_size:
                pending.append(seg)
                continue
            pending.append(Copy(seg.start, seg.start + need))
            seg = Copy(seg.start + need, seg.end)
        flush()
        if seg.size < min_size:
            pending.append(seg)
            continue
        pieces = math.ceil(seg.size / max_size)
        bounds = [seg.start + seg.size * i // pieces for i in range(pieces + 1)]
        parts.extend(CopyPart(Copy(a, b)) for a, b in itertools.pairwise(bounds))
    flush()
    return parts


def coalesce(segments: Iterable[Segment]) -> list[Segment]:
    """Merge adjacent copy ranges that continue each other, and adjacent new bytes."""
    out: list[Segment] = []
    for seg in segments:
        last = out[-1] if out else None
        if isinstance(seg, Copy) and isinstance(last, Copy) and last.end == seg.start:
            out[-1] = Copy(last.start, seg.end)
        elif isinstance(seg, Data) and isinstance(last, Data):
            out[-1] = Data(last.data + seg.data)
        else:
            out.append(seg)
    return out


def upload(store: ObjectStore, old: DataFile, key: str, parts: list[Part], transfer: Transfer) -> ObjectInfo:
    """Publish ``parts`` as the new object ``key``; the upload is aborted if anything fails."""
    upload_id = store.create_multipart(key)
    try:
        done = []
        for number, part in enumerate(parts, start=1):
            if isinstance(part, CopyPart):
                r = part.source
                done.append(
                    store.upload_part_copy(key, upload_id, number, old.path, (r.start, r.end), source_etag=old.etag)
                )
                transfer.copied += r.size
            else:
                data = b"".join(
                    p.data if isinstance(p, Data) else get_range(store, old, p.start, p.end, transfer)
                    for p in part.pieces
                )
                done.append(store.upload_part(key, upload_id, number, data))
                transfer.uploaded += len(data)
        return store.complete_multipart(key, upload_id, done)
    except BaseException:
        store.abort_multipart(key, upload_id)
        raise
