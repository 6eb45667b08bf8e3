"""What Spark does with data files: executors adapt Spark's Arrow batches and write castable
files; the driver commits them in a :class:`WriteMode` (append, upsert or overwrite)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from castable.commit.log import read_manifest
from castable.commit.written import WriteResult
from castable.errors import InvalidInputError
from castable.format.manifest import DataFile
from castable.format.partitioning import UNPARTITIONED, PartitionSpec
from castable.format.properties import TableProperties
from castable.format.schema import conform
from castable.format.sorting import UNSORTED, SortOrder
from castable.inputs.batches import with_missing
from castable.ops.writes import AddMode, check_add_mode
from castable.parquet.writer import write_data_files
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore, store_from_uri
from castable.table import Table, handle_of
from castable.tables import load_table

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of a table (zone-less timestamps become TIMESTAMP_NTZ; Spark 3.5 and 4)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    try:
        return from_arrow_schema(pa.schema([f.remove_metadata() for f in schema]), prefer_timestamp_ntz=True)
    except (TypeError, NotImplementedError) as e:
        raise InvalidInputError(f"the table has a type Spark cannot represent: {e}") from None


def arrow_schema(struct: StructType) -> pa.Schema:
    """A Spark schema in the Arrow types Spark hands Python (timestamps as UTC microseconds)."""
    from pyspark.sql.pandas.types import to_arrow_type

    def arrow(dt: Any) -> pa.DataType:
        try:
            return to_arrow_type(dt, timezone="UTC")  # Spark 4 asks for the zone of timestamps
        except TypeError:
            return to_arrow_type(dt)  # Spark 3.5 takes none: UTC

    try:
        return pa.schema([pa.field(f.name, arrow(f.dataType)) for f in struct.fields])
    except (TypeError, NotImplementedError) as e:
        raise InvalidInputError(f"a column has a type castable cannot store: {e}") from None


def spark_arrow(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema Spark takes rows of a table of ``schema`` in (large strings as strings,
    timestamps in microseconds, nullability kept): what a task hands Spark is cast to it."""
    taken = arrow_schema(spark_schema(schema))
    return pa.schema([f.with_nullable(o.nullable) for f, o in zip(taken, schema, strict=True)])


def added_columns(struct: StructType, schema: pa.Schema) -> list[pa.Field]:
    """The columns of a Spark schema the table lacks, as the nullable columns ``mergeSchema`` adds."""
    return [f for f in arrow_schema(struct) if f.name not in schema.names]


def sql_name(name: str) -> str:
    """A column name as a Spark SQL identifier (backticks, doubled inside)."""
    return "`" + name.replace("`", "``") + "`"


def from_spark(batch: pa.RecordBatch, schema: pa.Schema, fill: bool = False) -> pa.RecordBatch:
    """A batch from Spark in the table's types, or ``SchemaMismatchError``.

    Spark labels every timestamp with its session time zone and has microseconds only; those
    convert to the table's zone and unit by the rule every entry follows (the same instants,
    :mod:`castable.format.conversions`). With ``fill`` (``mergeSchema``), nullable columns the
    batch lacks are NULL.
    """
    conformed = conform(with_missing(batch, schema) if fill else batch, schema)
    assert isinstance(conformed, pa.RecordBatch)
    return conformed


@dataclass(frozen=True)
class TableLocation:
    """Where a table is and how to reach it, rebuilt into a store in each Spark process."""

    uri: str
    storage_options: Mapping[str, Any] | None = None

    def store(self) -> ObjectStore:
        return store_from_uri(self.uri, self.storage_options)

    def open(self) -> Table:
        return load_table(self.store())

    def snapshot(self, version: int) -> Snapshot:
        """One version, from its manifest alone (one GET, where ``open`` reads the latest first)."""
        store = self.store()
        return Snapshot(store, read_manifest(store, version))


@dataclass(frozen=True)
class TableTarget:
    """Everything an executor needs to write a table's data files; small and picklable."""

    location: TableLocation
    schema: pa.Schema
    properties: Mapping[str, str]
    fill: bool = False
    """Whether the table's nullable columns the data lacks are written as NULLs (``mergeSchema``)."""
    spec: PartitionSpec = UNPARTITIONED
    """The partition spec new files are written with: each task writes a file per partition."""
    order: SortOrder = UNSORTED
    """The sort order each file's rows are written in."""

    @classmethod
    def of(cls, table: Table, storage_options: Mapping[str, Any] | None, fill: bool = False) -> TableTarget:
        location = TableLocation(table.uri, dict(storage_options or {}) or None)
        return cls(location, table.schema, table.properties, fill, table.partitioning.default, table.sorting.default)

    def store(self) -> ObjectStore:
        return self.location.store()

    def write(self, batches: Iterable[pa.RecordBatch]) -> list[DataFile]:
        """Write Spark's batches as data files of the table's target sizes; nothing is committed."""
        conformed: Iterator[pa.RecordBatch] = (from_spark(b, self.schema, self.fill) for b in batches if b.num_rows)
        props = TableProperties.parse(self.properties)
        return write_data_files(self.store(), conformed, self.schema, props, spec=self.spec, order=self.order)


@dataclass(frozen=True)
class WriteMode:
    """What a Spark write's files do to the table: ``Table.add_files``'s ``mode`` and ``where``."""

    mode: AddMode = "append"
    where: str | None = None

    def check(self, table: Table) -> None:
        """Refuse on the driver, before any file is written, what ``add_files`` would refuse
        whatever the files hold."""
        check_add_mode(handle_of(table), self.mode, self.where)

    def commit(self, table: Table, files: Sequence[DataFile], commit_id: str) -> WriteResult:
        """Commit the written ``files`` in one version; an overwrite of no files deletes the rows
        it replaces, as Spark's overwrite with an empty DataFrame does."""
        if not files and self.mode == "overwrite":
            return table.overwrite(table.schema.empty_table(), where=self.where, commit_id=commit_id)
        return table.add_files(files, mode=self.mode, where=self.where, commit_id=commit_id)
