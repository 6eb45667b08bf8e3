"""Scans: stream one version's rows as Arrow, reading as little as the statistics allow.

Files are pruned by manifest statistics, row groups by footer statistics; only the projected
and filtered columns' chunks are read. Each row group is read once, masked by position (and
primary-key range) when it has deletes, then filtered. Row groups are read a few ahead on worker
threads, so memory stays bounded by ``readahead`` row groups.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from castable.errors import CorruptObjectError, InvalidInputError
from castable.manifest import DataFile
from castable.predicate import Predicate
from castable.snapshot import Snapshot
from castable.tombstone import FileDeletes

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl
    from duckdb import DuckDBPyConnection

DEFAULT_BATCH_SIZE = 128 * 1024
DEFAULT_READAHEAD = 2
_FILE_READAHEAD = 4
T = TypeVar("T")


@dataclass(frozen=True)
class ScanTask:
    """An independently readable part of a scan: row groups of one file, with the file's deletes.

    Tasks are picklable, so a planner can hand them to other processes (Spark executors) that
    read them with :meth:`Scan.read_task` on an equal scan.
    """

    file: DataFile
    row_groups: tuple[int, ...] | None
    deletes: FileDeletes | None


class Scan:
    """A lazy read of one version: nothing is fetched until a ``to_*`` method or ``count`` runs."""

    def __init__(
        self,
        snapshot: Snapshot,
        columns: list[str] | None = None,
        predicate: Predicate | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        readahead: int = DEFAULT_READAHEAD,
    ) -> None:
        schema = snapshot.schema
        if columns is not None:
            unknown = [c for c in columns if c not in schema.names]
            if unknown:
                raise InvalidInputError(f"unknown columns {unknown} (columns: {', '.join(schema.names)})")
        self.snapshot = snapshot
        self.columns = list(schema.names) if columns is None else list(columns)
        self.predicate = predicate
        self.batch_size = batch_size
        self.readahead = max(1, readahead)

    @property
    def version(self) -> int:
        return self.snapshot.manifest.version

    @property
    def schema(self) -> pa.Schema:
        """The schema of the rows this scan returns (the projection of the table schema)."""
        return pa.schema([self.snapshot.schema.field(c) for c in self.columns])

    def files(self) -> list[DataFile]:
        """The data files the scan will read, after pruning by manifest statistics."""
        return self.snapshot.prune_files(self.predicate)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return self._batches(self.columns)

    def to_reader(self) -> pa.RecordBatchReader:
        """A streaming reader; memory stays bounded by about ``readahead`` row groups."""
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches())

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.schema)

    def to_pandas(self, **kwargs: object) -> pd.DataFrame:
        return self.to_arrow().to_pandas(**kwargs)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream interface: ``duckdb.sql("select ... from scan")``,
        ``polars.from_arrow(scan)`` and ``pyarrow.table(scan)`` stream the rows with no copy."""
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def to_polars(self) -> pl.DataFrame:
        """The rows as a Polars DataFrame (needs ``castable[polars]``)."""
        import polars as pl

        frame = pl.from_arrow(self.to_arrow())
        assert isinstance(frame, pl.DataFrame)
        return frame

    def to_duckdb(self, table_name: str, connection: DuckDBPyConnection | None = None) -> DuckDBPyConnection:
        """A DuckDB connection (``connection``, or a new in-memory one) where ``table_name`` is
        the scan's rows, as pyiceberg's ``to_duckdb`` (needs ``castable[duckdb]``)."""
        import duckdb

        con = duckdb.connect() if connection is None else connection
        con.register(table_name, self.to_arrow())
        return con

    def count(self) -> int:
        """Rows the scan would return, reading only what deletes and the filter need."""
        return sum(b.num_rows for b in self._batches([]))

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
        fragment = self.snapshot.fragment(task.file)
        expression = self.predicate.to_expression() if self.predicate is not None else None
        parts = self._parts(task.file, fragment, task.deletes, self.columns, expression, task.row_groups)
        yield from self._read(parts, self.columns)

    def _batches(self, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """Files are opened (footers read) a few ahead; their parts are read by :meth:`_read`."""
        files = self.files()
        deletes = self.snapshot.deletes_for(files)
        expression = self.predicate.to_expression() if self.predicate is not None else None
        fragments = read_ahead((partial(self.snapshot.fragment, f) for f in files), _FILE_READAHEAD)
        parts = (
            part
            for f, fragment in zip(files, fragments, strict=True)
            for part in self._parts(f, fragment, deletes.get(f.path), columns, expression, None)
        )
        yield from self._read(parts, columns)

    def _parts(
        self,
        f: DataFile,
        fragment: ds.ParquetFileFragment,
        deletes: FileDeletes | None,
        columns: list[str],
        expression: pc.Expression | None,
        row_groups: Sequence[int] | None,
    ) -> Iterator[Callable[[], _Part]]:
        """A part per row group, read (and masked by the file's deletes) on a worker thread."""
        for task in self._row_group_tasks(f, fragment, deletes, columns, expression, row_groups):
            yield partial(_read_part, self.snapshot.store.uri, f.path, task, self.batch_size)

    def _read(self, parts: Iterator[Callable[[], _Part]], columns: list[str]) -> Iterator[pa.RecordBatch]:
        """The parts of every file, ``readahead`` at a time across files, as batches of the
        table's types; bytes that do not decode are reported as a corrupt object, naming it."""
        expected = pa.schema([self.snapshot.schema.field(c) for c in columns])
        for part in read_ahead(parts, self.readahead):
            try:
                for b in part.batches:
                    if b.num_rows:  # a registered file may use another layout (large_string, nullability)
                        yield b if b.schema.equals(expected) else b.cast(expected)
            except (OSError, pa.ArrowInvalid) as e:
                raise _corrupt(self.snapshot.store.uri, part.path, e) from e

    def _row_group_tasks(
        self,
        f: DataFile,
        fragment: ds.ParquetFileFragment,
        deletes: FileDeletes | None,
        columns: list[str],
        expression: pc.Expression | None,
        row_groups: Sequence[int] | None,
    ) -> Iterator[Callable[[], pa.Table]]:
        """One task per row group (of ``row_groups``, or all) that may hold matching live rows."""
        kept = self.snapshot.row_groups_matching(f, fragment, self.predicate)
        if row_groups is not None:
            wanted = set(kept)
            kept = [rg for rg in row_groups if rg in wanted]
        read = partial(self.snapshot.read, f, fragment)
        needed = self.snapshot.columns_for(self.predicate, columns)
        for rg in kept:
            if deletes is None or not deletes.touches(rg, self._key_bounds(f, fragment, rg)):
                yield partial(_read_clean, read, rg, needed, columns, expression)
            elif rg not in deletes.full_groups:
                key = self.snapshot.manifest.primary_key[0] if deletes.has_key_deletes else None
                yield partial(_read_masked, read, rg, needed, deletes, columns, expression, key)

    def _key_bounds(self, f: DataFile, fragment: ds.ParquetFileFragment, rg: int) -> tuple[object, object] | None:
        pk = self.snapshot.manifest.primary_key
        if not pk:
            return None
        s = self.snapshot.row_group_stats(f, fragment, rg).get(pk[0])
        if s is None or not s.has_bounds:
            return None
        return s.min.as_py(), s.max.as_py()  # type: ignore[union-attr]


def read_ahead(tasks: Iterator[Callable[[], T]], depth: int) -> Iterator[T]:
    """Run tasks on ``depth`` threads, yielding results in order; at most ``depth`` in flight."""
    pool = ThreadPoolExecutor(depth, thread_name_prefix="castable-scan")
    pending: deque[Future[T]] = deque()
    try:
        for task in tasks:
            pending.append(pool.submit(task))
            if len(pending) >= depth:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class _Part:
    """Batches of one data file: streamed lazily (a file without deletes), or read already."""

    path: str
    batches: Iterable[pa.RecordBatch]


def _read_part(uri: str, path: str, read: Callable[[], pa.Table], batch_size: int) -> _Part:
    """A row group, read (and masked) now, on a worker thread."""
    try:
        return _Part(path, read().to_batches(max_chunksize=batch_size))
    except (OSError, pa.ArrowInvalid) as e:
        raise _corrupt(uri, path, e) from e


def _corrupt(uri: str, path: str, error: Exception) -> CorruptObjectError:
    return CorruptObjectError(f"data file {path} of {uri} does not decode: {error}")


def _read_clean(
    read: Callable[[list[str], Sequence[int]], pa.Table],
    rg: int,
    needed: list[str],
    columns: list[str],
    expression: pc.Expression | None,
) -> pa.Table:
    """A row group without deletes: read, filtered and projected."""
    table = read(needed, [rg])
    return (table if expression is None else table.filter(expression)).select(columns)


def _read_masked(
    read: Callable[[list[str], Sequence[int]], pa.Table],
    rg: int,
    needed: list[str],
    deletes: FileDeletes,
    columns: list[str],
    expression: pc.Expression | None,
    key: str | None,
) -> pa.Table:
    """A row group with deletes: read once, mask deleted positions (and key ranges), then filter."""
    table = read(needed if key is None or key in needed else [*needed, key], [rg])
    deleted = deletes.position_mask(rg, table.num_rows)
    if key is not None:
        deleted |= deletes.key_mask(table.column(key))
    table = table.filter(pa.array(~deleted))
    return (table if expression is None else table.filter(expression)).select(columns)


def rows_mask(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A numpy boolean mask from an Arrow boolean column, NULL counting as false."""
    return np.asarray(pc.fill_null(values, False), dtype=bool)
