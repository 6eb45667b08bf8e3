"""Physically removing rows from a data file: splice its row groups server-side, or rewrite it.

Splice (docs/format.md section 11): range-GET the footer and each affected row group (pinned to the
ETag the manifest recorded), decode, drop rows, re-encode with the original codec, dictionary
use and page version, relocate every offset of the footer, then publish a *new* object with
a multipart upload whose unchanged byte ranges are copied server-side (UploadPartCopy).
Every part but the last must be at least 5 MiB: a too-small edited part is widened with
neighbouring bytes (downloaded), and a too-small copy range is downloaded into its
neighbour. Any failure aborts the upload.

This module re-encodes row groups and lays out the new object, or rewrites the file; the ranged
reads are :mod:`castable.maintenance.rowgroups`, the parts and their upload
:mod:`castable.maintenance.parts`.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from castable.errors import CastableError
from castable.format.evolution import conform_read
from castable.format.layout import new_data_key, partition_folder
from castable.format.manifest import DataFile
from castable.format.properties import TableProperties
from castable.maintenance.parts import Copy, Data, Segment, coalesce, plan_parts, upload
from castable.maintenance.rowgroups import TAIL_GUESS, Transfer, get_range, read_footer, read_row_group
from castable.parquet import floatorder
from castable.parquet.floatorder import FloatOrderError
from castable.parquet.footer import (
    CC_META_DATA,
    CMD_BLOOM_FILTER_OFFSET,
    CMD_CODEC,
    CMD_ENCODING_STATS,
    CMD_ENCODINGS,
    CMD_PATH,
    CMD_STATISTICS,
    INDEX_KINDS,
    MAGIC,
    RG_COLUMNS,
    RG_NUM_ROWS,
    Footer,
    copy_struct,
    index_extent,
    relocate_offset_index,
    relocate_row_group,
    row_group_span,
    set_index_extent,
    with_row_groups,
)
from castable.parquet.thrift import LIST, Struct
from castable.parquet.writer import data_file_from_metadata, write_data_files
from castable.store import MIN_PART_SIZE, ObjectStore

_CODECS = {0: "none", 1: "snappy", 2: "gzip", 4: "brotli", 5: "lz4", 6: "zstd", 7: "lz4"}
"""Parquet codec id -> pyarrow's name for it. pyarrow writes ``lz4`` as LZ4_RAW (7); parquet-mr's
(Spark's) Hadoop-framed LZ4 (5) is re-encoded as LZ4_RAW too: a codec is a column chunk's own,
so a file may mix them, and every reader of one reads the other."""
_DICTIONARY_ENCODINGS = {2, 8}  # PLAIN_DICTIONARY, RLE_DICTIONARY
_DATA_PAGE_V2 = 3


class SpliceNotPossibleError(CastableError):
    """The file cannot be spliced (too small to range-copy, or a layout castable cannot re-encode)."""


@dataclass
class RowMap:
    """Where the surviving rows of an old file went: old (row group, position) -> new location."""

    old_rows: list[int]
    kept: dict[int, np.ndarray]  # edited old row groups -> sorted kept positions
    new_row_groups: list[tuple[str, int]]  # every new (file path, row-group index), in row order
    new_rows: list[int]

    def __post_init__(self) -> None:
        self._old_offsets = np.concatenate([[0], np.cumsum([self.kept_count(i) for i in range(len(self.old_rows))])])
        self._new_offsets = np.concatenate([[0], np.cumsum(self.new_rows)])

    def kept_count(self, rg: int) -> int:
        return len(self.kept[rg]) if rg in self.kept else self.old_rows[rg]

    def locate(self, rg: int, positions: np.ndarray) -> dict[tuple[str, int], np.ndarray]:
        """New (file, row group) -> positions, for the surviving rows among old ``positions``."""
        positions = positions[positions < self.old_rows[rg]]
        if rg in self.kept:
            kept = self.kept[rg]
            if not len(kept):
                return {}
            idx = np.searchsorted(kept, positions)
            found = (idx < len(kept)) & (kept[np.minimum(idx, len(kept) - 1)] == positions)
            positions = idx[found]
        if not len(positions):
            return {}
        globals_ = self._old_offsets[rg] + positions
        out: dict[tuple[str, int], np.ndarray] = {}
        groups = np.searchsorted(self._new_offsets, globals_, side="right") - 1
        for g in np.unique(groups):
            sel = globals_[groups == g] - self._new_offsets[g]
            out[self.new_row_groups[g]] = sel
        return out


@dataclass
class FileErasure:
    """What erasing rows did to one data file."""

    old: DataFile
    new: list[DataFile]
    method: str  # "splice" or "rewrite"
    rows_removed: int
    row_groups_edited: list[int]
    transfer: Transfer
    row_map: RowMap = field(repr=False)


# --------------------------------------------------------------------------- re-encoding


def writer_options(rg: Struct) -> dict[str, object]:
    """pyarrow writer options that reproduce a row group's codecs, dictionaries, page version,
    page indexes and bloom filters."""
    codecs: dict[str, str] = {}
    dictionary: list[str] = []
    statistics: list[str] = []
    blooms: list[str] = []
    v2 = page_index = False
    for chunk in rg.get(RG_COLUMNS).items:
        meta = chunk.get(CC_META_DATA)
        path = ".".join(p.decode() for p in meta.get(CMD_PATH).items)
        codec = _CODECS.get(meta.get(CMD_CODEC))
        if codec is None:
            raise SpliceNotPossibleError(f"column {path} uses codec {meta.get(CMD_CODEC)}, which pyarrow cannot write")
        codecs[path] = codec
        if _DICTIONARY_ENCODINGS & set(meta.get(CMD_ENCODINGS).items):
            dictionary.append(path)
        if meta.has(CMD_STATISTICS):
            statistics.append(path)
        if meta.has(CMD_BLOOM_FILTER_OFFSET):
            blooms.append(path)
        page_index |= any(index_extent(chunk, kind) for kind in ("column_index", "offset_index"))
        stats = meta.get(CMD_ENCODING_STATS)
        if stats is not None and any(s.get(1) == _DATA_PAGE_V2 for s in stats.items):
            v2 = True
    distinct = set(codecs.values())
    return {
        "compression": distinct.pop() if len(distinct) == 1 else codecs,
        "use_dictionary": dictionary,
        "write_statistics": statistics or False,
        "data_page_version": "2.0" if v2 else "1.0",
        "write_page_index": page_index,
        "bloom_filter_options": {path: {"ndv": max(rg.get(RG_NUM_ROWS), 1)} for path in blooms} or None,
    }


@dataclass
class EncodedRowGroup:
    """A row group encoded like an original one: its column chunks' bytes, its footer entry and
    each chunk's page indexes and bloom filter (offsets relative to the first byte of ``data``)."""

    data: bytes
    row_group: Struct
    indexes: list[dict[str, bytes]]


def encode_row_group(table: pa.Table, footer: Footer, index: int) -> EncodedRowGroup:
    """Encode rows as one row group like the original (same codecs, dictionaries, page version,
    and page indexes and bloom filters where the original had them).

    The new chunks go under the original footer, so each leaf must be encoded as the file lays
    it out (physical type, fixed length, definition and repetition levels: see
    ``Footer.leaf_layout``), and each chunk is given the original's column path. A two-level
    list of required elements (old parquet-mr, Spark's legacy format) has the same levels as
    pyarrow's three-level one, so it splices too; a layout pyarrow cannot reproduce raises
    ``SpliceNotPossibleError`` (and ``auto`` rewrites the file)."""
    sink = pa.BufferOutputStream()
    options = writer_options(footer.row_groups[index])
    if footer.int96_columns:  # kept as Spark and Impala wrote them
        options["use_deprecated_int96_timestamps"] = True
    if footer.lists_named_item:
        options["use_compliant_nested_type"] = False
    if footer.integer_decimals:
        options["store_decimal_as_integer"] = True
    rows = max(table.num_rows, 1)
    with pq.ParquetWriter(sink, table.schema, **options) as writer:
        writer.write_table(table, row_group_size=rows)
    data = sink.getvalue().to_pybytes()
    temp = Footer.from_tail(data, len(data))
    if temp.leaf_layout != footer.leaf_layout:
        raise SpliceNotPossibleError("re-encoding changes the Parquet columns' physical types or levels")
    (rg,) = temp.row_groups
    for new, old in zip(rg.get(RG_COLUMNS).items, footer.row_groups[index].get(RG_COLUMNS).items, strict=True):
        new.get(CC_META_DATA).set(CMD_PATH, LIST, old.get(CC_META_DATA).get(CMD_PATH))
    start, end = row_group_span(rg)
    indexes = []
    for chunk in rg.get(RG_COLUMNS).items:
        found = {kind: extent for kind in INDEX_KINDS if (extent := index_extent(chunk, kind))}
        indexes.append({kind: data[a:b] for kind, (a, b) in found.items()})
        if "offset_index" in indexes[-1]:
            indexes[-1]["offset_index"] = relocate_offset_index(indexes[-1]["offset_index"], lambda p: p - start)
    try:
        floatorder.restate(table, footer, index, rg, indexes)
    except FloatOrderError as e:
        raise SpliceNotPossibleError(
            f"cannot state the re-encoded statistics in the file's column order: {e}"
        ) from None
    relocate_row_group(rg, lambda p: p - start)
    return EncodedRowGroup(data[start:end], rg, indexes)


# --------------------------------------------------------------------------- the two methods


def splice_file(
    store: ObjectStore,
    f: DataFile,
    footer: Footer,
    edits: dict[int, tuple[pa.Table, np.ndarray]],
    schema: pa.Schema,
    where: Mapping[str, str | None],
    transfer: Transfer,
) -> tuple[list[DataFile], RowMap]:
    """Replace the edited row groups (index -> kept rows and their old positions) in a new object.

    The new object is ``PAR1``, every row group's column chunks (copied, or re-encoded), then
    every chunk's bloom filter, column index and offset index, then the footer. The indexes of
    unedited chunks are copied (offset indexes with their page offsets moved), those of edited
    chunks come from the re-encoding, and any other byte of the old object (indexes and bloom
    filters of the removed rows, padding) is left behind.
    """
    if f.size < MIN_PART_SIZE:
        raise SpliceNotPossibleError(f"{f.path} is {f.size} bytes; S3 cannot range-copy from objects under 5 MiB")
    segments: list[Segment] = [Copy(0, len(MAGIC))]
    row_groups: list[Struct] = []
    indexes: list[list[dict[str, Segment]]] = []  # per new row group, per chunk: kind -> its bytes
    old_offset_indexes = _offset_indexes(store, f, footer, set(edits), transfer)
    position = len(MAGIC)
    chunk_bytes: Segment
    for index, old in enumerate(footer.row_groups):
        start, end = footer.row_group_span(index)
        if index in edits:
            kept, _ = edits[index]
            if not kept.num_rows:
                continue
            encoded = encode_row_group(kept, footer, index)
            rg, chunk_bytes, shift = encoded.row_group, Data(encoded.data), position
            chunk_indexes: list[dict[str, Segment]] = [
                {kind: Data(_moved(kind, raw, shift)) for kind, raw in found.items()} for found in encoded.indexes
            ]
        else:
            rg, chunk_bytes, shift = copy_struct(old), Copy(start, end), position - start
            chunk_indexes = []
            for chunk in old.get(RG_COLUMNS).items:
                found: dict[str, Segment] = {}
                for kind in ("bloom_filter", "column_index"):
                    extent = index_extent(chunk, kind)
                    if extent is not None:
                        found[kind] = Copy(*extent)
                extent = index_extent(chunk, "offset_index")
                if extent is not None:
                    found["offset_index"] = Data(_moved("offset_index", old_offset_indexes[extent], shift))
                chunk_indexes.append(found)
        relocate_row_group(rg, functools.partial(operator.add, shift))
        segments.append(chunk_bytes)
        position += chunk_bytes.size
        row_groups.append(rg)
        indexes.append(chunk_indexes)
    for kind in INDEX_KINDS:
        for rg, chunk_indexes in zip(row_groups, indexes, strict=True):
            for chunk, found in zip(rg.get(RG_COLUMNS).items, chunk_indexes, strict=True):
                if kind in found:
                    segments.append(found[kind])
                    set_index_extent(chunk, kind, (position, position + found[kind].size))
                    position += found[kind].size
    new_footer = Footer(with_row_groups(footer.metadata, row_groups), position)
    segments.append(Data(new_footer.serialize()))
    info = upload(store, f, new_data_key(folder=partition_folder(f.path)), plan_parts(coalesce(segments)), transfer)
    new = data_file_from_metadata(info, new_footer.pyarrow_metadata(), schema, where)
    return [new], _row_map(footer, edits, [(new.path, i) for i in range(len(row_groups))], row_groups)


def _moved(kind: str, raw: bytes, shift: int) -> bytes:
    """An index's bytes for pages moved by ``shift``: offset indexes hold absolute page offsets."""
    return relocate_offset_index(raw, lambda p: p + shift) if kind == "offset_index" else raw


def _offset_indexes(
    store: ObjectStore, f: DataFile, footer: Footer, edited: set[int], transfer: Transfer
) -> dict[tuple[int, int], bytes]:
    """The encoded offset indexes of the unedited row groups' chunks, by extent: one ranged GET
    when they lie together (as every writer puts them), one per index otherwise."""
    extents = sorted(
        extent
        for i, rg in enumerate(footer.row_groups)
        if i not in edited
        for chunk in rg.get(RG_COLUMNS).items
        if (extent := index_extent(chunk, "offset_index")) is not None
    )
    if not extents:
        return {}
    lo, hi = extents[0][0], max(b for _, b in extents)
    if hi - lo <= 2 * sum(b - a for a, b in extents) + TAIL_GUESS:
        blob = get_range(store, f, lo, hi, transfer)
        return {(a, b): blob[a - lo : b - lo] for a, b in extents}
    return {(a, b): get_range(store, f, a, b, transfer) for a, b in extents}


def rewrite_file(
    store: ObjectStore,
    f: DataFile,
    footer: Footer,
    edits: dict[int, tuple[pa.Table, np.ndarray]],
    schema: pa.Schema,
    where: Mapping[str, str | None],
    props: TableProperties,
    transfer: Transfer,
) -> tuple[list[DataFile], RowMap]:
    """Write the file's surviving rows as new files with the table's writer settings (``where``:
    the file's column for each of ``schema``'s, as
    :func:`~castable.maintenance.rowgroups.file_columns` gives); timestamps stay INT96 if the file
    stored them so. The new files go in the old one's partition folder."""

    def batches() -> Iterable[pa.RecordBatch]:
        for index in range(len(footer.row_groups)):
            table = edits[index][0] if index in edits else read_row_group(store, f, footer, index, transfer)
            yield from conform_read(table, where, schema).to_batches()

    before = store.stats.bytes_out
    files = write_data_files(
        store, batches(), schema, props, int96=bool(footer.int96_columns), folder=partition_folder(f.path)
    )
    transfer.uploaded += store.stats.bytes_out - before
    new_groups: list[Struct] = []
    locations: list[tuple[str, int]] = []
    for nf in files:
        written = read_footer(store, nf, Transfer())
        locations += [(nf.path, i) for i in range(len(written.row_groups))]
        new_groups += written.row_groups
    return files, _row_map(footer, edits, locations, new_groups)


def _row_map(
    footer: Footer,
    edits: dict[int, tuple[pa.Table, np.ndarray]],
    locations: list[tuple[str, int]],
    new_groups: list[Struct],
) -> RowMap:
    return RowMap(
        old_rows=[rg.get(RG_NUM_ROWS) for rg in footer.row_groups],
        kept={i: pos for i, (_, pos) in edits.items()},
        new_row_groups=locations,
        new_rows=[rg.get(RG_NUM_ROWS) for rg in new_groups],
    )
