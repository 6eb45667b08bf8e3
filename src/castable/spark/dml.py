"""Deletes, updates and merges whose reading and writing run on the cluster: ``delete``,
``update`` and ``merge`` (Spark 3.5 and 4.x), the library's own operations with their file work
in Spark tasks.

The driver decides what the manifest alone can (files pruned by their statistics, a range or
list of primary keys deleted without reading a row, files wholly inside a range dropped).
The files left to read for a delete's predicate are read by Spark tasks, a few files each,
with the library's planner (``castable.ops.delete.plan_files``), which return tombstone entries;
an update's matching rows are read, changed and written as new data files by one task per
scan task (``Scan.plan_tasks``), which return the files' entries. The driver writes one
tombstone file and commits it with any new files, the same commit the library makes; if
another commit changes a file the plan read first, it is planned again on the newer version,
on the cluster again. Untouched rows are never rewritten. The tasks need read access to the
table and, for an update or a merge, write access to its ``data/``; the driver commits with the
library.

A merge joins the source DataFrame with the table's rows that hold its keys (read by Spark
tasks through the library, a scan task each), and Spark tasks decide the library's clauses on the joined rows
(``MergeClauses.decide``) and write the updated and inserted rows; the driver collects only the
source's keys (checked: each once, none NULL) and the replaced ones, which get a key-list
tombstone.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from castable.commit.written import WriteResult
from castable.format import tombstone
from castable.format.manifest import DataFile
from castable.ops import writes
from castable.ops.delete import DeletePlan, plan_files
from castable.ops.merge import MergeBuilder, MergeClauses
from castable.ops.replacement import Rewritten
from castable.read.expressions import Assignments
from castable.read.predicate import Constant, InList, Predicate
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.spark.files import TableLocation, TableTarget, arrow_schema, from_spark, spark_schema, sql_name
from castable.table import handle_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FILES_PER_TASK = 4
"""Files one task reads, so that many small files do not each cost a task's start."""
TASK_BYTES = 128 * 1024 * 1024
"""Data an update task reads (whole row groups): Spark's ``maxPartitionBytes``."""
_PLANNED = pa.schema([("entries", pa.binary()), ("removed", pa.string()), ("rows", pa.int64())])
_WRITTEN = pa.schema([("at", pa.int64()), ("files", pa.string()), ("rows", pa.int64())])
_MERGED = "files string, replaced binary, counts string"
_HIT = "__castable_matched"
"""Beside the table's rows in a merge's join (``__t<i>``, the source's ``__s<i>``): NULL where none matched."""
MERGE_TASK_ROWS = 1_000_000
"""Source rows per merge task: its rows decided and its new rows written as one run of files."""


def delete(
    spark: SparkSession,
    table_uri: str,
    where: str,
    *,
    commit_id: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> WriteResult:
    """Soft-delete the rows matching ``where`` (castable's SQL) with one tombstone file, the
    files to read read by Spark tasks; what it committed (nothing when no row matches). A
    re-run with the same ``commit_id`` commits nothing more and returns the first one's result."""
    location = TableLocation(table_uri, dict(storage_options or {}) or None)
    return writes.delete(handle_of(location.open()), commit_id, where, read_files=ClusterPlanner(spark, location))


def update(
    spark: SparkSession,
    table_uri: str,
    set: Mapping[str, object],
    where: str | None = None,
    *,
    commit_id: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> WriteResult:
    """Set columns of the rows matching ``where`` (every row without it) to SQL expressions of
    their old values (``Table.update``'s ``set``), the rows read, changed and written by Spark
    tasks and replaced through one tombstone, in one commit; what it committed (nothing when
    no row matches). A re-run with the same ``commit_id`` commits nothing more."""
    location = TableLocation(table_uri, dict(storage_options or {}) or None)
    table = location.open()
    return writes.update(
        handle_of(table),
        commit_id,
        set,
        where,
        write_updated=ClusterUpdate(spark, TableTarget.of(table, storage_options)),
        read_files=ClusterPlanner(spark, location),
    )


class ClusterUpdate:
    """A ``castable.ops.writes.UpdateWriter`` that reads, changes and writes each scan task's rows
    in a Spark task."""

    def __init__(self, spark: SparkSession, target: TableTarget) -> None:
        self.spark = spark
        self.target = target

    def __call__(self, snapshot: Snapshot, selected: Predicate, assignments: Assignments) -> tuple[list[DataFile], int]:
        """The changed rows' files in the order the library's update writes them (inline entries'
        rows first, then each file's in the version's order), so a change feed pairs a keyless
        table's old and new rows by position (docs/format.md section 14)."""
        tasks = Scan(snapshot, None, selected).plan_tasks(TASK_BYTES)
        if not tasks:
            return [], 0
        tasks.sort(key=lambda t: t.file.inline is None)
        target, version = self.target, snapshot.manifest.version
        pieces = [(i, pickle.dumps(t)) for i, t in enumerate(tasks)]
        work = self.spark.createDataFrame(pieces, "at long, task binary").repartition(len(tasks))

        def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            scan = Scan(target.location.snapshot(version), None, selected)
            for batch in batches:
                for at, blob in zip(batch.column("at").to_pylist(), batch.column("task").to_pylist(), strict=True):
                    read = list(scan.read_task(pickle.loads(blob)))
                    rows = pa.Table.from_batches(read) if read else scan.schema.empty_table()
                    files = target.write(assignments.apply(rows, rows).to_batches()) if rows.num_rows else []
                    doc = {"at": at, "files": json.dumps([f.to_json() for f in files]), "rows": rows.num_rows}
                    yield pa.RecordBatch.from_pylist([doc], _WRITTEN)

        results = sorted(work.mapInArrow(write, "at long, files string, rows long").collect(), key=lambda r: r["at"])
        files = [DataFile.from_json(doc) for r in results for doc in json.loads(r["files"])]
        return files, sum(r["rows"] for r in results)


class ClusterPlanner:
    """A ``castable.ops.delete.FilePlanner`` that plans each few files in a Spark task."""

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


def merge(
    spark: SparkSession,
    table_uri: str,
    source: DataFrame,
    *,
    source_alias: str = "s",
    target_alias: str = "t",
    storage_options: Mapping[str, Any] | None = None,
) -> SparkMerge:
    """A merge of the DataFrame ``source`` into the table by primary key, decided and written by
    Spark tasks; the clauses are the library's (``Table.merge``), then ``execute``."""
    return SparkMerge(
        spark, TableLocation(table_uri, dict(storage_options or {}) or None), source, source_alias, target_alias
    )


class SparkMerge:
    """The clauses of a Spark merge (as :class:`castable.ops.merge.MergeBuilder`); nothing runs
    until :meth:`execute`."""

    def __init__(
        self, spark: SparkSession, location: TableLocation, source: DataFrame, source_alias: str, target_alias: str
    ) -> None:
        self.spark = spark
        self.location = location
        self.source = source
        self.table = location.open()
        shape = arrow_schema(source.schema).empty_table()
        self.builder = MergeBuilder(handle_of(self.table), shape, source_alias=source_alias, target_alias=target_alias)

    def when_matched_update(self, set: Mapping[str, object], where: object = None) -> SparkMerge:
        self.builder.when_matched_update(set, where)
        return self

    def when_matched_update_all(self, where: object = None) -> SparkMerge:
        self.builder.when_matched_update_all(where)
        return self

    def when_matched_delete(self, where: object = None) -> SparkMerge:
        self.builder.when_matched_delete(where)
        return self

    def when_not_matched_insert(self, values: Mapping[str, object], where: object = None) -> SparkMerge:
        self.builder.when_not_matched_insert(values, where)
        return self

    def when_not_matched_insert_all(self, where: object = None) -> SparkMerge:
        self.builder.when_not_matched_insert_all(where)
        return self

    def execute(self, *, commit_id: str | None = None) -> WriteResult:
        """Decide every clause on the latest version in Spark tasks and commit once (again on a
        newer version if a concurrent commit touched a source key's rows). A re-run with the same
        ``commit_id`` commits nothing more."""
        source = self.source.persist()
        try:
            keys = self.builder.source_keys(_keys(source, self.builder.key)).combine_chunks()
            target = TableTarget.of(self.table, self.location.storage_options)
            produce = ClusterMerge(self.spark, source, self.builder.clauses, target, keys)
            planner = ClusterPlanner(self.spark, self.location)
            return self.builder.commit(keys, produce, commit_id=commit_id, read_files=planner)
        finally:
            source.unpersist()


def _keys(source: DataFrame, key: str) -> pa.ChunkedArray:
    """The source's key column, gathered on the driver (as Arrow, a task's keys at a time)."""

    def gather(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield pa.RecordBatch.from_pylist([{"keys": _ipc(pa.table({"k": batch.column(0)}))}])

    parts = source.select(sql_name(key)).mapInArrow(gather, "keys binary").collect()
    tables = [_from_ipc(bytes(r["keys"])) for r in parts]
    if not tables:
        return pa.chunked_array([], arrow_schema(source.select(sql_name(key)).schema).field(0).type)
    return pa.concat_tables(tables).column("k")


class ClusterMerge:
    """A merge's produce step (``castable.ops.replacement.Rewritten`` of a version): the source joined
    with the version's rows that hold its keys, the clauses decided and the new rows written
    by Spark tasks."""

    def __init__(
        self, spark: SparkSession, source: DataFrame, clauses: MergeClauses, target: TableTarget, keys: pa.Array
    ) -> None:
        self.spark = spark
        self.source = source
        self.clauses = clauses
        self.target = target
        self.keys = keys

    def __call__(self, snapshot: Snapshot) -> Rewritten:
        from pyspark.sql import functions as F

        key = self.clauses.key
        held = self._rows_with_keys(snapshot)
        source = self.source.select(*(F.col(sql_name(c)).alias(f"__s{i}") for i, c in enumerate(self.source.columns)))
        targets = held.select(
            *(F.col(sql_name(c)).alias(f"__t{i}") for i, c in enumerate(held.columns)), F.lit(True).alias(_HIT)
        )
        on = source[f"__s{self.source.columns.index(key)}"] == targets[f"__t{held.columns.index(key)}"]
        joined = source.join(targets, on, "left")
        tasks = max(1, -(-len(self.keys) // MERGE_TASK_ROWS))
        decide = _MergeTask(self.clauses, self.target, arrow_schema(self.source.schema), snapshot.schema)
        results = joined.repartition(tasks).mapInArrow(decide, _MERGED).collect()
        files = [DataFile.from_json(doc) for r in results for doc in json.loads(r["files"])]
        key_type = snapshot.schema.field(key).type
        replaced = pa.concat_arrays(
            [pa.array([], key_type)] + [_from_ipc(bytes(r["replaced"])).column("k").combine_chunks() for r in results]
        )
        counts: Counter[str] = Counter()
        for r in results:
            counts.update(json.loads(r["counts"]))
        return Rewritten(
            InList(key, replaced) if len(replaced) else Constant(False),
            files,
            supersedes=InList(key, self.keys),
            summary=dict(counts),
        )

    def _rows_with_keys(self, snapshot: Snapshot) -> DataFrame:
        """The version's live rows holding the source's keys, read by Spark tasks (one per scan
        task of the files and row groups the keys' statistics leave) through the library."""
        wanted = InList(self.clauses.key, self.keys)
        tasks = Scan(snapshot, None, wanted).plan_tasks(TASK_BYTES)
        struct = spark_schema(snapshot.schema)
        if not tasks:
            return self.spark.createDataFrame([], struct)
        location, version, as_spark = self.target.location, snapshot.manifest.version, arrow_schema(struct)

        def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            scan = Scan(location.snapshot(version), None, wanted)
            for batch in batches:
                for blob in batch.column("task").to_pylist():
                    for rows in scan.read_task(pickle.loads(blob)):
                        yield rows.cast(as_spark)

        work = self.spark.createDataFrame([(pickle.dumps(t),) for t in tasks], "task binary")
        return work.repartition(len(tasks)).mapInArrow(read, struct)


class _MergeTask:
    """What each Spark task of a merge runs: its joined rows decided, new rows written."""

    def __init__(self, clauses: MergeClauses, target: TableTarget, source: pa.Schema, schema: pa.Schema) -> None:
        self.clauses = clauses
        self.target = target
        self.source = source
        self.schema = schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        replaced: list[pa.Array] = []
        counts: Counter[str] = Counter()

        def written() -> Iterator[pa.RecordBatch]:
            for batch in batches:
                matched, unmatched = self._sides(batch)
                outcome = self.clauses.decide(matched, unmatched)
                replaced.append(outcome.replaced_keys(self.schema.field(self.clauses.key).type))
                counts.update(outcome.counts)
                yield from outcome.written(self.schema).to_batches()

        files = self.target.write(written())
        keys = pa.concat_arrays(replaced) if replaced else pa.array([], self.schema.field(self.clauses.key).type)
        row = {
            "files": json.dumps([f.to_json() for f in files]),
            "replaced": _ipc(pa.table({"k": keys})),
            "counts": json.dumps(counts),
        }
        yield pa.RecordBatch.from_pylist([row])

    def _sides(self, batch: pa.RecordBatch) -> tuple[pa.Table, pa.Table]:
        """The batch's source rows with a table row (both sides, the table's in its types) and without."""
        (s, t), key = self.clauses.aliases, self.clauses.key
        hit = pc.fill_null(batch.column(_HIT), False)
        columns = {f"{s}.{f.name}": batch.column(f"__s{i}") for i, f in enumerate(self.source)}
        columns[f"{s}.{key}"] = columns[f"{s}.{key}"].cast(self.schema.field(key).type)
        source = pa.table(columns)
        held = pa.Table.from_batches([batch]).filter(hit)
        stored = pa.record_batch(
            [held.column(f"__t{i}").combine_chunks() for i in range(len(self.schema))], self.schema.names
        )
        rows = from_spark(stored, self.schema)
        matched = source.filter(hit)
        for name in self.schema.names:
            matched = matched.append_column(f"{t}.{name}", rows.column(name))
        return matched, source.filter(pc.invert(hit))


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    blob: bytes = sink.getvalue().to_pybytes()
    return blob


def _from_ipc(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(blob).read_all()
