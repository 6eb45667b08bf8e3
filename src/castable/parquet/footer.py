"""Parquet footers as editable Thrift structs: the hand-written part of the splice (docs/format.md section 11).

A Parquet file is ``PAR1``, the row groups' column chunks, optional page indexes and bloom
filters, then the footer: a compact-protocol ``FileMetaData``, its 4-byte little-endian
length and ``PAR1``. Splicing replaces some row groups' bytes, which moves every later byte,
so every absolute offset in the footer must be relocated. This module knows exactly which
fields hold offsets (field ids from parquet.thrift) and leaves every other field untouched.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import cast

import pyarrow as pa
import pyarrow.parquet as pq

from castable.parquet.thrift import (
    I16,
    I32,
    I64,
    LIST,
    STRUCT,
    Struct,
    ThriftError,
    ThriftList,
    decode_struct,
    encode_struct,
)

MAGIC = b"PAR1"
TAIL_SIZE = 8  # footer length (uint32 LE) + magic

# FileMetaData
FILE_SCHEMA, FILE_NUM_ROWS, FILE_ROW_GROUPS, FILE_COLUMN_ORDERS = 2, 3, 4, 7
# RowGroup
RG_COLUMNS, RG_TOTAL_BYTE_SIZE, RG_NUM_ROWS, RG_FILE_OFFSET, RG_TOTAL_COMPRESSED_SIZE, RG_ORDINAL = 1, 2, 3, 5, 6, 7
# ColumnChunk
CC_FILE_OFFSET, CC_META_DATA = 2, 3
CC_OFFSET_INDEX_OFFSET, CC_OFFSET_INDEX_LENGTH, CC_COLUMN_INDEX_OFFSET, CC_COLUMN_INDEX_LENGTH = 4, 5, 6, 7
# ColumnMetaData
CMD_ENCODINGS, CMD_PATH, CMD_CODEC, CMD_NUM_VALUES, CMD_TOTAL_COMPRESSED_SIZE = 2, 3, 4, 5, 7
CMD_DATA_PAGE_OFFSET, CMD_INDEX_PAGE_OFFSET, CMD_DICTIONARY_PAGE_OFFSET = 9, 10, 11
CMD_STATISTICS, CMD_ENCODING_STATS, CMD_BLOOM_FILTER_OFFSET, CMD_BLOOM_FILTER_LENGTH = 12, 13, 14, 15

# OffsetIndex, PageLocation
OI_PAGE_LOCATIONS, PL_OFFSET = 1, 1

_CMD_OFFSETS = (CMD_DATA_PAGE_OFFSET, CMD_INDEX_PAGE_OFFSET, CMD_DICTIONARY_PAGE_OFFSET)
_CC_INDEX_FIELDS = (CC_OFFSET_INDEX_OFFSET, CC_OFFSET_INDEX_LENGTH, CC_COLUMN_INDEX_OFFSET, CC_COLUMN_INDEX_LENGTH)

INDEX_KINDS = ("bloom_filter", "column_index", "offset_index")
"""The structures a column chunk may have outside its pages, in the order pyarrow writes them."""
_INDEX_FIELDS = {
    "bloom_filter": (CC_META_DATA, CMD_BLOOM_FILTER_OFFSET, CMD_BLOOM_FILTER_LENGTH),
    "column_index": (None, CC_COLUMN_INDEX_OFFSET, CC_COLUMN_INDEX_LENGTH),
    "offset_index": (None, CC_OFFSET_INDEX_OFFSET, CC_OFFSET_INDEX_LENGTH),
}


class FooterError(ValueError):
    """The bytes are not a Parquet footer this code can edit."""


@dataclass
class Footer:
    """A decoded ``FileMetaData`` and where its bytes start in the file."""

    metadata: Struct
    offset: int

    @classmethod
    def from_tail(cls, tail: bytes, file_size: int) -> Footer:
        """Decode from the last bytes of a file (they must include the whole footer)."""
        if len(tail) < TAIL_SIZE or tail[-4:] != MAGIC:
            raise FooterError("no Parquet magic at the end of the file")
        length = struct.unpack("<I", tail[-8:-4])[0]
        if length + TAIL_SIZE > len(tail):
            raise FooterError(f"footer of {length} bytes is longer than the {len(tail)} bytes given")
        raw = tail[-TAIL_SIZE - length : -TAIL_SIZE]
        try:
            metadata, used = decode_struct(raw)
        except ThriftError as e:
            raise FooterError(f"footer is not valid Thrift: {e}") from None
        if used != length:
            raise FooterError("footer length does not match its content")
        return cls(metadata, file_size - TAIL_SIZE - length)

    @staticmethod
    def length_from_tail(tail: bytes) -> int:
        if len(tail) < TAIL_SIZE or tail[-4:] != MAGIC:
            raise FooterError("no Parquet magic at the end of the file")
        return int(struct.unpack("<I", tail[-8:-4])[0])

    @property
    def row_groups(self) -> list[Struct]:
        return cast(list[Struct], self.metadata.get(FILE_ROW_GROUPS).items)

    @property
    def columns_bytes(self) -> bytes:
        """The encoded schema elements below the root, to check that two files lay out their
        columns identically (writers name the root differently: ``schema``, ``spark_schema``)."""
        columns = ThriftList(STRUCT, self.metadata.get(FILE_SCHEMA).items[1:])
        return encode_struct(Struct([[FILE_SCHEMA, LIST, columns]]))

    def row_group_span(self, index: int) -> tuple[int, int]:
        """Byte range [start, end) of a row group's column chunks, up to whatever the file holds
        next (another row group, an index, a bloom filter or the footer): some writers record a
        chunk's size a few bytes short, and readers pad their reads for them, so must castable."""
        start, end = row_group_span(self.row_groups[index])
        return start, self.next_structure(end)

    def next_structure(self, at: int) -> int:
        """Where the first column chunk, index, bloom filter or the footer at or after byte
        ``at`` begins: the end of whatever lies before it, read generously (``at`` itself if
        nothing does: a footer that names bytes past its own start)."""
        i = bisect.bisect_left(self._starts, at)
        return self._starts[i] if i < len(self._starts) else at

    @cached_property
    def _starts(self) -> list[int]:
        """Where each column chunk, index and bloom filter begins, and the footer, in order."""
        starts = [self.offset]
        for rg in self.row_groups:
            for chunk in rg.get(RG_COLUMNS).items:
                meta = chunk.get(CC_META_DATA)
                starts.append(meta.get(CMD_DICTIONARY_PAGE_OFFSET) or meta.get(CMD_DATA_PAGE_OFFSET))
                starts += [extent[0] for kind in _INDEX_FIELDS if (extent := index_extent(chunk, kind))]
                bloom = meta.get(CMD_BLOOM_FILTER_OFFSET)
                starts += [bloom] if bloom else []
        return sorted(starts)

    def serialize(self) -> bytes:
        """The footer as it ends a file: Thrift bytes, their length, ``PAR1``."""
        raw = encode_struct(self.metadata)
        return raw + struct.pack("<I", len(raw)) + MAGIC

    @cached_property
    def _schema(self) -> pq.ParquetSchema:
        """The schema, parsed once per footer for the properties below."""
        return self.pyarrow_metadata().schema

    @cached_property
    def _leaves(self) -> list[pq.ColumnSchema]:
        return [self._schema.column(i) for i in range(len(self._schema))]

    @cached_property
    def int96_columns(self) -> list[str]:
        """The columns stored as INT96 timestamps (Spark's and Impala's default), by dotted path:
        worked out once per footer, since every row group read asks."""
        return [c.path for c in self._leaves if c.physical_type == "INT96"]

    @cached_property
    def leaf_layout(self) -> tuple[tuple[str, int, int, int], ...]:
        """Per leaf column, in order: physical type, fixed length, maximum definition and
        repetition levels. Two files that agree on these encode the same values in the same page
        bytes, whatever their schemas call the columns or how they annotate them (Spark's
        two-level lists and ``bag``/``array`` names, converted types without logical types)."""
        return tuple(
            (c.physical_type, c.length or 0, c.max_definition_level, c.max_repetition_level) for c in self._leaves
        )

    @cached_property
    def float_widths(self) -> tuple[int | None, ...]:
        """Per leaf column, the byte width of its floating-point values (FLOAT, DOUBLE, or
        FLOAT16 as a 2-byte fixed-length array), ``None`` for any other type."""
        widths = {"FLOAT": 4, "DOUBLE": 8}
        return tuple(
            2
            if c.physical_type == "FIXED_LEN_BYTE_ARRAY" and c.logical_type.type == "FLOAT16"
            else widths.get(c.physical_type)
            for c in self._leaves
        )

    @cached_property
    def column_orders(self) -> tuple[int | None, ...]:
        """Per leaf column, the ``ColumnOrder`` the footer declares by its union field (1 the
        type-defined order, 2 the IEEE 754 total order), ``None`` where it declares none."""
        orders = self.metadata.get(FILE_COLUMN_ORDERS)
        found = [o.fields[0][0] if o.fields else None for o in orders.items] if orders is not None else []
        return tuple(found[i] if i < len(found) else None for i in range(len(self._leaves)))

    @cached_property
    def integer_decimals(self) -> bool:
        """Whether the file stores decimals as INT32/INT64 (Spark's default up to 18 digits)."""
        return any(
            c.physical_type in ("INT32", "INT64") and "DECIMAL" in (c.logical_type.type, c.converted_type)
            for c in self._leaves
        )

    @cached_property
    def lists_named_item(self) -> bool:
        """Whether the file's lists name their elements ``item`` (pyarrow's layout before Parquet's
        ``element``, ``use_compliant_nested_type=False``), so a re-encoding must too."""
        return any(_names_list_items(f.type) for f in self._schema.to_arrow_schema())

    def pyarrow_metadata(self) -> pq.FileMetaData:
        """The same footer parsed by pyarrow (for statistics and row counts)."""
        return pq.read_metadata(pa.BufferReader(self.serialize()))


def _names_list_items(t: pa.DataType) -> bool:
    """Whether ``t`` holds a list whose element field is named ``item``."""
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return t.value_field.name == "item" or _names_list_items(t.value_type)
    if pa.types.is_map(t):
        return _names_list_items(t.key_type) or _names_list_items(t.item_type)
    if pa.types.is_struct(t):
        return any(_names_list_items(t.field(i).type) for i in range(t.num_fields))
    return False


def row_group_span(rg: Struct) -> tuple[int, int]:
    start = end = None
    for chunk in rg.get(RG_COLUMNS).items:
        meta = chunk.get(CC_META_DATA)
        dictionary = meta.get(CMD_DICTIONARY_PAGE_OFFSET)
        first = dictionary if dictionary else meta.get(CMD_DATA_PAGE_OFFSET)
        last = first + meta.get(CMD_TOTAL_COMPRESSED_SIZE)
        start = first if start is None else min(start, first)
        end = last if end is None else max(end, last)
    if start is None or end is None:
        raise FooterError("row group has no columns")
    return start, end


def relocate_row_group(rg: Struct, move: Callable[[int], int]) -> None:
    """Rewrite the absolute offsets of a row group's pages through ``move`` (in place), and drop
    its references to page indexes and bloom filters, which live elsewhere in the file: the
    caller places those and records them with :func:`set_index_extent`."""
    if rg.has(RG_FILE_OFFSET):
        rg.set(RG_FILE_OFFSET, I64, move(rg.get(RG_FILE_OFFSET)))
    for chunk in rg.get(RG_COLUMNS).items:
        if chunk.get(CC_FILE_OFFSET):
            chunk.set(CC_FILE_OFFSET, I64, move(chunk.get(CC_FILE_OFFSET)))
        meta = chunk.get(CC_META_DATA)
        for fid in _CMD_OFFSETS:
            if meta.has(fid):
                meta.set(fid, I64, move(meta.get(fid)))
        for kind in INDEX_KINDS:
            set_index_extent(chunk, kind, None)


def index_extent(chunk: Struct, kind: str) -> tuple[int, int] | None:
    """Byte range [start, end) of a column chunk's bloom filter, column index or offset index;
    ``None`` if it has none (or, for a bloom filter, if the writer did not record its length)."""
    holder, offset_field, length_field = _INDEX_FIELDS[kind]
    s = chunk if holder is None else chunk.get(holder)
    if not s.has(offset_field) or not s.has(length_field):
        return None
    start = s.get(offset_field)
    return start, start + s.get(length_field)


def set_index_extent(chunk: Struct, kind: str, extent: tuple[int, int] | None) -> None:
    """Point a column chunk's bloom filter, column index or offset index at ``extent`` (or drop it)."""
    holder, offset_field, length_field = _INDEX_FIELDS[kind]
    s = chunk if holder is None else chunk.get(holder)
    if extent is None:
        s.remove(offset_field)
        s.remove(length_field)
    else:
        s.set(offset_field, I64, extent[0])
        s.set(length_field, I32, extent[1] - extent[0])


def relocate_offset_index(raw: bytes, move: Callable[[int], int]) -> bytes:
    """An encoded OffsetIndex with every page location's absolute offset passed through ``move``."""
    try:
        index, used = decode_struct(raw)
    except ThriftError as e:
        raise FooterError(f"offset index is not valid Thrift: {e}") from None
    if used != len(raw) or not index.has(OI_PAGE_LOCATIONS):
        raise FooterError("offset index length does not match its content")
    for location in index.get(OI_PAGE_LOCATIONS).items:
        location.set(PL_OFFSET, I64, move(location.get(PL_OFFSET)))
    return encode_struct(index)


def with_row_groups(metadata: Struct, row_groups: list[Struct]) -> Struct:
    """A copy of ``metadata`` whose row groups (and total row count, ordinals) are replaced.
    Ordinals are numbered afresh if the file had them, and left out if not: readers refuse a
    file where only some row groups carry one."""
    out = Struct([list(f) for f in metadata.fields])
    numbered = any(rg.has(RG_ORDINAL) for rg in metadata.get(FILE_ROW_GROUPS).items)
    for ordinal, rg in enumerate(row_groups):
        if numbered:
            rg.set(RG_ORDINAL, I16, ordinal)
        else:  # a re-encoded row group must not bring an ordinal into a file without them
            rg.remove(RG_ORDINAL)
    out.set(FILE_ROW_GROUPS, LIST, ThriftList(STRUCT, row_groups))
    out.set(FILE_NUM_ROWS, I64, sum(rg.get(RG_NUM_ROWS) for rg in row_groups))
    return out


def copy_struct(s: Struct) -> Struct:
    """A deep copy (structs nest; values are immutable otherwise)."""
    decoded, _ = decode_struct(encode_struct(s))
    return decoded
