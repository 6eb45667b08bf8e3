"""A data file's bytes, read for a hard delete or a registration: its footer and row groups by
ranged GETs pinned to the ETag the manifest recorded, the row groups holding a row that matches a
predicate (statistics rule the others out unread), which rows of a row group match or are doomed
(matched, or tombstoned already), and the INT96 check that refuses a file castable would misread.
Splice and rewrite (:mod:`castable.maintenance.splice`) read a file through these; so do an
erase's planning (:mod:`castable.maintenance.erasechange`), a purge's search for erased rows
(:mod:`castable.maintenance.erase`) and ``add_files``' decode check (:mod:`castable.ops.register`).
:class:`Transfer` counts the bytes each moved.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from castable.errors import CorruptObjectError, UnsupportedFileError
from castable.format.evolution import conform_read, resolve
from castable.format.manifest import DataFile
from castable.format.stats import row_group_stats
from castable.format.tombstone import FileDeletes
from castable.parquet.footer import MAGIC, Footer, FooterError, copy_struct, relocate_row_group, with_row_groups
from castable.read.predicate import Match, Predicate
from castable.read.scan import rows_mask
from castable.store import ObjectStore, PreconditionFailedError

TAIL_GUESS = 64 * 1024
"""The bytes at the end of a file read at first for its footer (most footers fit in them), and
the slack within which a splice reads scattered offset indexes in one GET."""


@dataclass
class Transfer:
    """Bytes an operation moved: downloaded and uploaded by the client, copied inside the store."""

    downloaded: int = 0
    uploaded: int = 0
    copied: int = 0

    def add(self, other: Transfer) -> None:
        self.downloaded += other.downloaded
        self.uploaded += other.uploaded
        self.copied += other.copied


def read_footer(store: ObjectStore, f: DataFile, transfer: Transfer) -> Footer:
    """The footer of a data file, fetched with one or two range GETs pinned to its ETag."""
    start = max(0, f.size - TAIL_GUESS)
    tail = get_range(store, f, start, f.size, transfer)
    try:
        needed = Footer.length_from_tail(tail) + 8
        if needed > len(tail):
            tail = get_range(store, f, f.size - needed, f.size, transfer)
        return Footer.from_tail(tail, f.size)
    except FooterError as e:
        raise CorruptObjectError(f"{f.path}: {e}") from None


def get_range(store: ObjectStore, f: DataFile, start: int, end: int, transfer: Transfer) -> bytes:
    """Bytes ``[start, end)`` of ``f``, pinned to its ETag: ``CorruptObjectError`` if the object
    changed since it was committed."""
    try:
        data = store.get(f.path, byte_range=(start, end), if_match=f.etag).data
    except PreconditionFailedError:
        raise CorruptObjectError(f"{f.path} changed since it was committed") from None
    transfer.downloaded += len(data)
    return data


def file_columns(footer: Footer, schema: pa.Schema, f: DataFile) -> dict[str, str | None]:
    """Which column of ``f`` holds each column of ``schema`` (see :func:`castable.format.evolution.resolve`)."""
    return resolve(footer.pyarrow_metadata().schema.to_arrow_schema(), schema, f.added_version)


def read_row_group(store: ObjectStore, f: DataFile, footer: Footer, index: int, transfer: Transfer) -> pa.Table:
    """Decode one row group from its bytes alone, by framing them as a one-row-group file.

    Pages that carry a CRC are checked against it, so a corrupt page is never re-encoded under a
    fresh checksum; a page that does not decode (or fails its CRC) raises ``CorruptObjectError``.
    INT96 timestamps are read as nanoseconds, exact from 1677 to 2262; a row group holding one
    outside that range raises ``UnsupportedFileError`` (as nanoseconds it would wrap around, and
    a rewrite would change it)."""
    start, end = footer.row_group_span(index)
    data = get_range(store, f, start, end, transfer)
    rg = copy_struct(footer.row_groups[index])
    relocate_row_group(rg, lambda p: p - start + len(MAGIC))
    mini = pa.BufferReader(MAGIC + data + Footer(with_row_groups(footer.metadata, [rg]), 0).serialize())
    int96 = footer.int96_columns
    try:
        if int96:
            seconds = pq.ParquetFile(mini, coerce_int96_timestamp_unit="s").read_row_group(0, columns=int96)
            _check_int96_range(seconds, f)
            mini.seek(0)
        return pq.read_table(mini, page_checksum_verification=True)
    except (OSError, pa.ArrowException) as e:
        raise CorruptObjectError(f"{f.path} does not decode (row group {index}): {e}") from None


def check_int96_file(store: ObjectStore, f: DataFile, footer: Footer, transfer: Transfer) -> None:
    """Refuse, before anything is written, a file whose INT96 timestamps castable would misread
    (and a rewrite would change). Only the INT96 columns are read."""
    if not footer.int96_columns:
        return
    before = store.stats.bytes_in
    source = pq.ParquetFile(store.open_input(f.path, size=f.size, etag=f.etag), coerce_int96_timestamp_unit="s")
    for index in range(len(footer.row_groups)):
        _check_int96_range(source.read_row_group(index, columns=footer.int96_columns), f)
    transfer.downloaded += store.stats.bytes_in - before


def _check_int96_range(seconds: pa.Table, f: DataFile) -> None:
    lowest, highest = -(2**63) // 10**9, (2**63 - 1) // 10**9
    for name, column in zip(seconds.column_names, seconds.columns, strict=True):
        values = [leaf.cast(pa.int64()) for chunk in column.chunks for leaf in _timestamp_leaves(chunk)]
        lo = min((v for a in values if (v := pc.min(a).as_py()) is not None), default=None)
        hi = max((v for a in values if (v := pc.max(a).as_py()) is not None), default=None)
        if lo is not None and hi is not None and (lo < lowest or hi > highest):
            raise UnsupportedFileError(
                f"{f.path}: INT96 timestamp column {name!r} holds values outside 1677-09-21 to 2262-04-11, which "
                "castable reads as nanoseconds (they would wrap around to other dates); nothing was written"
            )


def _timestamp_leaves(array: pa.Array) -> Iterator[pa.Array]:
    """The timestamp values in ``array``, however deep in structs, lists and maps (an INT96
    column of Spark's can sit inside any of them)."""
    kind = array.type
    if pa.types.is_timestamp(kind):
        yield array
    elif pa.types.is_struct(kind):
        for i in range(kind.num_fields):
            yield from _timestamp_leaves(array.field(i))
    elif pa.types.is_map(kind):
        yield from _timestamp_leaves(array.keys)
        yield from _timestamp_leaves(array.items)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        yield from _timestamp_leaves(array.flatten())


def matching_rows(table: pa.Table, expression: pc.Expression) -> np.ndarray:
    """Which rows of a decoded row group satisfy the predicate (NULL counts as no)."""
    import pyarrow.dataset as ds  # imported where used: it imports pandas, when installed

    return rows_mask(ds.dataset(table).to_table(columns={"m": expression}).column("m"))


def doomed_rows(
    table: pa.Table, matched: np.ndarray, rg: int, deletes: FileDeletes | None, key: str | None
) -> np.ndarray:
    """Rows of a decoded row group to remove: those matching, and those already tombstoned."""
    doomed = matched.copy()
    if deletes is not None:
        doomed |= deletes.position_mask(rg, table.num_rows)
        if key is not None and deletes.has_key_deletes:
            doomed |= deletes.key_mask(table.column(key))
    return doomed


def matching_row_groups(
    store: ObjectStore,
    f: DataFile,
    footer: Footer,
    predicate: Predicate,
    schema: pa.Schema,
    where: Mapping[str, str | None],
    transfer: Transfer,
) -> Iterator[tuple[int, pa.Table, np.ndarray]]:
    """Each row group of ``f`` holding a row that matches (statistics rule the others out unread):
    its index, its decoded rows and which of them match."""
    metadata = footer.pyarrow_metadata()
    expression = predicate.to_expression()
    for rg in range(len(footer.row_groups)):
        stats = row_group_stats(metadata, rg, schema, where)
        if predicate.match(stats.get, metadata.row_group(rg).num_rows) is Match.NONE:
            continue
        table = read_row_group(store, f, footer, rg, transfer)
        matched = matching_rows(conform_read(table, where, schema), expression)
        if matched.any():
            yield rg, table, matched
