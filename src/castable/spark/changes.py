"""A table's change feed in Spark (3.5 and 4.x): ``read_changes`` for a range of versions, and
``foreach_changes``, a loop that hands each new range to a function and keeps its place.

The driver plans the range as :meth:`castable.ChangeScan.plan_tasks` does: it reads the segments
that differ between versions and the tombstones of the files found, never a footer or a row.
Spark tasks read the tasks (a file's changes, or a whole version's where an update's rows are
paired or an erase's dropped rows found) with the library's reader; the rows carry
``_change_type``, ``_commit_version`` and ``_commit_timestamp``.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import castable
from castable.errors import InvalidInputError
from castable.read.changes import ChangeScan, ChangeTask
from castable.read.predicate import Predicate
from castable.spark.files import TableLocation, spark_arrow, spark_schema
from castable.store import ObjectNotFoundError, PreconditionFailedError, store_from_uri

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class ChangeReader:
    """What a Spark task needs to read change tasks: small and picklable."""

    location: TableLocation
    version: int
    """The range's last version: its schema is the rows'."""
    columns: list[str]
    predicate: Predicate | None

    def scan(self) -> ChangeScan:
        snapshot = self.location.snapshot(self.version)
        return ChangeScan(snapshot, [snapshot.manifest], self.columns, self.predicate)

    def read(self, tasks: Sequence[ChangeTask]) -> Iterator[pa.RecordBatch]:
        """The change rows of ``tasks``, in the Arrow layouts Spark reads."""
        scan = self.scan()
        target = spark_arrow(scan.schema)
        for task in tasks:
            for batch in scan.read_task(task):
                yield batch if batch.schema.equals(target) else batch.cast(target)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for blob in batch.column("task").to_pylist():
                yield from self.read([pickle.loads(blob)])


def read_changes(
    spark: SparkSession,
    uri: str | castable.Table,
    start_version: int,
    end_version: int | None = None,
    *,
    columns: Sequence[str] | None = None,
    filter: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> DataFrame:
    """The row changes committed in versions ``start_version`` through ``end_version`` (``None``:
    the newest) as a DataFrame, as :meth:`castable.Table.changes` reads them: the table's columns
    (or ``columns``) with ``_change_type``, ``_commit_version`` and ``_commit_timestamp``. One
    Spark task reads each change task; order the rows by ``_commit_version`` where it matters."""
    table = uri if isinstance(uri, castable.Table) else castable.open_table(uri, storage_options=storage_options)
    scan = table.changes(start_version, end_version, columns=None if columns is None else list(columns), filter=filter)
    return _frame(spark, table, scan, storage_options)


def _frame(
    spark: SparkSession, table: castable.Table, scan: ChangeScan, storage_options: Mapping[str, Any] | None
) -> DataFrame:
    schema = spark_schema(scan.schema)
    tasks = scan.plan_tasks()
    if not tasks:
        return spark.createDataFrame([], schema)
    location = TableLocation(table.uri, None if storage_options is None else dict(storage_options))
    reader = ChangeReader(location, scan.snapshot.manifest.version, scan.columns, scan.predicate)
    work = spark.createDataFrame([(pickle.dumps(t),) for t in tasks], "task binary")
    return work.repartition(min(len(tasks), spark.sparkContext.defaultParallelism * 4)).mapInArrow(reader, schema)


def foreach_changes(
    spark: SparkSession,
    uri: str,
    process: Callable[[DataFrame, str], None],
    checkpoint: str,
    *,
    starting_version: int = 0,
    max_versions: int | None = None,
    columns: Sequence[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> list[tuple[int, int]]:
    """Hand every version range committed since the last call to ``process(changes, batch_id)``,
    in order, and keep the place in ``checkpoint`` (a small JSON object, local or on S3) once
    each returns: the ``foreachBatch`` of a change feed on Spark 3.5, where Spark's own
    streaming source for castable (Spark 4) does not exist. Run it on a schedule.

    ``batch_id`` names the range (``<table uuid>:<first>-<last>``): a ``process`` that commits
    with it as its commit id commits each range once, even when a failure between its commit and
    the checkpoint makes the next call hand the same range again. Ranges hold at most
    ``max_versions`` versions; the first starts at ``starting_version`` when there is no
    checkpoint. Returns the ranges handed over."""
    if max_versions is not None and max_versions < 1:
        raise InvalidInputError(f"max_versions must be at least 1, not {max_versions}")
    table = castable.open_table(uri, storage_options=storage_options)
    place = _Checkpoint(checkpoint, storage_options)
    done: list[tuple[int, int]] = []
    start = place.read(table.manifest.table_uuid, starting_version)
    newest = table.refresh().version
    while start <= newest:
        end = newest if max_versions is None else min(newest, start + max_versions - 1)
        scan = table.changes(start, end, columns=None if columns is None else list(columns))
        process(_frame(spark, table, scan, storage_options), f"{table.manifest.table_uuid}:{start}-{end}")
        place.write(table.manifest.table_uuid, end + 1)
        done.append((start, end))
        start = end + 1
    return done


class _Checkpoint:
    """The next version a :func:`foreach_changes` loop reads, kept in one object."""

    def __init__(self, uri: str, storage_options: Mapping[str, Any] | None) -> None:
        parent, _, self.key = uri.rstrip("/").rpartition("/")
        if not parent or not self.key:
            raise InvalidInputError(
                f"checkpoint must name an object, such as s3://bucket/checkpoints/orders.json, not {uri!r}"
            )
        self.store = store_from_uri(parent, storage_options)
        self.etag: str | None = None

    def read(self, table_uuid: str, default: int) -> int:
        try:
            blob = self.store.get(self.key)
        except ObjectNotFoundError:
            return default
        doc = json.loads(blob.data)
        if doc.get("table_uuid") != table_uuid:
            raise InvalidInputError(f"checkpoint {self.key} belongs to table {doc.get('table_uuid')}, not {table_uuid}")
        self.etag = blob.etag
        return int(doc["next_version"])

    def write(self, table_uuid: str, next_version: int) -> None:
        """Move the checkpoint on, only from where this loop read it: two loops on one checkpoint
        would hand ranges twice, so the second is refused."""
        data = json.dumps({"table_uuid": table_uuid, "next_version": next_version}).encode()
        try:
            if self.etag is None:
                info = self.store.put(self.key, data, if_none_match=True)
            else:
                info = self.store.put(self.key, data, if_match=self.etag)
        except PreconditionFailedError:
            raise InvalidInputError(
                f"checkpoint {self.key} was moved by another loop; run one loop per checkpoint"
            ) from None
        self.etag = info.etag
