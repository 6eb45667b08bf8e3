"""Objects of a table as their readers see them, to look for bytes that compression hides."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from castable.format import segment


def plain(key: str, data: bytes) -> bytes:
    """An object's content as its readers see it: segments decoded, Avro blocks inflated,
    Parquet decoded (and kept raw too); other objects as they are."""
    if key.startswith("segment/"):
        return repr(
            segment.decode(data, "data" if b"stats" in data[:4096] else "tombstone", key=key).to_pylist()
        ).encode()
    if key.endswith(".avro"):
        return data + b"".join(avro_blocks(data))
    if key.endswith(".parquet"):
        return data + repr(pq.read_table(pa.BufferReader(data)).to_pylist()).encode()
    return data


def avro_blocks(data: bytes) -> Iterator[bytes]:
    """The inflated blocks of an Avro container file (codec deflate or null)."""
    pos = 4

    def long() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)

    meta: dict[bytes, bytes] = {}
    while (count := long()) != 0:
        if count < 0:
            long()
        for _ in range(abs(count)):
            size = long()
            name = data[pos : pos + size]
            pos += size
            size = long()
            meta[name] = data[pos : pos + size]
            pos += size
    pos += 16  # the sync marker
    deflate = meta.get(b"avro.codec") == b"deflate"
    while pos < len(data):
        long()
        size = long()
        block = data[pos : pos + size]
        pos += size + 16
        yield zlib.decompress(block, -15) if deflate else block
