"""Scans: stream one version's rows as Arrow, reading as little as the statistics allow.

Files are pruned by manifest statistics, row groups by footer statistics; only the projected
and filtered columns' chunks are read. Row groups without deletes stream straight from
pyarrow; a row group with deletes is read once, masked by position (and primary-key range),
then filtered. Memory stays bounded by one row group.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from castable.errors import InvalidInputError
from castable.manifest import DataFile
from castable.predicate import Predicate
from castable.snapshot import Snapshot
from castable.tombstone import FileDeletes

if TYPE_CHECKING:
    import pandas as pd

_KEEP = "__castable_keep"
_KEY = "__castable_key"
DEFAULT_BATCH_SIZE = 128 * 1024


class Scan:
    """A lazy read of one version: nothing is fetched until a ``to_*`` method or ``count`` runs."""

    def __init__(
        self,
        snapshot: Snapshot,
        columns: list[str] | None = None,
        predicate: Predicate | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
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
        files = self.files()
        deletes = self.snapshot.deletes_for(files)
        for f in files:
            yield from self._file_batches(f, deletes.get(f.path), self.columns)

    def to_reader(self) -> pa.RecordBatchReader:
        """A streaming reader; memory stays bounded by about one row group."""
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches())

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.schema)

    def to_pandas(self, **kwargs: object) -> pd.DataFrame:
        return self.to_arrow().to_pandas(**kwargs)

    def count(self) -> int:
        """Rows the scan would return, reading only what deletes and the filter need."""
        files = self.files()
        deletes = self.snapshot.deletes_for(files)
        return sum(batch.num_rows for f in files for batch in self._file_batches(f, deletes.get(f.path), []))

    def _file_batches(self, f: DataFile, deletes: FileDeletes | None, columns: list[str]) -> Iterator[pa.RecordBatch]:
        fragment = self.snapshot.fragment(f)
        expression = self.predicate.to_expression() if self.predicate is not None else None
        candidates = (
            [rg.id for rg in fragment.subset(filter=expression).row_groups]
            if expression is not None
            else list(range(fragment.num_row_groups))
        )
        clean: list[int] = []
        for rg in candidates:
            if deletes is None or not deletes.touches(rg, self._key_bounds(fragment, rg)):
                clean.append(rg)
                continue
            yield from self._clean_batches(fragment, clean, columns, expression)
            clean = []
            if rg not in deletes.full_groups:
                yield from self._masked_batches(fragment, rg, deletes, columns, expression)
        yield from self._clean_batches(fragment, clean, columns, expression)

    def _key_bounds(self, fragment: ds.ParquetFileFragment, rg: int) -> tuple[object, object] | None:
        pk = self.snapshot.manifest.primary_key
        if not pk:
            return None
        s = self.snapshot.row_group_stats(fragment, rg).get(pk[0])
        if s is None or not s.has_bounds:
            return None
        return s.min.as_py(), s.max.as_py()  # type: ignore[union-attr]

    def _clean_batches(
        self,
        fragment: ds.ParquetFileFragment,
        row_groups: list[int],
        columns: list[str],
        expression: pc.Expression | None,
    ) -> Iterator[pa.RecordBatch]:
        if not row_groups:
            return
        part = fragment.subset(row_group_ids=row_groups)
        for batch in part.to_batches(columns=columns, filter=expression, batch_size=self.batch_size):
            if batch.num_rows:
                yield batch

    def _masked_batches(
        self,
        fragment: ds.ParquetFileFragment,
        rg: int,
        deletes: FileDeletes,
        columns: list[str],
        expression: pc.Expression | None,
    ) -> Iterator[pa.RecordBatch]:
        projection: dict[str, pc.Expression] = {c: pc.field(c) for c in columns}
        if expression is not None:
            projection[_KEEP] = expression
        if deletes.key_ranges:
            projection[_KEY] = pc.field(self.snapshot.manifest.primary_key[0])
        table = fragment.subset(row_group_ids=[rg]).to_table(columns=projection)
        deleted = deletes.position_mask(rg, table.num_rows)
        if deletes.key_ranges:
            deleted |= deletes.key_mask(table.column(_KEY))
        keep = ~deleted
        if expression is not None:
            keep &= rows_mask(table.column(_KEEP))
        result = table.filter(pa.array(keep)).select(columns)
        yield from result.to_batches(max_chunksize=self.batch_size)


def rows_mask(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A numpy boolean mask from an Arrow boolean column, NULL counting as false."""
    return np.asarray(pc.fill_null(values, False), dtype=bool)
