"""Scans: stream one version's rows as Arrow, reading as little as the statistics allow.

Files are pruned by manifest statistics, row groups by footer statistics; only the projected
and filtered columns' chunks are read. Each row group is read once and filtered; its deletes are
then matched only against the rows the filter kept. With no filter, sparse deletes are dropped
by zero-copy slices, and a row group's deleted positions (key deletes matched once) are kept
for later scans. Row groups are read ahead on the shared reader pool, a few from a local store and
from an object store as many as a byte budget allows, so memory stays bounded by that budget.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from castable.errors import CorruptObjectError, InvalidInputError, columns_hint
from castable.format import inline
from castable.format.evolution import bare_field
from castable.format.manifest import DataFile
from castable.format.tombstone import FileDeletes
from castable.read.predicate import Predicate
from castable.read.results import ArrowResult
from castable.read.snapshot import Pruning, Snapshot
from castable.store.readahead import beside, read_ahead

DEFAULT_BATCH_SIZE = 128 * 1024
LOCAL_READAHEAD = 2
"""Row groups read ahead from a local store, where each read is decoded on Arrow's threads."""
REMOTE_READAHEAD = 16
REMOTE_READAHEAD_BYTES = 64 * 1024 * 1024
"""Row groups, and stored bytes, read ahead from an object store: S3 gives each connection tens
of MB/s after tens of ms, so throughput comes from many requests in flight (each row group's
ranges are also split into parallel GETs by the store)."""
LOCAL_FILE_READAHEAD = 4
LOCAL_FOOTER_BUNDLE = 16
REMOTE_FILE_READAHEAD = 32
"""Footers read ahead: from a local store a few tasks of ``LOCAL_FOOTER_BUNDLE`` footers each;
from an object store many, since each is a round trip (a small file's footer comes with its
rows, in one GET)."""


@dataclass(frozen=True)
class ScanTask:
    """An independently readable part of a scan: row groups of one file, with the file's deletes.

    Tasks are picklable, so a planner can hand them to other processes (Spark executors) that
    read them with :meth:`Scan.read_task` on an equal scan.
    """

    file: DataFile
    row_groups: tuple[int, ...] | None
    deletes: FileDeletes | None


class Scan(ArrowResult):
    """A lazy read of one version: nothing is fetched until a ``to_*`` method or ``count`` runs."""

    def __init__(
        self,
        snapshot: Snapshot,
        columns: list[str] | None = None,
        predicate: Predicate | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        readahead: int | None = None,
        readahead_bytes: int | None = None,
    ) -> None:
        """``readahead`` row groups at most, and ``readahead_bytes`` of them as stored (0: no
        limit), are read ahead of the consumer; by default few from a local store, and from an
        object store as many as fill the network (``REMOTE_READAHEAD``, ``REMOTE_READAHEAD_BYTES``)."""
        schema = snapshot.schema
        if columns is not None:
            unknown = [c for c in columns if c not in schema.names]
            if unknown:
                raise InvalidInputError(f"unknown columns {unknown} {columns_hint(unknown, schema.names)}")
        self.snapshot = snapshot
        self.columns = list(schema.names) if columns is None else list(columns)
        self.predicate = predicate
        self.batch_size = batch_size
        local = snapshot.store.native_input
        depth = (LOCAL_READAHEAD if local else REMOTE_READAHEAD) if readahead is None else readahead
        self.readahead = max(1, depth)
        budget = (0 if local else REMOTE_READAHEAD_BYTES) if readahead_bytes is None else readahead_bytes
        self.readahead_bytes = max(0, budget)

    @property
    def version(self) -> int:
        return self.snapshot.manifest.version

    @property
    def schema(self) -> pa.Schema:
        """The schema of the rows this scan returns: the projection of the table schema, without
        castable's field metadata (ids and former names), which would otherwise travel into
        whatever the rows are written to next."""
        return pa.schema([bare_field(self.snapshot.schema.field(c)) for c in self.columns])

    def files(self) -> list[DataFile]:
        """The data files the scan will read, after pruning by manifest statistics."""
        return self.snapshot.prune_files(self.predicate)

    def explain(self) -> Pruning:
        """The scan's pruning: files ruled out by partition values and by statistics, and the
        files and bytes it reads (every segment of the version is read to say so)."""
        return self.snapshot.pruning(self.predicate)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return self._batches(self.columns)

    def count(self) -> int:
        """Rows the scan would return, reading only what deletes and the filter need: without a
        filter, a file no delete names counts as its manifest entry says, with nothing read."""
        if self.predicate is not None:
            return sum(b.num_rows for b in self._batches([]))
        files = self.files()
        deleted = self.snapshot.deletes_for(files)
        whole = sum(f.rows for f in files if f.path not in deleted)
        return whole + sum(int(b.num_rows) for b in self._batches([], [f for f in files if f.path in deleted]))

    def plan_tasks(self, target_bytes: int) -> list[ScanTask]:
        """Split the scan into tasks of about ``target_bytes`` (whole row groups, never less than one).

        Planning reads only the tombstones of the files that survive pruning, no data file.
        """
        if target_bytes <= 0:
            raise InvalidInputError("target_bytes must be positive")
        files = self.files()
        deletes = self.snapshot.deletes_for(files)
        tasks = []
        for f in files:
            pieces = max(1, min(f.row_groups, math.ceil(f.size / target_bytes)))
            if pieces == 1:
                tasks.append(ScanTask(f, None, deletes.get(f.path)))
                continue
            bounds = [round(i * f.row_groups / pieces) for i in range(pieces + 1)]
            tasks.extend(
                ScanTask(f, tuple(range(lo, hi)), deletes.get(f.path)) for lo, hi in itertools.pairwise(bounds)
            )
        return tasks

    def read_task(self, task: ScanTask) -> Iterator[pa.RecordBatch]:
        """The rows of one task, with its deletes and the scan's filter applied."""
        footer = self.snapshot.footer(task.file)
        expression = self.predicate.to_expression() if self.predicate is not None else None
        parts = self._parts(task.file, footer, task.deletes, self.columns, expression, task.row_groups)
        yield from self._read(parts)

    def _batches(self, columns: list[str], files: list[DataFile] | None = None) -> Iterator[pa.RecordBatch]:
        """The rows of ``files`` (the scan's, by default): footers are read a few files ahead,
        their parts by :meth:`_read`."""
        if files is None and self.snapshot.store.native_input:
            files = self.files()
        elif files is None:  # the tombstone list is read while the data files are pruned
            files = beside(self.files, self.snapshot.index_tombstones)[0]
        deletes = self._deletes(files)
        expression = self.predicate.to_expression() if self.predicate is not None else None
        yield from self._inline(columns, [f for f in files if f.inline is not None], deletes, expression)
        files = [f for f in files if f.inline is None]
        footers = self._footers(files)
        parts = (
            part
            for f, footer in zip(files, footers, strict=True)
            for part in self._parts(f, footer, deletes.get(f.path), columns, expression, None)
        )
        yield from self._read(parts)

    def _footers(self, files: list[DataFile]) -> Iterator[pq.FileMetaData]:
        """The footers of ``files``, in order, read a few files ahead: from an object store one
        request each, many in flight; from a local store ``LOCAL_FOOTER_BUNDLE`` to a pool task
        (a small file's footer reads faster than a pool task starts)."""
        footer = self.snapshot.footer
        if not self.snapshot.store.native_input:
            yield from read_ahead((partial(footer, f) for f in files), REMOTE_FILE_READAHEAD)
            return
        step = LOCAL_FOOTER_BUNDLE
        bundles = (
            partial(lambda some: [footer(f) for f in some], files[i : i + step]) for i in range(0, len(files), step)
        )
        for footers in read_ahead(bundles, LOCAL_FILE_READAHEAD):
            yield from footers

    def _deletes(self, files: list[DataFile]) -> dict[str, FileDeletes]:
        """The deletes of ``files``; from an object store, with the first stored file's footer
        fetched meanwhile (it is cached), so reading tombstones costs the scan no round trip of its own."""
        first = next((f for f in files if f.inline is None), None)
        if first is None or self.snapshot.store.native_input:
            return self.snapshot.deletes_for(files)
        return beside(partial(self.snapshot.deletes_for, files), partial(self.snapshot.footer, first))[0]

    def _inline(
        self,
        columns: list[str],
        files: list[DataFile],
        deletes: dict[str, FileDeletes],
        expression: pc.Expression | None,
    ) -> Iterator[pa.RecordBatch]:
        """The live, matching rows of inline entries, all read together from the entries: no
        footer, no reader and no Python call per row group, so many small appends scan fast."""
        schema, pk = self.snapshot.schema, self.snapshot.manifest.primary_key
        live: list[pa.Table] = []
        for f in files:
            rows = f.inline
            assert rows is not None
            d = deletes.get(f.path)
            if d is not None:
                if 0 in d.full_groups:
                    continue
                keys = inline.conformed(rows, schema).column(pk[0]) if d.needs_keys(0) else None
                rows = _without(rows, d.deleted_rows(0, rows.num_rows, keys))
            live.append(rows)
        if not live:
            return
        groups: list[list[pa.Table]] = []
        for rows in live:  # entries kept under one schema are conformed together
            if groups and groups[-1][0].schema.equals(rows.schema, check_metadata=True):
                groups[-1].append(rows)
            else:
                groups.append([rows])
        table = pa.concat_tables([inline.conformed(pa.concat_tables(g), schema) for g in groups])
        if expression is not None:
            table = table.filter(expression)
        table = table.select(columns)
        expected = pa.schema([bare_field(schema.field(c)) for c in columns])
        if not table.schema.equals(expected, check_metadata=True):  # inline rows hold their field ids
            table = table.cast(expected)
        yield from (b for b in table.to_batches(max_chunksize=self.batch_size) if b.num_rows)

    def _parts(
        self,
        f: DataFile,
        footer: pq.FileMetaData,
        deletes: FileDeletes | None,
        columns: list[str],
        expression: pc.Expression | None,
        row_groups: Sequence[int] | None,
    ) -> Iterator[_Part]:
        """A part per row group (of ``row_groups``, or all) that may hold matching live rows,
        read (filtered, and masked by the file's deletes) on a worker thread."""
        kept = self.snapshot.row_groups_matching(f, footer, self.predicate)
        if row_groups is not None:
            wanted = set(kept)
            kept = [rg for rg in row_groups if rg in wanted]
        needed = self.snapshot.columns_for(self.predicate, columns)
        pk = self.snapshot.manifest.primary_key
        expected = pa.schema([self.snapshot.schema.field(c) for c in columns])
        for rg in kept:
            if deletes is not None and rg in deletes.full_groups:
                continue
            touched = deletes is not None and deletes.touches(rg, self.snapshot.key_bounds(f, footer, rg))
            touching = deletes if touched else None
            read = _RowGroupRead(
                self.snapshot, f, footer, rg, needed, columns, self.predicate, expression, touching, pk[:1]
            )
            yield _Part(self.snapshot.store.uri, f.path, read, expected, self.batch_size)

    def _read(self, parts: Iterator[_Part]) -> Iterator[pa.RecordBatch]:
        """The parts of every file, across files, as many at a time as ``readahead`` and
        ``readahead_bytes`` allow; small parts in bundles (see :func:`_bundled`)."""
        for batches in read_ahead(_bundled(parts), self.readahead, budget=self.readahead_bytes):
            yield from batches


@dataclass(frozen=True)
class _Part:
    """One row group's rows, read (and masked) when called, on a worker thread, as the table's
    types (a registered file may use another layout: large_string, nullability); bytes that do
    not decode are reported as a corrupt object, naming it."""

    uri: str
    path: str
    read: _RowGroupRead
    expected: pa.Schema
    batch_size: int

    def __call__(self) -> list[pa.RecordBatch]:
        try:
            table = self.read()
            if not table.schema.equals(expected := self.expected):
                table = table.cast(expected)
            return [b for b in table.to_batches(max_chunksize=self.batch_size) if b.num_rows]
        except (OSError, pa.ArrowInvalid) as e:
            raise CorruptObjectError(f"data file {self.path} of {self.uri} does not decode: {e}") from e

    def size(self) -> int:
        """The bytes the part fetches: its column chunks, as stored."""
        return self.read.size()


@dataclass(frozen=True)
class _Bundle:
    """Several small parts read as one task: a pool task costs more than reading a small file."""

    parts: tuple[_Part, ...]

    def __call__(self) -> list[pa.RecordBatch]:
        return [b for part in self.parts for b in part()]

    def size(self) -> int:
        return sum(part.size() for part in self.parts)


BUNDLE_BYTES = 1024 * 1024
"""Parts of files smaller than this are read together, up to files of this many bytes (and
``BUNDLE_PARTS`` parts) a task."""
BUNDLE_PARTS = 64


def _bundled(parts: Iterator[_Part]) -> Iterator[_Part | _Bundle]:
    """``parts`` in order, runs of small ones gathered into bundles: many small files then cost
    one pool task, one future and one wake-up of the consumer per bundle, not per file."""
    bundle: list[_Part] = []
    held = 0
    for part in parts:
        size = part.read.file.size  # an upper bound, known without working out column chunks
        if size >= BUNDLE_BYTES:
            if bundle:
                yield _Bundle(tuple(bundle))
                bundle, held = [], 0
            yield part
            continue
        if bundle and (held + size > BUNDLE_BYTES or len(bundle) >= BUNDLE_PARTS):
            yield _Bundle(tuple(bundle))
            bundle, held = [], 0
        bundle.append(part)
        held += size
    if bundle:
        yield _Bundle(tuple(bundle)) if len(bundle) > 1 else bundle[0]


@dataclass(frozen=True)
class _RowGroupRead:
    """The live, matching rows of one row group: read, filtered, then masked by its deletes."""

    snapshot: Snapshot
    file: DataFile
    footer: pq.FileMetaData
    row_group: int
    needed: list[str]
    columns: list[str]
    predicate: Predicate | None
    expression: pc.Expression | None
    deletes: FileDeletes | None
    key: tuple[str, ...]

    def size(self) -> int:
        """The stored bytes of the column chunks this read fetches."""
        return self.snapshot.chunk_bytes(self.file, self.footer, self.needed, self.row_group)

    def __call__(self) -> pa.Table:
        d, rg = self.deletes, self.row_group
        needs_keys = d is not None and d.needs_keys(rg)
        key = self.key if needs_keys and self.key[0] not in self.needed else ()
        wanted = [*self.needed, *key]
        pages = None
        if self.predicate is not None:  # only the pages that may match, where the file has page indexes
            pages = self.snapshot.read_matching(self.file, self.footer, wanted, rg, self.predicate)
        table, positions = pages or (self.snapshot.read(self.file, self.footer, wanted, [rg]), None)
        if d is None:
            return (table if self.expression is None else table.filter(self.expression)).select(self.columns)
        num_rows = self.footer.row_group(rg).num_rows
        if self.expression is None:
            keys = table.column(self.key[0]) if needs_keys else None
            return _without(table, d.deleted_rows(rg, num_rows, keys)).select(self.columns)
        # Filter first: unmatched key deletes are then matched only against the rows it keeps.
        at = np.arange(num_rows) if positions is None else positions
        table = table.append_column(_ROW, pa.array(at.astype(np.uint32))).filter(self.expression)
        rows = table.column(_ROW).to_numpy()
        if needs_keys:
            deleted = d.position_mask(rg, num_rows)[rows] | d.key_mask(table.column(self.key[0]))
        else:
            deleted = np.isin(rows, d.deleted_rows(rg, num_rows, None), assume_unique=True)
        return table.filter(pa.array(~deleted)).select(self.columns)


_ROW = "\x00castable_row"
"""A scratch column holding each row's position in its row group (no table column has a NUL)."""
_SLICE_COST = 20_000
"""About how many bytes a mask copies in the time one zero-copy slice takes (a Python call):
deleted rows are dropped by slicing while that is cheaper than copying the live rows."""


def _without(table: pa.Table, deleted: np.ndarray) -> pa.Table:
    """``table`` without the rows at the sorted positions ``deleted``."""
    if not len(deleted):
        return table
    n = table.num_rows
    if not table.num_columns:  # a count: only how many rows are left matters
        return table.slice(0, n - len(deleted))
    if len(deleted) * _SLICE_COST < table.nbytes:  # Python ints: slicing at numpy scalars costs 5x more
        starts = [0, *(deleted.astype(np.int64) + 1).tolist()]
        stops = [*deleted.tolist(), n]
        return pa.concat_tables([table.slice(a, b - a) for a, b in zip(starts, stops, strict=True) if b > a])
    keep = np.ones(n, dtype=bool)
    keep[deleted] = False
    return table.filter(pa.array(keep))


def rows_mask(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A numpy boolean mask from an Arrow boolean column, NULL counting as false."""
    return np.asarray(pc.fill_null(values, False), dtype=bool)
