"""A small Thrift compact-protocol codec that keeps every field, known or not.

Parquet footers are Thrift structs in the compact protocol. To splice a row group castable
must change a few fields (offsets, row counts, statistics) and keep every other byte as the
writer produced it, including fields newer than this code. So this codec decodes a struct
into an ordered list of ``(field id, wire type, value)`` without a schema, and re-encodes it
canonically (short field headers when the id delta is 1-15, minimal varints), which is what
every Thrift library writes: decoding then encoding a footer gives back the same bytes.

Reference: the Thrift compact protocol specification (thrift/doc/specs/thrift-compact-protocol.md).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT, UUID = range(14)


class ThriftError(ValueError):
    """The bytes are not a valid compact-protocol struct."""


@dataclass
class ThriftList:
    """A list or set: element wire type and the decoded elements."""

    elem_type: int
    items: list[Any]
    is_set: bool = False


@dataclass
class ThriftMap:
    key_type: int
    value_type: int
    items: list[tuple[Any, Any]]


@dataclass
class Struct:
    """A decoded struct: its fields in wire order, each ``[id, type, value]``."""

    fields: list[list[Any]] = field(default_factory=list)

    def get(self, fid: int, default: Any = None) -> Any:
        for f in self.fields:
            if f[0] == fid:
                return f[2]
        return default

    def has(self, fid: int) -> bool:
        return any(f[0] == fid for f in self.fields)

    def set(self, fid: int, ftype: int, value: Any) -> None:
        """Replace field ``fid``'s value, or insert it in id order."""
        for f in self.fields:
            if f[0] == fid:
                f[1], f[2] = ftype, value
                return
        index = next((i for i, f in enumerate(self.fields) if f[0] > fid), len(self.fields))
        self.fields.insert(index, [fid, ftype, value])

    def remove(self, fid: int) -> None:
        self.fields = [f for f in self.fields if f[0] != fid]


class _Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ThriftError("unexpected end of data")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ThriftError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ThriftError("length past end of data")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return bytes(out)

    def value(self, t: int) -> Any:
        if t in (TRUE, FALSE):  # a bool inside a collection: one byte, kept as written
            return self.byte()
        if t == BYTE:
            return struct.unpack("b", self.take(1))[0]
        if t in (I16, I32, I64):
            return self.zigzag()
        if t == DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if t == BINARY:
            return self.take(self.varint())
        if t == UUID:
            return self.take(16)
        if t in (LIST, SET):
            header = self.byte()
            size = header >> 4
            if size == 15:
                size = self.varint()
            elem = header & 0x0F
            return ThriftList(elem, [self.value(elem) for _ in range(size)], is_set=t == SET)
        if t == MAP:
            size = self.varint()
            if size == 0:
                return ThriftMap(0, 0, [])
            kinds = self.byte()
            k, v = kinds >> 4, kinds & 0x0F
            return ThriftMap(k, v, [(self.value(k), self.value(v)) for _ in range(size)])
        if t == STRUCT:
            return self.struct()
        raise ThriftError(f"unknown compact type {t}")

    def struct(self) -> Struct:
        s = Struct()
        last = 0
        while True:
            header = self.byte()
            t = header & 0x0F
            if t == STOP:
                return s
            delta = header >> 4
            fid = last + delta if delta else self.zigzag()
            value = (t == TRUE) if t in (TRUE, FALSE) else self.value(t)
            s.fields.append([fid, t, value])
            last = fid


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, n: int) -> None:
        while n > 0x7F:
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7
        self.out.append(n)

    def zigzag(self, n: int) -> None:
        self.varint((n << 1) ^ (n >> 63) if n < 0 else n << 1)

    def value(self, t: int, v: Any) -> None:
        if t in (TRUE, FALSE):
            self.out.append(v)
        elif t == BYTE:
            self.out += struct.pack("b", v)
        elif t in (I16, I32, I64):
            self.zigzag(v)
        elif t == DOUBLE:
            self.out += struct.pack("<d", v)
        elif t == BINARY:
            self.varint(len(v))
            self.out += v
        elif t == UUID:
            self.out += v
        elif t in (LIST, SET):
            size = len(v.items)
            if size < 15:
                self.out.append(size << 4 | v.elem_type)
            else:
                self.out.append(0xF0 | v.elem_type)
                self.varint(size)
            for item in v.items:
                self.value(v.elem_type, item)
        elif t == MAP:
            self.varint(len(v.items))
            if v.items:
                self.out.append(v.key_type << 4 | v.value_type)
                for k, item in v.items:
                    self.value(v.key_type, k)
                    self.value(v.value_type, item)
        elif t == STRUCT:
            self.struct(v)
        else:
            raise ThriftError(f"unknown compact type {t}")

    def struct(self, s: Struct) -> None:
        last = 0
        for fid, t, v in s.fields:
            if t in (TRUE, FALSE):
                t = TRUE if v else FALSE
            delta = fid - last
            if 0 < delta <= 15:
                self.out.append(delta << 4 | t)
            else:
                self.out.append(t)
                self.zigzag(fid)
            if t not in (TRUE, FALSE):
                self.value(t, v)
            last = fid
        self.out.append(STOP)


def decode_struct(data: bytes, offset: int = 0) -> tuple[Struct, int]:
    """Decode one struct from ``data`` at ``offset``; return it and the bytes it used."""
    reader = _Reader(data, offset)
    try:
        s = reader.struct()
    except (struct.error, IndexError, RecursionError) as e:
        raise ThriftError(str(e)) from None
    return s, reader.pos - offset


def encode_struct(s: Struct) -> bytes:
    writer = _Writer()
    writer.struct(s)
    return bytes(writer.out)
