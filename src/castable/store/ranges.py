"""Ranged reads of one stored object as a seekable file, for stores whose objects are not local
files (S3): the ranges a reader will need fetched up front, near ones in one GET and long ones as
parallel pieces, every GET pinned to the ETag the object was committed with.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable, Sequence

from castable.errors import CorruptObjectError
from castable.store.base import ObjectStore
from castable.store.errors import ObjectNotFoundError, PreconditionFailedError
from castable.store.threads import shared_pool

_COALESCE_GAP = 1024 * 1024
"""Ranges to be read closer than this are fetched in one GET: a request costs S3 about as much
time as transferring a MiB."""
_PIECE = 8 * 1024 * 1024
"""A range longer than this is fetched as parallel GETs of about this size: one S3 connection
gives tens of MB/s, so a large range read in one GET waits on a single connection."""
_FETCHERS = 32
"""The threads for the pieces of ranged reads (they only wait on GETs)."""


class RangeReader(io.RawIOBase):
    """A seekable file over one stored object: every ``read`` is a ranged GET pinned to the ETag."""

    def __init__(self, store: ObjectStore, key: str, size: int, etag: str | None) -> None:
        super().__init__()
        self._store = store
        self._key = key
        self._size = size
        self._etag = etag
        self._pos = 0
        self._fetched: list[tuple[int, bytes]] = []

    def prefetch(self, ranges: Sequence[tuple[int, int]]) -> None:
        """GET ``ranges`` now, those closer than ``_COALESCE_GAP`` together and each longer than
        ``_PIECE`` as parallel GETs of equal pieces; later reads inside them are served from memory."""
        spans = [split(start, min(end, self._size), _PIECE) for start, end in coalesce(ranges, _COALESCE_GAP)]
        pieces = [piece for span in spans for piece in span]
        if len(pieces) == 1:
            got = iter([self._get(*pieces[0])])
        else:
            got = shared_pool("fetch", _FETCHERS).map(lambda piece: self._get(*piece), pieces)
        for span in spans:
            parts = [next(got) for _ in span]
            self._fetched.append((span[0][0], parts[0] if len(parts) == 1 else b"".join(parts)))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = base + offset
        return self._pos

    def read(self, size: int = -1) -> bytes:
        start = self._pos
        end = self._size if size is None or size < 0 else min(self._size, start + size)
        if end <= start:
            return b""
        data = next(
            (chunk[start - at : end - at] for at, chunk in self._fetched if at <= start and end <= at + len(chunk)),
            None,
        )
        if data is None:
            data = self._get(start, end)
        self._pos += len(data)
        return data

    def _get(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``, pinned to the committed ETag; exactly as many as asked for (a
        short answer, or a server that ignores ``Range``, would shift every byte after it)."""
        try:
            data = self._store.get(self._key, byte_range=(start, end), if_match=self._etag).data
        except PreconditionFailedError:
            raise CorruptObjectError(
                f"{self._key} changed since it was committed (ETag is no longer {self._etag})"
            ) from None
        except ObjectNotFoundError:
            raise CorruptObjectError(f"{self._key} is missing: deleted while it was being read") from None
        if len(data) != end - start:
            raise CorruptObjectError(f"{self._key}: asked for bytes {start}-{end - 1}, got {len(data)} bytes")
        return data

    def readall(self) -> bytes:
        return self.read(-1)


def split(start: int, end: int, piece: int) -> list[tuple[int, int]]:
    """``[start, end)`` as consecutive ranges of equal length, each at most ``piece`` long."""
    count = max(1, -(-(end - start) // piece))
    bounds = [start + (end - start) * i // count for i in range(count + 1)]
    return list(itertools.pairwise(bounds))


def coalesce(ranges: Iterable[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """``(start, end)`` ranges sorted and merged where they overlap or lie less than ``gap`` apart."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start - merged[-1][1] < gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
