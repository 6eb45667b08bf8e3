"""Deletes and updates whose reading and writing run on the cluster: ``delete`` and
``update`` (Spark 3.5 and 4.x), the library's own operations with their file work in Spark tasks.

The driver decides what the manifest alone can (files pruned by their statistics, a range or
list of primary keys deleted without reading a row, files wholly inside a range dropped).
The files left to read for a delete's predicate are read by Spark tasks, a few files each,
with the library's planner (``castable.delete.plan_files``), which return tombstone entries;
an update's matching rows are read, changed and written as new data files by one task per
scan task (``Scan.plan_tasks``), which return the files' entries. The driver writes one
tombstone file and commits it with any new files, the same commit the library makes; if
another commit changes a file the plan read first, it is planned again on the newer version,
on the cluster again. Untouched rows are never rewritten. The tasks need read access to the
table and, for an update, write access to its ``data/``; the driver commits with the library.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from castable import tombstone, writes
from castable.delete import DeletePlan, plan_files
from castable.expressions import Assignments
from castable.manifest import DataFile
from castable.predicate import Predicate
from castable.scan import Scan
from castable.snapshot import Snapshot
from castable.spark.files import TableLocation, TableTarget

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FILES_PER_TASK = 4
"""Files one task reads, so that many small files do not each cost a task's start."""
TASK_BYTES = 128 * 1024 * 1024
"""Data an update task reads (whole row groups): Spark's ``maxPartitionBytes``."""
_PLANNED = pa.schema([("entries", pa.binary()), ("removed", pa.string()), ("rows", pa.int64())])
_WRITTEN = pa.schema([("files", pa.string()), ("rows", pa.int64())])


def delete(
    spark: SparkSession,
    table_uri: str,
    where: str,
    *,
    commit_id: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> int:
    """Soft-delete the rows matching ``where`` (castable's SQL) with one tombstone file, the
    files to read read by Spark tasks; the version committed (the current one when no row
    matches). A re-run with the same ``commit_id`` commits nothing more and returns the same
    version."""
    location = TableLocation(table_uri, dict(storage_options or {}) or None)
    return writes.delete(location.open(), where, commit_id=commit_id, read_files=ClusterPlanner(spark, location))


def update(
    spark: SparkSession,
    table_uri: str,
    set: Mapping[str, object],
    where: str | None = None,
    *,
    commit_id: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> int:
    """Set columns of the rows matching ``where`` (every row without it) to SQL expressions of
    their old values (``Table.update``'s ``set``), the rows read, changed and written by Spark
    tasks and replaced through one tombstone, in one commit; the version (the current one when
    no row matches). A re-run with the same ``commit_id`` commits nothing more."""
    location = TableLocation(table_uri, dict(storage_options or {}) or None)
    table = location.open()
    return writes.update(
        table,
        set,
        where,
        commit_id=commit_id,
        write_updated=ClusterUpdate(spark, TableTarget.of(table, storage_options)),
        read_files=ClusterPlanner(spark, location),
    )


class ClusterUpdate:
    """A ``castable.writes.UpdateWriter`` that reads, changes and writes each scan task's rows
    in a Spark task."""

    def __init__(self, spark: SparkSession, target: TableTarget) -> None:
        self.spark = spark
        self.target = target

    def __call__(self, snapshot: Snapshot, selected: Predicate, assignments: Assignments) -> tuple[list[DataFile], int]:
        tasks = Scan(snapshot, None, selected).plan_tasks(TASK_BYTES)
        if not tasks:
            return [], 0
        target, version = self.target, snapshot.manifest.version
        work = self.spark.createDataFrame([(pickle.dumps(t),) for t in tasks], "task binary").repartition(len(tasks))

        def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            scan = Scan(target.location.snapshot(version), None, selected)
            for batch in batches:
                for blob in batch.column("task").to_pylist():
                    read = list(scan.read_task(pickle.loads(blob)))
                    rows = pa.Table.from_batches(read) if read else scan.schema.empty_table()
                    files = target.write(assignments.apply(rows, rows).to_batches()) if rows.num_rows else []
                    doc = {"files": json.dumps([f.to_json() for f in files]), "rows": rows.num_rows}
                    yield pa.RecordBatch.from_pylist([doc], _WRITTEN)

        results = work.mapInArrow(write, "files string, rows long").collect()
        files = [DataFile.from_json(doc) for r in results for doc in json.loads(r["files"])]
        return files, sum(r["rows"] for r in results)


class ClusterPlanner:
    """A ``castable.delete.FilePlanner`` that plans each few files in a Spark task."""

    def __init__(self, spark: SparkSession, location: TableLocation) -> None:
        self.spark = spark
        self.location = location

    def __call__(self, snapshot: Snapshot, files: list[DataFile], predicate: Predicate) -> DeletePlan:
        if not files:
            return DeletePlan()
        location, version = self.location, snapshot.manifest.version
        groups = [[f.path for f in files[i : i + FILES_PER_TASK]] for i in range(0, len(files), FILES_PER_TASK)]
        work = self.spark.createDataFrame([(json.dumps(g),) for g in groups], "files string").repartition(len(groups))

        def plan(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            at = location.snapshot(version)
            entries = {f.path: f for f in at.manifest.data_files}
            for batch in batches:
                for text in batch.column("files").to_pylist():
                    part = plan_files(at, [entries[p] for p in json.loads(text)], predicate)
                    row = {"entries": tombstone.encode(part.entries), "removed": json.dumps(sorted(part.removed))}
                    yield pa.RecordBatch.from_pylist([{**row, "rows": part.rows}], _PLANNED)

        results = work.mapInArrow(plan, "entries binary, removed string, rows long").collect()
        return DeletePlan.merged(
            DeletePlan(
                entries=tombstone.decode(bytes(r["entries"]), key="a Spark task's plan"),
                removed=set(json.loads(r["removed"])),
                rows=r["rows"],
            )
            for r in results
        )
