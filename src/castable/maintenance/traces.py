"""Traces of erased rows in a Parquet object: the byte-level check behind a verified erasure
(docs/format.md section 11).

An erasure is complete when no value of an erased row survives in the objects it produced. The
values looked for are those of the erased rows that no surviving row of the object holds (a value
shared with a surviving row belongs to that row). A Parquet file can keep a value outside its rows
in several places, and each is checked:

- statistics in the footer and in page headers, and the column indexes' page minima and maxima,
  compared with the values as Parquet encodes them;
- dictionary and data pages (decompressed), the indexes and the footer, searched for the bytes of
  erased strings;
- bytes that no structure of the file accounts for (left-over indexes, bloom filters, padding).

Bloom filters hold hashes, so a filter's answer proves nothing either way; they are checked to
belong to a column chunk of the object, which the splice rebuilds from surviving rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from castable.parquet.footer import (
    CC_META_DATA,
    CMD_CODEC,
    CMD_DATA_PAGE_OFFSET,
    CMD_DICTIONARY_PAGE_OFFSET,
    CMD_NUM_VALUES,
    CMD_PATH,
    CMD_STATISTICS,
    CMD_TOTAL_COMPRESSED_SIZE,
    INDEX_KINDS,
    MAGIC,
    RG_COLUMNS,
    Footer,
    FooterError,
    index_extent,
)
from castable.parquet.thrift import Struct, ThriftError, decode_struct

# Statistics: deprecated max and min, then max_value and min_value
_STAT_VALUES = (1, 2, 5, 6)
# ColumnIndex: min_values, max_values
_CI_MIN_VALUES, _CI_MAX_VALUES = 2, 3
# PageHeader and its parts
_PH_UNCOMPRESSED, _PH_COMPRESSED, _PH_DATA, _PH_DATA_V2 = 2, 3, 5, 8
# DataPageHeader and DataPageHeaderV2 alike: num_values
_PAGE_NUM_VALUES = 1
_DATA_STATISTICS, _V2_STATISTICS = 5, 8
_V2_DEF_LENGTH, _V2_REP_LENGTH, _V2_IS_COMPRESSED = 5, 6, 7
_DECOMPRESSORS = {1: "snappy", 2: "gzip", 4: "brotli", 5: "lz4", 6: "zstd", 7: "lz4_raw"}
MIN_SEARCHED_LENGTH = 4
"""Shorter strings are only compared with statistics: as byte strings they occur by chance."""


@dataclass
class Needles:
    """The values of erased rows an object must not hold, per leaf column (Parquet path)."""

    encoded: dict[str, set[bytes]]
    """Each erased-only value as Parquet encodes it in statistics and column indexes."""
    strings: dict[str, set[bytes]]
    """Erased-only strings long enough to search for as bytes, and part of no surviving string
    of their column (searched in that column's pages and indexes)."""
    anywhere: set[bytes]
    """Those of them part of no surviving string of any column (searched in the footer, which
    holds every column's statistics)."""

    def __bool__(self) -> bool:
        return any(self.encoded.values())


def _bits(values: pa.Array) -> pa.Array:
    """``values`` as Arrow can match them: float16 (which no compute kernel takes) as its bits."""
    return values.view(pa.uint16()) if pa.types.is_float16(values.type) else values


def needles(erased: pa.Table, kept: pq.ParquetFile) -> Needles:
    """The values of ``erased`` rows held by no row of ``kept``, read a column at a time."""
    encoded: dict[str, set[bytes]] = {}
    strings: dict[str, set[bytes]] = {}
    for name in erased.column_names:
        column = kept.read(columns=[name]).column(name).cast(erased.schema.field(name).type)
        for (path, gone), (_, there) in zip(
            _leaves(erased.column(name).combine_chunks(), name),
            _leaves(column.combine_chunks(), name),
            strict=True,
        ):
            only = pc.unique(gone.drop_null())
            only = only.filter(pc.invert(pc.is_in(_bits(only), value_set=_bits(there.drop_null()))))
            encoded[path] = _parquet_encoded(only)
            if pa.types.is_string(only.type) or pa.types.is_large_string(only.type):
                strings[path] = {
                    s.encode()
                    for s in only.to_pylist()
                    if len(s.encode()) >= MIN_SEARCHED_LENGTH and not _within(there, s)
                }
    anywhere = set().union(*strings.values())
    for name in erased.column_names if anywhere else ():
        column = kept.read(columns=[name]).column(name).cast(erased.schema.field(name).type).combine_chunks()
        for _, there in _leaves(column, name):
            if pa.types.is_string(there.type) or pa.types.is_large_string(there.type):
                anywhere = {s for s in anywhere if not _within(there, s.decode())}
    return Needles(encoded, strings, anywhere)


def _within(values: pa.Array, needle: str) -> bool:
    """Whether any of ``values`` contains ``needle``."""
    return bool(pc.any(pc.match_substring(values, needle)).as_py())


def _leaves(array: pa.Array, path: str) -> Iterator[tuple[str, pa.Array]]:
    """The leaf columns of an Arrow column, depth first as Parquet lays them out."""
    t = array.type
    if pa.types.is_dictionary(t):
        yield from _leaves(array.dictionary_decode(), path)
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from _leaves(array.field(i), f"{path}.{t.field(i).name}")
    elif pa.types.is_map(t):
        yield from _leaves(array.keys, f"{path}.key_value.key")
        yield from _leaves(array.items, f"{path}.key_value.value")
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        yield from _leaves(array.flatten(), f"{path}.list.element")
    else:
        yield path, array


def _parquet_encoded(values: pa.Array) -> set[bytes]:
    """Each value as a Parquet writer stores it in statistics (one row group per value; the
    minimum and maximum of one value differ for floating-point zero, written as -0.0 and +0.0)."""
    if not len(values):
        return set()
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"v": values}), sink, row_group_size=1, use_dictionary=False, store_schema=False)
    data = sink.getvalue().to_pybytes()
    out: set[bytes] = set()
    for rg in Footer.from_tail(data, len(data)).row_groups:
        stats = rg.get(RG_COLUMNS).items[0].get(CC_META_DATA).get(CMD_STATISTICS)
        out.update(stats.get(fid) for fid in (5, 6) if stats is not None and stats.has(fid))
    return out


def find_traces(source: pa.NativeFile, size: int, needles: Needles) -> list[str]:
    """Where the object (``source``, ``size`` bytes) still holds a value among ``needles``."""
    found: list[str] = []
    tail_start = max(0, size - 64 * 1024)
    tail = source.read_at(size - tail_start, tail_start)
    try:
        length = Footer.length_from_tail(tail) + 8
        if length > len(tail):
            tail = source.read_at(length, size - length)
        footer = Footer.from_tail(tail, size)
    except FooterError as e:
        return [f"footer: {e}"]
    footer_bytes = tail[len(tail) - (size - footer.offset) :]
    found += _search(footer_bytes, [needles.anywhere], "the footer")
    accounted = [(0, len(MAGIC)), (footer.offset, size)]
    for r, rg in enumerate(footer.row_groups):
        accounted.append(footer.row_group_span(r))
        for chunk in rg.get(RG_COLUMNS).items:
            meta = chunk.get(CC_META_DATA)
            path = ".".join(p.decode() for p in meta.get(CMD_PATH).items)
            where = f"row group {r}, column {path}"
            found += _stat_traces(meta.get(CMD_STATISTICS), needles.encoded.get(path, set()), f"{where}: statistics")
            first = meta.get(CMD_DICTIONARY_PAGE_OFFSET) or meta.get(CMD_DATA_PAGE_OFFSET)
            end = footer.next_structure(first + meta.get(CMD_TOTAL_COMPRESSED_SIZE))
            found += _page_traces(source.read_at(end - first, first), meta, needles, path, where)
            for kind in INDEX_KINDS:
                extent = index_extent(chunk, kind)
                if extent is None:
                    continue
                accounted.append(extent)
                if kind == "bloom_filter":
                    continue
                raw = source.read_at(extent[1] - extent[0], extent[0])
                found += _search(raw, [needles.strings.get(path, set())], f"{where}: {kind.replace('_', ' ')}")
                if kind == "column_index":
                    found += _column_index_traces(raw, needles.encoded.get(path, set()), f"{where}: column index")
    found += [f"bytes {a}-{b} belong to no row group, index or footer" for a, b in _gaps(accounted, size)]
    return found


def _stat_traces(stats: Struct | None, encoded: set[bytes], where: str) -> list[str]:
    if stats is None or not encoded:
        return []
    return [f"{where} holds an erased value" for fid in _STAT_VALUES if stats.get(fid) in encoded][:1]


def _column_index_traces(raw: bytes, encoded: set[bytes], where: str) -> list[str]:
    try:
        index, _ = decode_struct(raw)
    except ThriftError as e:
        return [f"{where} is not valid Thrift: {e}"]
    values = [*index.get(_CI_MIN_VALUES).items, *index.get(_CI_MAX_VALUES).items]
    return [f"{where} holds an erased value"] if encoded.intersection(values) else []


def _page_traces(data: bytes, meta: Struct, needles: Needles, path: str, where: str) -> list[str]:
    """Page header statistics and the decompressed pages of one column chunk, whose bytes run
    from its first page to whatever the file holds next (a writer may have recorded its size
    short): pages are read through the recorded size and on until they hold the chunk's values,
    and bytes after them searched as they are."""
    codec = meta.get(CMD_CODEC)
    strings = needles.strings.get(path, set())
    encoded = needles.encoded.get(path, set())
    found: list[str] = []
    pos = page = values = 0
    recorded, expected = meta.get(CMD_TOTAL_COMPRESSED_SIZE), meta.get(CMD_NUM_VALUES)
    while pos < len(data) and (pos < recorded or values < expected):
        try:
            header, used = decode_struct(data, pos)
        except ThriftError as e:
            return [*found, f"{where}: page {page} header is not valid Thrift: {e}"]
        size = header.get(_PH_COMPRESSED)
        if not isinstance(size, int) or size < 0:
            return [*found, f"{where}: page {page} header gives no page size"]
        body = data[pos + used : pos + used + size]
        pos += used + len(body)
        values += sum(header.get(fid).get(_PAGE_NUM_VALUES) or 0 for fid in (_PH_DATA, _PH_DATA_V2) if header.has(fid))
        for fid, stats_fid in ((_PH_DATA, _DATA_STATISTICS), (_PH_DATA_V2, _V2_STATISTICS)):
            if header.has(fid):
                found += _stat_traces(header.get(fid).get(stats_fid), encoded, f"{where}: page {page} statistics")
        if strings:
            try:
                plain = _decompressed(header, body, codec)
            except (pa.ArrowException, ValueError) as e:
                return [*found, f"{where}: page {page} does not decompress: {e}"]
            found += _search(plain, [strings], f"{where}: page {page}")
        page += 1
    return [*found, *_search(data[pos:], [strings, needles.anywhere], f"{where}: bytes after its last page")]


def _decompressed(header: Struct, body: bytes, codec: int) -> bytes:
    name = _DECOMPRESSORS.get(codec)
    levels = 0
    if header.has(_PH_DATA_V2):
        v2 = header.get(_PH_DATA_V2)
        levels = v2.get(_V2_DEF_LENGTH, 0) + v2.get(_V2_REP_LENGTH, 0)
        if v2.get(_V2_IS_COMPRESSED, True) is False:
            name = None
    if name is None:
        return body
    size = header.get(_PH_UNCOMPRESSED) - levels
    rest = pa.Codec(name).decompress(body[levels:], decompressed_size=size, asbytes=True)
    return body[:levels] + bytes(rest)


def _search(data: bytes, groups: Iterable[set[bytes]], where: str) -> list[str]:
    if any(s in data for strings in groups for s in strings):
        return [f"{where} holds an erased string"]
    return []


def _gaps(extents: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    gaps = []
    cursor = 0
    for a, b in sorted(extents):
        if a > cursor:
            gaps.append((cursor, a))
        cursor = max(cursor, b)
    if cursor < size:
        gaps.append((cursor, size))
    return gaps
