"""What every lazy read returns rows through: Arrow batches, and the ``to_*`` conversions built on them.

A table scan (:class:`castable.read.scan.Scan`) and a change scan (:class:`castable.read.changes.ChangeScan`)
differ only in how they make their batches; the ways out to Arrow, pandas, Polars and DuckDB are here once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl
    from duckdb import DuckDBPyConnection


class ArrowResult(ABC):
    """Rows of a known schema, produced as a stream of record batches when asked for."""

    @property
    @abstractmethod
    def schema(self) -> pa.Schema:
        """The schema of the rows returned."""

    @abstractmethod
    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows, streamed."""

    def to_reader(self) -> pa.RecordBatchReader:
        """A streaming reader; memory stays bounded by what the read holds ahead and the batch
        the consumer holds."""
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
        the rows, as pyiceberg's ``to_duckdb`` (needs ``castable[duckdb]``)."""
        import duckdb

        con = duckdb.connect() if connection is None else connection
        con.register(table_name, self.to_arrow())
        return con
