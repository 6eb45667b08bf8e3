"""Page-level reads: the rows of a row group a filter can match, fetched page by page.

A Parquet file written with page indexes records, per column chunk, where each data page lies
and the first row it holds (the offset index) and each page's min/max (the column index).
From them a filtered read works out which row ranges can match, fetches only the pages of the
needed columns that hold those rows (and each column's dictionary), and decodes each column's
pages as a small Parquet file of their own: the original bytes after ``PAR1``, behind a copy
of the footer whose column chunk is pointed at them. Pages of different columns end at
different rows, so each column is decoded on its own and cut to the wanted rows.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from castable.format.stats import ColumnStats, supports_stats, value_type
from castable.parquet.footer import (
    CC_FILE_OFFSET,
    CC_META_DATA,
    CMD_DATA_PAGE_OFFSET,
    CMD_DICTIONARY_PAGE_OFFSET,
    CMD_ENCODING_STATS,
    CMD_NUM_VALUES,
    CMD_STATISTICS,
    CMD_TOTAL_COMPRESSED_SIZE,
    FILE_NUM_ROWS,
    FILE_ROW_GROUPS,
    INDEX_KINDS,
    MAGIC,
    RG_COLUMNS,
    RG_NUM_ROWS,
    Footer,
    copy_struct,
    index_extent,
    set_index_extent,
)
from castable.parquet.thrift import I64, LIST, STRUCT, TRUE, Struct, ThriftError, ThriftList, decode_struct
from castable.read.predicate import Match, Predicate

PAGE_READ_MAX_FRACTION = 0.5
"""A filtered read fetches pages only while the matching pages hold at most this share of a row
group's rows; beyond it, the whole chunks in one range each cost fewer requests."""

PAGE_READ_MIN_BYTES = 1 << 20
"""Row groups whose needed column chunks hold fewer bytes are read whole: fetching the page
indexes first costs a round trip, which on S3 takes as long as reading about 2 MB."""

# ColumnIndex, OffsetIndex / PageLocation (parquet.thrift)
CI_NULL_PAGES, CI_MIN_VALUES, CI_MAX_VALUES = 1, 2, 3
OI_PAGE_LOCATIONS, PL_OFFSET, PL_SIZE, PL_FIRST_ROW = 1, 1, 2, 3
# PageEncodingStats: data pages (v1, v2) in a dictionary encoding (PLAIN_DICTIONARY, RLE_DICTIONARY)
PES_PAGE_TYPE, PES_ENCODING, PES_COUNT = 1, 2, 3
_DATA_PAGES, _DICTIONARY_ENCODINGS = (0, 3), (2, 8)


class PageIndexError(ValueError):
    """A page index that does not decode, or disagrees with itself or the footer."""


Ranges = list[tuple[int, int]]
"""Row ranges [start, stop) within a row group, sorted and disjoint."""
Fetched = dict[tuple[int, int], bytes]
"""Byte ranges of a file, fetched."""


def file_footer(metadata: pq.FileMetaData) -> Footer:
    """castable's editable form of a footer pyarrow parsed (the same Thrift bytes)."""
    out = pa.BufferOutputStream()
    metadata.write_metadata_file(out)
    raw = out.getvalue().to_pybytes()
    return Footer.from_tail(raw, len(raw))


def _chunk(footer: Footer, row_group: int, column: int) -> Struct:
    chunk: Struct = footer.row_groups[row_group].get(RG_COLUMNS).items[column]
    return chunk


def index_ranges(footer: Footer, row_group: int, columns: list[int]) -> list[tuple[int, int]] | None:
    """The byte ranges of the column and offset indexes of ``columns`` in a row group; ``None``
    if any of them lacks either (the file was written without page indexes)."""
    ranges = []
    for c in columns:
        chunk = _chunk(footer, row_group, c)
        extents = [index_extent(chunk, kind) for kind in ("column_index", "offset_index")]
        if any(e is None for e in extents):
            return None
        ranges += [e for e in extents if e is not None]
    return ranges


@dataclass(frozen=True)
class ChunkPages:
    """Where a column chunk's pages lie: its dictionary (if any) and each data page, with the
    first row of each page and, last, the row group's row count."""

    dictionary: tuple[int, int] | None
    offsets: np.ndarray
    sizes: np.ndarray
    first_rows: np.ndarray
    dictionary_pages: int | None
    """How many data pages, the first ones, are dictionary-encoded (``None``: unknown). Writers
    fall back to plain pages once a dictionary grows too large, and never go back."""

    @classmethod
    def read(cls, footer: Footer, row_group: int, column: int, fetched: Fetched) -> ChunkPages:
        chunk = _chunk(footer, row_group, column)
        extent = index_extent(chunk, "offset_index")
        if extent is None:
            raise PageIndexError("the column chunk has no offset index")
        locations = _items(_decode(fetched[extent]), OI_PAGE_LOCATIONS)
        fields = [[p.get(PL_OFFSET), p.get(PL_SIZE), p.get(PL_FIRST_ROW)] for p in locations]
        rows = footer.row_groups[row_group].get(RG_NUM_ROWS)
        if not fields or any(not isinstance(v, int) for f in fields for v in f):
            raise PageIndexError("the offset index lists no pages, or pages without a place")
        offsets, sizes, first = (np.array(column, dtype=np.int64) for column in zip(*fields, strict=True))
        first_rows = np.append(first, rows)
        if first[0] != 0 or np.any(np.diff(first_rows) <= 0) or np.any(sizes <= 0):
            raise PageIndexError("the offset index's pages do not cover the row group in order")
        meta = chunk.get(CC_META_DATA)
        start = meta.get(CMD_DICTIONARY_PAGE_OFFSET)
        dictionary = (start, int(offsets[0])) if start and len(offsets) and start < offsets[0] else None
        counts = meta.get(CMD_ENCODING_STATS)
        encoded = None
        if counts is not None:
            encoded = sum(
                e.get(PES_COUNT)
                for e in counts.items
                if e.get(PES_PAGE_TYPE) in _DATA_PAGES and e.get(PES_ENCODING) in _DICTIONARY_ENCODINGS
            )
        return cls(dictionary, offsets, sizes, first_rows, encoded)

    def pages_for(self, ranges: Ranges) -> np.ndarray:
        """The indexes of the data pages holding any row of ``ranges``."""
        starts, stops = self.first_rows[:-1], self.first_rows[1:]
        wanted = np.zeros(len(starts), dtype=bool)
        for a, b in ranges:
            wanted |= (starts < b) & (stops > a)
        return np.flatnonzero(wanted)

    def dictionary_for(self, pages: np.ndarray) -> tuple[int, int] | None:
        """The dictionary's byte range if any of ``pages`` may be dictionary-encoded."""
        encoded = self.dictionary_pages
        if self.dictionary is None or (encoded is not None and (not len(pages) or pages.min() >= encoded)):
            return None
        return self.dictionary

    def byte_ranges(self, pages: np.ndarray) -> list[tuple[int, int]]:
        """The byte ranges to fetch to decode ``pages``: the dictionary they need, then the pages."""
        dictionary = self.dictionary_for(pages)
        out = [dictionary] if dictionary else []
        return out + [(int(self.offsets[p]), int(self.offsets[p] + self.sizes[p])) for p in pages]


def _decode(raw: bytes) -> Struct:
    try:
        index, _ = decode_struct(raw)
    except ThriftError as e:
        raise PageIndexError(f"page index is not valid Thrift: {e}") from None
    return index


def _items(index: Struct, fid: int) -> list[Any]:
    """The items of an index's list field."""
    found = index.get(fid)
    if not isinstance(found, ThriftList):
        raise PageIndexError(f"the page index has no list in field {fid}")
    return found.items


_FORMATS = {"INT32": "<i", "INT64": "<q", "FLOAT": "<f", "DOUBLE": "<d"}


def _bound(raw: bytes, physical: str, stored: pa.DataType) -> Any:
    """A column index bound (the value's plain encoding) as a Python value of ``stored``'s storage."""
    if physical in _FORMATS:
        fmt = _FORMATS[physical]
        if pa.types.is_unsigned_integer(stored):
            fmt = fmt.upper()
        return struct.unpack(fmt, raw)[0]
    if physical == "BOOLEAN":
        return bool(raw[0])
    if physical == "BYTE_ARRAY" and (pa.types.is_string(stored) or pa.types.is_large_string(stored)):
        return raw.decode("utf-8")
    raise ValueError(f"no page bounds for {physical} as {stored}")


def page_stats(
    raw: bytes, physical: str, stored: pa.DataType, table_type: pa.DataType
) -> list[ColumnStats | None] | None:
    """Each data page's bounds under the table's type, from an encoded column index (``None``
    where the types' bounds are not kept: a page of such a column may hold anything)."""
    t = value_type(table_type)
    if not supports_stats(t) or pa.types.is_decimal(t):
        return None
    index = _decode(raw)
    nulls, lows, highs = (_items(index, fid) for fid in (CI_NULL_PAGES, CI_MIN_VALUES, CI_MAX_VALUES))
    if not len(nulls) == len(lows) == len(highs):
        raise PageIndexError("the column index lists a different number of pages per field")
    storage = pa.int64() if pa.types.is_timestamp(stored) or pa.types.is_date64(stored) else None
    storage = pa.int32() if pa.types.is_date32(stored) else storage
    out: list[ColumnStats | None] = []
    for null, lo, hi in zip(nulls, lows, highs, strict=True):
        if null == TRUE:  # only NULLs (a bool in a list is its byte as written: 1 true, 0 or 2 false)
            out.append(ColumnStats(None, None, None))
            continue
        try:
            bounds = [
                pa.scalar(_bound(v, physical, stored), type=storage or stored).cast(stored).cast(t) for v in (lo, hi)
            ]
        except (ValueError, struct.error, pa.ArrowException, UnicodeDecodeError):
            return None
        if physical in ("FLOAT", "DOUBLE") and any(math.isnan(b.as_py()) for b in bounds):
            out.append(ColumnStats(None, None, None))  # NaN bounds order nothing
            continue
        out.append(ColumnStats(bounds[0], bounds[1], None))
    return out


def matching_ranges(
    predicate: Predicate, stats: Mapping[str, tuple[np.ndarray, list[ColumnStats | None]]], rows: int
) -> Ranges:
    """The row ranges of a row group whose pages leave room for a row matching ``predicate``.
    ``stats`` gives, per column with a column index, its pages' first rows (ending with
    ``rows``) and bounds. Pages of different columns end at different rows, so the row group
    is cut at every page boundary and each piece is judged by the pages that cover it."""
    cuts = np.unique(np.concatenate([first for first, _ in stats.values()] + [np.array([0, rows])]))
    out: Ranges = []
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        known = {
            name: bounds[int(np.searchsorted(first, a, side="right")) - 1] for name, (first, bounds) in stats.items()
        }
        if predicate.match(known.get, b - a) is Match.NONE:
            continue
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def column_file(
    footer: Footer, row_group: int, column: int, pages: ChunkPages, chosen: np.ndarray, data: bytes
) -> bytes:
    """A Parquet file holding one row group of ``chosen`` data pages (and the dictionary) of
    one column: ``data`` is their bytes, in order, as :meth:`ChunkPages.byte_ranges` lists them."""
    rows = int(sum(pages.first_rows[p + 1] - pages.first_rows[p] for p in chosen))
    metadata = Struct([list(f) for f in footer.metadata.fields])  # the row groups are replaced, not edited
    rg = copy_struct(footer.row_groups[row_group])
    metadata.set(FILE_ROW_GROUPS, LIST, ThriftList(STRUCT, [rg]))
    metadata.set(FILE_NUM_ROWS, I64, rows)
    rg.set(RG_NUM_ROWS, I64, rows)
    chunk = rg.get(RG_COLUMNS).items[column]
    for kind in INDEX_KINDS:
        set_index_extent(chunk, kind, None)
    if chunk.get(CC_FILE_OFFSET):
        chunk.set(CC_FILE_OFFSET, I64, len(MAGIC))
    meta = chunk.get(CC_META_DATA)
    extent = pages.dictionary_for(chosen)
    dictionary = 0 if extent is None else extent[1] - extent[0]
    if dictionary:
        meta.set(CMD_DICTIONARY_PAGE_OFFSET, I64, len(MAGIC))
    else:
        meta.remove(CMD_DICTIONARY_PAGE_OFFSET)
    meta.set(CMD_DATA_PAGE_OFFSET, I64, len(MAGIC) + dictionary)
    meta.set(CMD_TOTAL_COMPRESSED_SIZE, I64, len(data))
    meta.set(CMD_NUM_VALUES, I64, rows)  # flat columns only: one value (or NULL) a row
    meta.remove(CMD_STATISTICS)
    meta.remove(CMD_ENCODING_STATS)
    return MAGIC + data + Footer(metadata, len(MAGIC) + len(data)).serialize()


def rows_of(pages: ChunkPages, chosen: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where the rows at positions ``wanted`` lie among the rows of the ``chosen`` pages, read in order."""
    starts = pages.first_rows[chosen]
    counts = pages.first_rows[chosen + 1] - starts
    before = np.concatenate([[0], np.cumsum(counts)[:-1]])
    page = np.searchsorted(starts, wanted, side="right") - 1
    return np.asarray(before[page] + (wanted - starts[page]), dtype=np.int64)


def read_column(
    footer: Footer,
    row_group: int,
    column: int,
    name: str,
    pages: ChunkPages,
    chosen: np.ndarray,
    data: bytes,
    wanted: np.ndarray,
) -> pa.ChunkedArray:
    """The rows at positions ``wanted`` of one column, decoded from its ``chosen`` pages."""
    file = pq.ParquetFile(pa.BufferReader(column_file(footer, row_group, column, pages, chosen, data)))
    values = file.read_row_group(0, columns=[name], use_threads=False).column(0)
    return values.take(pa.array(rows_of(pages, chosen, wanted)))


def read_matching(
    footer: Footer,
    metadata: pq.FileMetaData,
    row_group: int,
    columns: list[str],
    predicate: Predicate,
    filtered: Mapping[str, tuple[str, pa.DataType]],
    fetch: Callable[[list[tuple[int, int]]], Fetched],
) -> tuple[pa.Table, np.ndarray] | None:
    """The file ``columns`` of the rows of a row group whose pages may match ``predicate``, and
    their positions in the row group. ``filtered`` maps the predicate's columns (the table's
    names) to the file column holding each and the table's type; ``fetch`` reads byte ranges
    of the file, all in one round trip. Two fetches: the page indexes, then the pages.

    ``None`` where pages cannot help: a file without page indexes, a column not flat at the top
    level, no page bounds for the filtered columns' types, or matching pages holding more than
    ``PAGE_READ_MAX_FRACTION`` of the rows."""
    leaf = {metadata.schema.column(j).path: j for j in range(metadata.num_columns)}
    flat = {n: j for n, j in leaf.items() if metadata.schema.column(j).max_repetition_level == 0 and "." not in n}
    indexed = {c: name for c, (name, _) in filtered.items() if name in flat}
    if not indexed or any(name not in flat for name in columns):
        return None
    wanted = sorted({flat[name] for name in columns} | {flat[name] for name in indexed.values()})
    extents = index_ranges(footer, row_group, wanted)
    if extents is None:
        return None
    fetched = fetch(extents)
    chunk_pages = {j: ChunkPages.read(footer, row_group, j, fetched) for j in wanted}
    file_types = metadata.schema.to_arrow_schema()
    stats = {}
    for c, name in indexed.items():
        extent = index_extent(_chunk(footer, row_group, flat[name]), "column_index")
        physical = metadata.schema.column(flat[name]).physical_type
        bounds = (
            None
            if extent is None
            else page_stats(fetched[extent], physical, file_types.field(name).type, filtered[c][1])
        )
        if bounds is not None:
            first_rows = chunk_pages[flat[name]].first_rows
            if len(bounds) != len(first_rows) - 1:
                raise PageIndexError("the column and offset indexes list different numbers of pages")
            stats[c] = (first_rows, bounds)
    rows = metadata.row_group(row_group).num_rows
    if not stats:
        return None
    ranges = matching_ranges(predicate, stats, rows)
    if sum(b - a for a, b in ranges) > PAGE_READ_MAX_FRACTION * rows:
        return None
    positions = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in ranges] or [np.zeros(0, np.int64)])
    schema = pa.schema([file_types.field(name) for name in columns])
    if not ranges:
        return schema.empty_table(), positions
    chosen = {name: chunk_pages[flat[name]].pages_for(ranges) for name in columns}
    byte_ranges = {name: chunk_pages[flat[name]].byte_ranges(chosen[name]) for name in columns}
    data = fetch(sorted({r for rs in byte_ranges.values() for r in rs}))
    arrays = [
        read_column(
            footer,
            row_group,
            flat[name],
            name,
            chunk_pages[flat[name]],
            chosen[name],
            b"".join(data[r] for r in byte_ranges[name]),
            positions,
        )
        for name in columns
    ]
    return pa.Table.from_arrays(arrays, schema=schema), positions
