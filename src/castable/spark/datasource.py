"""``spark.read.format("castable")`` and ``df.write.format("castable")`` (Spark 4.0+).

Reads one snapshot (the latest, or ``versionAsOf`` / ``timestampAsOf`` as in Delta Lake), one
Spark partition per scan task (a file, or a group of its row groups, of about
``maxPartitionBytes``), tombstones applied. Writes are ``Table.add_files`` in one of its modes:
executors write data files, the driver commits once (deleting them if the commit is refused, and
keeping them if its outcome is unknown), and ``commitId`` makes a repeated write commit nothing
twice. Without ``commitId`` the commit id is ``spark-<application id>-<digest>``, the digest of
the rows written (and of the write's mode and options), whatever their order or split: a retried
application (the same application id) that writes the same rows again commits nothing, in
whatever order its queries run. ``mode("append")`` appends, or with ``upsert`` set to ``true``
replaces the live rows with the DataFrame's primary keys; ``mode("overwrite")`` replaces the whole table, or with
``replaceWhere`` (a castable SQL predicate, as Delta Lake's option) exactly the rows matching
it, and every written row must match it. An overwrite with an empty DataFrame empties the table
(or the range).

Pruning is asked for with options, ``columns`` (read only those column chunks) and ``filter``
(a castable SQL predicate: files and row groups pruned by statistics, rows filtered exactly).
Spark's own hooks are not used: the Python Data Source API of Spark 4.0-4.3 offers no column
pruning, and its filter pushdown (4.1+) keeps the pushed-down reader on the relation, so a
DataFrame reused after a filtered query reads with the old filter.

A version of many files (format version 2, at least ``executorPlanningFiles``, 100,000) is
planned where it is read: the driver cuts the version's segments into slices of about
``maxPartitionBytes`` of data by their summaries alone, and each task reads its segment,
prunes the slice's entries and reads their files, so the driver neither reads the segments
nor holds an object per file.

Change feed (as Delta Lake's options): with ``readChangeFeed`` set to ``true`` a batch read returns
the row changes of versions ``startingVersion`` (or ``startingTimestamp``) through
``endingVersion`` (default: the newest), with ``_change_type``, ``_commit_version`` and
``_commit_timestamp`` (see ``castable.read.changes``). ``spark.readStream.format("castable")`` streams
a table's inserted rows, or with ``readChangeFeed`` every change, a micro-batch per range of new
versions: the offset is the next version to read, so a query restarted from its checkpoint goes on
with no gap and no repeat. It starts at ``startingVersion`` (a number, or ``latest``, the default:
what is committed from now on) or ``startingTimestamp``; ``maxVersionsPerTrigger`` caps the
versions of a micro-batch (Spark 4.2+; Spark passes it back as its read limit). Updates and
deletes are not rows of an insert stream: read the change feed for them.

Options: ``path`` (or ``load(uri)`` / ``save(uri)``); to read ``versionAsOf``, ``timestampAsOf``,
``columns``, ``filter``, ``maxPartitionBytes``, ``executorPlanningFiles``, ``readChangeFeed``,
``startingVersion``, ``startingTimestamp``, ``endingVersion``, ``maxVersionsPerTrigger``; to write ``commitId``,
``upsert``, ``replaceWhere``, ``mergeSchema`` (add the columns the DataFrame brings, in a commit of
their own first, and write the table's nullable columns it lacks as NULLs); and castable's
storage options (``endpoint_url``, ``region``, ``profile``, ``max_attempts``, ``single_writer``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from castable.commit.log import read_manifest
from castable.errors import CastableError, CommitStateUnknownError, InvalidInputError, columns_hint
from castable.format.manifest import DataFile, Manifest, RecentCommits
from castable.ops.feed import change_start
from castable.read.changes import CHANGE_TYPE, METADATA, ChangeTask, changes_schema
from castable.read.predicate import Predicate
from castable.read.scan import Scan, ScanTask
from castable.read.snapshot import SegmentSlice, Snapshot
from castable.read.where import parse_predicate
from castable.spark.changes import ChangeReader
from castable.spark.digest import Digested, RowDigest
from castable.spark.files import TableLocation, TableTarget, WriteMode, added_columns, spark_schema
from castable.store import ObjectStore
from castable.table import Table

try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # Spark 4.0 and 4.1: no such mixin (their streams read everything each batch)

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stands in for Spark 4.2's mixin, so batch reads and writes load on Spark 4.0 and 4.1."""


STORAGE_OPTIONS = ("endpoint_url", "region", "region_name", "profile", "profile_name", "max_attempts", "single_writer")
DEFAULT_PARTITION_BYTES = 128 * 1024 * 1024
DEFAULT_EXECUTOR_PLANNING_FILES = 100_000


def _option(options: Mapping[str, str], name: str) -> str | None:
    """An option by case-insensitive name (Spark lower-cases some paths of its option maps)."""
    for key, value in options.items():
        if key.lower() == name.lower():
            return value
    return None


def _location(options: Mapping[str, str]) -> TableLocation:
    """The table named by the ``path`` option, with the storage options among ``options``."""
    uri = _option(options, "path")
    if not uri:
        raise InvalidInputError("give the table URI: spark.read.format('castable').load('s3://bucket/table')")
    storage = {k: v for k in STORAGE_OPTIONS if (v := _option(options, k)) is not None}
    return TableLocation(uri, storage or None)


def _write_mode(options: Mapping[str, str], overwrite: bool) -> WriteMode:
    """Spark's save mode with the ``upsert`` and ``replaceWhere`` options, as an ``add_files`` mode."""
    upsert = (_option(options, "upsert") or "false").strip().lower()
    if upsert not in ("true", "false"):
        raise InvalidInputError(f"the upsert option is true or false, not {upsert!r}")
    where = _option(options, "replaceWhere")
    if upsert == "true" and overwrite:
        raise InvalidInputError("the upsert option goes with mode('append'), not mode('overwrite')")
    if where is not None and not overwrite:
        raise InvalidInputError("replaceWhere applies to mode('overwrite') only")
    return WriteMode("upsert" if upsert == "true" else "overwrite" if overwrite else "append", where)


_SPARK_LAYOUTS = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
"""Arrow layouts Spark's Python data source does not take, and the ones it does for the same values."""


def _columns(options: Mapping[str, str], schema: pa.Schema) -> list[str] | None:
    """The ``columns`` option as a list of known column names (``None``: all)."""
    text = _option(options, "columns")
    if text is None:
        return None
    columns = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in columns if c not in schema.names]
    if unknown or not columns:
        raise InvalidInputError(f"columns option names unknown columns {unknown} {columns_hint(unknown, schema.names)}")
    return columns


class CastableDataSource(DataSource):
    """The ``castable`` format."""

    @classmethod
    def name(cls) -> str:
        return "castable"

    def schema(self) -> StructType:
        """The schema of the version read (``versionAsOf``/``timestampAsOf``, else the latest),
        with the change columns when reading the change feed."""
        schema = self._manifest(_location(self.options).open()).schema
        columns = _columns(self.options, schema)
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        return spark_schema(changes_schema(schema) if _change_feed(self.options) else schema)

    def _manifest(self, table: Table) -> Manifest:
        version = _option(self.options, "versionAsOf")
        timestamp = _option(self.options, "timestampAsOf")
        if version is not None and timestamp is not None:
            raise InvalidInputError("give versionAsOf or timestampAsOf, not both")
        try:
            as_of = None if timestamp is None else datetime.fromisoformat(timestamp)
            at = None if version is None else int(version)
        except ValueError as e:
            raise InvalidInputError(f"bad versionAsOf/timestampAsOf: {e}") from None
        return table.manifest_at(at, as_of)

    def reader(self, schema: StructType) -> DataSourceReader:
        location = _location(self.options)
        table = location.open()
        if _change_feed(self.options):
            return _changes_reader(self.options, location, table, schema)
        manifest = self._manifest(table)
        columns = _columns(self.options, manifest.schema)
        text = _option(self.options, "filter")
        predicate = None if text is None else parse_predicate(text, manifest.schema)
        scan = Scan(Snapshot(table.store, manifest), columns, predicate)
        if spark_schema(scan.schema) != schema:
            raise InvalidInputError(f"the given schema {schema.simpleString()} is not the table's {scan.schema}")
        partition_bytes = int(_option(self.options, "maxPartitionBytes") or DEFAULT_PARTITION_BYTES)
        many = int(_option(self.options, "executorPlanningFiles") or DEFAULT_EXECUTOR_PLANNING_FILES)
        return CastableReader(location, manifest, columns, predicate, partition_bytes, many)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Stream the table's inserts, or with ``readChangeFeed`` its changes, by version."""
        location = _location(self.options)
        table = location.open()
        columns = _columns(self.options, table.schema) or list(table.schema.names)
        changes = _change_feed(self.options)
        text = _option(self.options, "filter")
        if not changes:
            text = f"{CHANGE_TYPE} = 'insert'" if text is None else f"({text}) AND {CHANGE_TYPE} = 'insert'"
        predicate = None if text is None else parse_predicate(text, changes_schema(table.schema))
        limit = _option(self.options, "maxVersionsPerTrigger")
        try:
            most = None if limit is None else int(limit)
        except ValueError:
            raise InvalidInputError(f"maxVersionsPerTrigger must be a number, not {limit!r}") from None
        if most is not None and most < 1:
            raise InvalidInputError(f"maxVersionsPerTrigger must be at least 1, not {most}")
        return CastableStreamReader(location, _starting(self.options, table), columns, predicate, changes, most)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        location = _location(self.options)
        table = location.open()
        write_mode = _write_mode(self.options, overwrite)
        write_mode.check(table)
        commit_id = _option(self.options, "commitId")
        done = None if commit_id is None else table.manifest.recent_commits.get(commit_id)
        merge = (_option(self.options, "mergeSchema") or "false").lower() == "true"
        new = added_columns(schema, table.schema) if merge and done is None else []
        if new:
            table.add_columns(new, commit_id=f"{commit_id or uuid.uuid4()}-columns")
            table = table.refresh()
        return CastableWriter(TableTarget.of(table, location.storage_options, merge), write_mode, commit_id, done)


def _change_feed(options: Mapping[str, str]) -> bool:
    text = (_option(options, "readChangeFeed") or "false").strip().lower()
    if text not in ("true", "false"):
        raise InvalidInputError(f"readChangeFeed is true or false, not {text!r}")
    return text == "true"


def _version_option(options: Mapping[str, str], name: str) -> int | None:
    text = _option(options, name)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidInputError(f"{name} must be a version number, not {text!r}") from None


def _starting(options: Mapping[str, str], table: Table) -> int:
    """The first version a change read or stream reads: ``startingVersion`` (``latest``: the
    next to be committed), the first committed at or after ``startingTimestamp``."""
    version, timestamp = _option(options, "startingVersion"), _option(options, "startingTimestamp")
    if version is not None and timestamp is not None:
        raise InvalidInputError("give startingVersion or startingTimestamp, not both")
    if timestamp is not None:
        try:
            at = datetime.fromisoformat(timestamp)
        except ValueError as e:
            raise InvalidInputError(f"bad startingTimestamp: {e}") from None
        return change_start(table.store, table.refresh().manifest, at)
    if version is None or version.strip().lower() == "latest":
        return table.refresh().version + 1
    return _version_option(options, "startingVersion") or 0


def _changes_reader(
    options: Mapping[str, str], location: TableLocation, table: Table, schema: StructType
) -> DataSourceReader:
    """A batch read of the change feed (``readChangeFeed``): versions ``startingVersion`` through
    ``endingVersion``; a batch read must say where it starts."""
    if _option(options, "startingVersion") is None and _option(options, "startingTimestamp") is None:
        raise InvalidInputError("a change feed read needs startingVersion or startingTimestamp")
    columns = _columns(options, table.schema)
    scan = table.changes(
        _starting(options, table),
        _version_option(options, "endingVersion"),
        columns=columns,
        filter=_option(options, "filter"),
    )
    if spark_schema(scan.schema) != schema:
        raise InvalidInputError(f"the given schema {schema.simpleString()} is not the change feed's {scan.schema}")
    reader = ChangeReader(location, scan.snapshot.manifest.version, scan.columns, scan.predicate)
    return CastableChangesReader(reader, scan.plan_tasks())


@dataclass
class ChangePartition(InputPartition):
    """Change tasks as one Spark partition."""

    tasks: list[ChangeTask]


class CastableChangesReader(DataSourceReader):
    """A batch read of a range of changes, planned on the driver (no footer read there)."""

    def __init__(self, reader: ChangeReader, tasks: list[ChangeTask]) -> None:
        self.reader = reader
        self.tasks = tasks

    def partitions(self) -> list[InputPartition]:
        return [ChangePartition([t]) for t in self.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, ChangePartition):
            yield from self.reader.read(partition.tasks)


class CastableStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream of a table's changes (``changes``) or inserted rows, a micro-batch per range of
    versions; an offset is ``{"version": v}``, the next version to read."""

    def __init__(
        self,
        location: TableLocation,
        starting: int,
        columns: list[str],
        predicate: Predicate | None,
        changes: bool,
        max_versions: int | None,
    ) -> None:
        self.location = location
        self.starting = starting
        self.columns = columns
        self.predicate = predicate
        self.changes = changes
        self.max_versions = max_versions
        self.until: int | None = None
        """With ``availableNow``: the version after the newest when the query started, where it stops."""

    def prepareForTriggerAvailableNow(self) -> None:
        self.until = self.location.open().version + 1

    def initialOffset(self) -> dict[str, int]:
        return {"version": self.starting}

    def getDefaultReadLimit(self) -> Any:
        """``maxVersionsPerTrigger``, handed to Spark as a count of files: Spark passes it back
        to :meth:`latestOffset` unless a trigger asks for everything (``availableNow``)."""
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles

        return ReadAllAvailable() if self.max_versions is None else ReadMaxFiles(self.max_versions)

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
        """The next version to read after this micro-batch: past the newest committed (with
        ``availableNow``, when the query started), or ``maxVersionsPerTrigger`` past ``start``."""
        end = self.until if self.until is not None else self.location.open().version + 1
        most = getattr(limit, "max_files", None)
        if start is not None and most is not None:
            end = min(end, int(start["version"]) + int(most))
        return {"version": max(end, 0 if start is None else int(start["version"]))}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        first, stop = int(start["version"]), int(end["version"])
        if stop <= first:
            return []
        table = self.location.open()
        scan = table.changes(first, stop - 1, columns=self.columns, filter=self.predicate)
        return [ChangePartition([t]) for t in scan.plan_tasks()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ChangePartition) or not partition.tasks:
            return
        reader = ChangeReader(self.location, partition.tasks[0].version, self.columns, self.predicate)
        for batch in reader.read(partition.tasks):
            yield batch if self.changes else batch.drop_columns(METADATA.names)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: a version, once committed, reads the same until it expires."""


@dataclass
class TaskPartition(InputPartition):
    """One scan task as a Spark partition."""

    task: ScanTask


@dataclass
class SlicePartition(InputPartition):
    """A slice of one segment as a Spark partition, planned by the task that reads it."""

    piece: SegmentSlice


class CastableReader(DataSourceReader):
    """Reads one version. The planner keeps the version number, not the file list, so the reader
    shipped to every task stays small; ``partitions`` reads the manifest again to plan."""

    def __init__(
        self,
        location: TableLocation,
        manifest: Manifest,
        columns: list[str] | None,
        predicate: Predicate | None,
        partition_bytes: int,
        executor_planning_files: int = DEFAULT_EXECUTOR_PLANNING_FILES,
    ) -> None:
        self.location = location
        self.version = manifest.version
        self.meta = replace(manifest.restricted([], tombstones=False), recent_commits=RecentCommits())
        self.columns = columns
        self.predicate = predicate
        self.partition_bytes = partition_bytes
        self.executor_planning_files = executor_planning_files

    def _scan(self, store: ObjectStore, manifest: Manifest) -> Scan:
        return Scan(Snapshot(store, manifest), self.columns, self.predicate)

    def partitions(self) -> list[InputPartition]:
        """Plan from the version's manifest alone (one GET), not from the latest version."""
        store = self.location.store()
        manifest = read_manifest(store, self.version)
        if len(manifest.data_files) >= self.executor_planning_files:
            slices = Snapshot(store, manifest).segment_slices(self.predicate, self.partition_bytes)
            if slices is not None:
                return [SlicePartition(s) for s in slices]
        return [TaskPartition(t) for t in self._scan(store, manifest).plan_tasks(self.partition_bytes)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's rows, in the Arrow layouts Spark reads (large strings as strings)."""
        for batch in self._read(partition):
            yield batch if batch.schema.equals(self._spark_arrow) else batch.cast(self._spark_arrow)

    @cached_property
    def _spark_arrow(self) -> pa.Schema:
        schema = self.meta.schema
        wanted = schema if self.columns is None else [schema.field(c) for c in self.columns]
        return pa.schema([f.with_type(_SPARK_LAYOUTS.get(f.type, f.type)) for f in wanted])

    def _read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        store = self.location.store()
        if isinstance(partition, TaskPartition):  # else Spark's one empty partition of an empty plan
            yield from self._scan(store, self.meta).read_task(partition.task)
        elif isinstance(partition, SlicePartition):
            manifest = read_manifest(store, self.version)
            files = Snapshot(store, manifest).slice_files(partition.piece, self.predicate)
            if files:
                yield from self._scan(store, manifest.restricted(files)).to_batches()


@dataclass
class FilesWritten(WriterCommitMessage):
    """The entries of the data files one Spark task wrote (JSON, as in the manifest), its Spark
    application's id and the digest of the rows it wrote (``RowDigest.to_json``), when the
    write has no ``commitId`` and runs in a Spark task."""

    files: list[dict[str, Any]]
    application: str | None = None
    digest: list[int] | None = None


def task_application() -> str | None:
    """The running Spark task's application id (``None`` outside a task)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return None if context is None else context.getLocalProperty("spark.app.id") or None


class CastableWriter(DataSourceArrowWriter):
    """Each task writes data files, the driver commits them all in one commit of ``write_mode``."""

    def __init__(self, target: TableTarget, write_mode: WriteMode, commit_id: str | None, done: int | None) -> None:
        self.target = target
        self.write_mode = write_mode
        self.commit_id = commit_id
        self.done = done

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesWritten:
        """Write the task's rows (nothing if the ``commitId`` already landed); without a
        ``commitId``, digest them as they go."""
        if self.done is not None:
            return FilesWritten([])
        application = None if self.commit_id is not None else task_application()
        if application is None:
            return FilesWritten([f.to_json() for f in self.target.write(iterator)])
        rows = Digested(iterator)
        files = [f.to_json() for f in self.target.write(rows)]
        return FilesWritten(files, application, rows.digest.to_json())

    @staticmethod
    def _files(messages: list[WriterCommitMessage | None]) -> list[DataFile]:
        return [DataFile.from_json(d) for m in _written(messages) for d in m.files]

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit every task's files in one version. A commit refused before its commit point
        deletes them (nothing of it is in the table); one whose outcome is unknown keeps them,
        since the version may name them, and says how to finish the write safely."""
        files = self._files(messages)
        if self.done is not None:
            return
        commit_id = self.commit_id or self._content_commit_id(messages)
        table = self.target.location.open()
        if table.manifest.recent_commits.get(commit_id) is not None:  # landed in an earlier attempt
            self._delete(files)
            return
        if not (files or self.write_mode.mode == "overwrite"):
            return
        try:
            self.write_mode.commit(table, files, commit_id)
        except CommitStateUnknownError as e:
            raise CommitStateUnknownError(
                f"{e}. The {len(files)} files written are kept, since the table may name them: write again with "
                f".option('commitId', {commit_id!r}), which adds nothing if this commit landed and commits "
                "otherwise (gc then removes these files as orphans)",
                commit_id,
            ) from e
        except CastableError:
            if not self._landed(commit_id):  # the version named nothing of this write: its files are orphans
                self._delete(files)
                raise

    def _content_commit_id(self, messages: list[WriterCommitMessage | None]) -> str:
        """The write's commit id from its rows: the digests of every task added, under the
        application's id; a random id if the tasks could not tell (a write of no partitions, or
        outside Spark), which such a retried write commits again."""
        written = _written(messages)
        applications = {m.application for m in written}
        if not written or len(applications) != 1 or None in applications or any(m.digest is None for m in written):
            return str(uuid.uuid4())
        digest = sum((RowDigest.from_json(m.digest) for m in written if m.digest is not None), RowDigest())
        mode = self.write_mode
        return digest.commit_id(str(applications.pop()), mode.mode, mode.where, self.target.location.uri)

    def _landed(self, commit_id: str) -> bool:
        """Whether the table holds this write's commit (or cannot be read to tell), checked before
        the files of a failed commit are deleted: deleting files a version names loses data."""
        try:
            return self.target.location.open().manifest.recent_commits.get(commit_id) is not None
        except CastableError:
            return True

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete what the finished tasks wrote when a task failed (its message is missing), so
        no commit was attempted. After a failed commit Spark calls this too, in another Python
        worker that cannot know how the commit ended: the commit has deleted the files itself if
        they were not committed, so they are left alone here (files of failed tasks, and any not
        deleted, are left to ``gc``)."""
        if all(m is not None for m in messages):
            return
        self._delete(self._files(messages))

    def _delete(self, files: list[DataFile]) -> None:
        if files:
            self.target.store().delete_many([f.path for f in files])


def _written(messages: list[WriterCommitMessage | None]) -> list[FilesWritten]:
    return [m for m in messages if isinstance(m, FilesWritten)]
