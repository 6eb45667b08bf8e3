"""Parquet bloom filters: which values a column chunk certainly does not hold (docs/format.md section 5).

A table whose ``write.parquet.bloom-filter-columns`` names columns gets a split-block bloom filter
per row group for each (pyarrow writes them). A read whose filter asks for points of such a
column (``id = 7``, ``id IN (...)``) skips the row groups whose filter lacks every point, where
min/max statistics cannot tell (random keys, UUIDs). This module reads the Parquet format's
filter: a Thrift ``BloomFilterHeader``, then blocks of eight 32-bit words; a value is hashed with
xxHash64 over its plain encoding, and is absent when one of its eight bits in its block is clear.
pyarrow writes these filters but has no API to read them, so the check is written here, small.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from castable.parquet.thrift import ThriftError, decode_struct

_M = (1 << 64) - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_SALT = (0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31)
# BloomFilterHeader: numBytes, algorithm (union: 1 = split block), hash (1 = xxHash64), compression (1 = none)
_NUM_BYTES, _ALGORITHM, _HASH, _COMPRESSION = 1, 2, 3, 4
HEADER_GUESS = 64
"""Bytes enough for any header pyarrow, Spark or parquet-mr writes."""


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    """xxHash64 of ``data`` (the hash Parquet's bloom filters use, with seed 0)."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        while i + 32 <= n:
            v = [_round(v[k], int.from_bytes(data[i + 8 * k : i + 8 * k + 8], "little")) for k in range(4)]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for lane in v:
            h = (((h ^ _round(0, lane)) * _P1) + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i : i + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i : i + 4], "little") * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


def plain_values(values: pa.Array) -> list[bytes] | None:
    """The Parquet plain encoding of each non-null value (what the filter hashes); ``None`` for
    a type this module does not encode (decimals, nested), so nothing is ruled out."""
    t = values.type
    values = values.drop_null()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return [v.encode() for v in values.to_pylist()]
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return list(values.to_pylist())
    if pa.types.is_floating(t) and t.bit_width in (32, 64):
        fmt = "<f" if t.bit_width == 32 else "<d"
        return [struct.pack(fmt, v) for v in values.to_pylist()]
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        width = 8 if t.bit_width == 64 else 4 if t.bit_width <= 32 else 0
        if not width or pa.types.is_date64(t):  # date64 is stored as int32 days
            return None
        ints = values.view(pa.int64() if t.bit_width == 64 else pa.int32()) if t.bit_width in (32, 64) else None
        raw = (ints if ints is not None else values.cast(pa.int32())).to_numpy(zero_copy_only=False)
        stored = raw.astype("<i8" if width == 8 else "<i4")
        return [stored[i : i + 1].tobytes() for i in range(len(stored))]
    return None


@dataclass(frozen=True)
class BloomFilter:
    """One column chunk's split-block bloom filter."""

    words: np.ndarray
    """The bitset as blocks of eight little-endian 32-bit words, shape (blocks, 8)."""

    @classmethod
    def decode(cls, raw: bytes) -> BloomFilter:
        """A filter from its bytes: header, then bitset; ``ValueError`` for what is not one
        (another algorithm, hash or compression than the format defines today)."""
        try:
            header, at = decode_struct(raw)
        except ThriftError as e:
            raise ValueError(f"not a bloom filter header: {e}") from None
        size = header.get(_NUM_BYTES)
        for fid in (_ALGORITHM, _HASH, _COMPRESSION):
            union = header.get(fid)
            if union is None or not union.has(1):
                raise ValueError("a bloom filter of an algorithm, hash or compression this reader does not know")
        if not isinstance(size, int) or size <= 0 or size % 32 or at + size > len(raw):
            raise ValueError(f"a bloom filter of {size} bytes where {len(raw) - at} remain")
        return cls(np.frombuffer(raw, dtype="<u4", count=size // 4, offset=at).reshape(-1, 8))

    def may_contain(self, encoded: bytes) -> bool:
        """False only if ``encoded`` (a plain-encoded value) is certainly not in the chunk."""
        h = xxh64(encoded)
        block = self.words[((h >> 32) * len(self.words)) >> 32]
        key = h & 0xFFFFFFFF
        return all((int(block[i]) >> (((key * salt) & 0xFFFFFFFF) >> 27)) & 1 for i, salt in enumerate(_SALT))

    def lacks_all(self, values: pa.Array) -> bool:
        """Whether none of ``values`` can be in the chunk (False when they cannot be encoded)."""
        encoded = plain_values(values)
        return encoded is not None and not any(self.may_contain(v) for v in encoded)
