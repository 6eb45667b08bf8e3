"""The user's table: a thin facade over the modules that read, write and maintain a table.

A :class:`Table` wraps an internal :class:`~castable.table.handle.TableHandle` (the newest
version seen, and the committer it was given when made: its own log, or its database's), which
is what the operations receive; open or create one with :mod:`castable.tables`.
:func:`handle_of` gives the library's upper layers (databases, the catalog, the front ends) that
handle.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pyarrow as pa

from castable.commit.committer import Committer
from castable.commit.handle import SchemaMode
from castable.commit.written import WriteResult
from castable.format.evolution import SchemaUpdate
from castable.format.manifest import DataFile, Manifest
from castable.format.partitioning import Partitioning
from castable.format.properties import TableProperties
from castable.format.sorting import Sorting
from castable.inputs.batches import DataLike
from castable.inputs.orders import SortBy
from castable.inputs.partitions import PartitionBy
from castable.maintenance.compact import CompactReport
from castable.maintenance.damage import Damage
from castable.maintenance.erase import EraseReport, PurgeReport
from castable.maintenance.erasechange import EraseMode
from castable.maintenance.gc import ExpireReport, GcReport
from castable.maintenance.history import HistoryEntry, history
from castable.ops import metadata, writes
from castable.ops.batching import BatchWriter
from castable.ops.feed import change_scan
from castable.ops.merge import MergeBuilder
from castable.ops.register import Verify
from castable.ops.writes import DELETE_OPS, AddMode
from castable.read.changes import ChangeScan
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.read.where import Where
from castable.store import ObjectStore
from castable.table.handle import TableHandle
from castable.table.iceberg import own_log
from castable.table.maintenance import Maintenance


class Table:
    """A handle on one table. It caches the newest version it has seen; ``refresh()`` reloads.

    Its writes commit through the table's own log, or for a table of a database through the
    database (or a transaction, or a database snapshot). Maintenance is ``table.maintenance``
    (compaction, expiry, garbage collection, purges, repair), also reachable as methods here."""

    def __init__(
        self, store: ObjectStore, manifest: Manifest, committer: Committer, *, damage: Damage | None = None
    ) -> None:
        self._handle = TableHandle(store, manifest, committer, damage=damage)
        self.maintenance = Maintenance(self._handle)
        """Compaction, expiry, garbage collection, purges and repair of this table."""

    @classmethod
    def standalone(cls, store: ObjectStore, manifest: Manifest) -> Table:
        """A handle on the standalone table at ``store``, at ``manifest``, committing to its own log."""
        return cls(store, manifest, own_log(store, None))

    @property
    def store(self) -> ObjectStore:
        """The object store under the table's root."""
        return self._handle.store

    @property
    def uri(self) -> str:
        return self._handle.uri

    @property
    def version(self) -> int:
        """The newest version this handle knows (``refresh()`` to look for newer ones)."""
        return self._handle.version

    @property
    def schema(self) -> pa.Schema:
        return self._handle.schema

    @property
    def primary_key(self) -> str | None:
        return self._handle.primary_key

    @property
    def properties(self) -> dict[str, str]:
        return self._handle.properties

    @property
    def settings(self) -> TableProperties:
        """The table's properties, parsed, with defaults for those not set."""
        return self._handle.settings

    @property
    def manifest(self) -> Manifest:
        return self._handle.manifest

    @property
    def damage(self) -> str | None:
        """Why the table cannot be written (and perhaps its newest version not read), else ``None``."""
        damage = self._handle.damage
        return None if damage is None else damage.message

    def refresh(self) -> Table:
        """Load the newest committed version."""
        self._handle.refresh()
        return self

    def manifest_at(self, version: int | None = None, as_of: datetime | str | None = None) -> Manifest:
        """The manifest of a version, of the version current at ``as_of`` (a datetime or an ISO
        8601 string; without a zone, local time), or the newest known."""
        return self._handle.manifest_at(version, as_of)

    def history(self, limit: int | None = None) -> list[HistoryEntry]:
        """Retained commits newest first, down to the oldest retained or ``limit``. Expired
        versions are skipped (an erasure's purge can expire some and keep older ones); an
        unreadable version is listed with its ``error``."""
        self._handle.refresh()
        return history(self.store, self.manifest.table_uuid, limit)

    def snapshot(self, version: int | None = None, as_of: datetime | str | None = None) -> Snapshot:
        """Read access to a version. The handle keeps the last one it gave, so scans of the same
        version share what it has worked out (column mappings, row-group statistics)."""
        return self._handle.snapshot(version, as_of)

    def scan(
        self,
        columns: list[str] | None = None,
        filter: Where | None = None,
        *,
        version: int | None = None,
        as_of: datetime | str | None = None,
    ) -> Scan:
        """A lazy scan of the newest known version, or of ``version`` / the version at ``as_of``.

        :param columns: the columns to read (all when ``None``), as a list of names.
        :param filter: the rows to keep: castable's SQL (``"id > 5 AND name = 'a'"``), an Arrow
            expression, or a parsed predicate; files and row groups it rules out are not read.
        :param version: a version to read instead of the newest (time travel).
        :param as_of: read the version current at this time (a datetime or an ISO 8601 string).
        :returns: a :class:`~castable.read.scan.Scan`; ``to_arrow()``, ``count()``, ``to_pandas()``
            and the Arrow stream interface read it.
        """
        return self._handle.scan(columns, filter, version=version, as_of=as_of)

    def changes(
        self,
        start_version: int | None = None,
        end_version: int | None = None,
        *,
        start_time: datetime | str | None = None,
        end_time: datetime | str | None = None,
        columns: list[str] | None = None,
        filter: Where | None = None,
    ) -> ChangeScan:
        """Every row change committed in versions ``start_version`` through ``end_version``
        (both included; ``None``: the newest), or from ``start_time`` to ``end_time``: a lazy
        scan of the rows with ``_change_type``, ``_commit_version`` and ``_commit_timestamp``,
        reading only what changed (see :mod:`castable.read.changes`)."""
        newest = self._handle.refresh().readable()
        return change_scan(
            self.store,
            newest,
            start_version,
            end_version,
            start_time=start_time,
            end_time=end_time,
            columns=columns,
            filter=filter,
        )

    def to_arrow(self, **kwargs: Any) -> pa.Table:
        return self.scan(**kwargs).to_arrow()

    def count(self, **kwargs: Any) -> int:
        return self.scan(**kwargs).count()

    def committed_version(self, commit_id: str) -> int | None:
        """The version a commit with this id landed as, while the table's recent history holds it
        (``commit.id-retention`` commits); a write repeating that id commits nothing."""
        return self._handle.committed_version(commit_id)

    def append(
        self,
        data: DataLike,
        *,
        commit_id: str | None = None,
        on_rows: Callable[[int], None] | None = None,
        source_ids: Sequence[str] = (),
        schema_mode: SchemaMode = "strict",
    ) -> WriteResult:
        """Append rows in one commit (see :func:`castable.ops.writes.append`).

        :param data: the rows: a pyarrow Table, RecordBatch or reader, an iterable of them, or a
            pandas DataFrame, of the table's schema (``SchemaMismatchError`` if they do not fit).
        :param commit_id: makes the append idempotent: repeated with the same id, it commits
            nothing and returns what the first one committed (``retried`` set).
        :param on_rows: called with the number of rows written, as the append streams.
        :param source_ids: names of the inputs the rows come from, each consumed once.
        :param schema_mode: ``"strict"`` refuses columns the table lacks; ``"merge"`` adds them.
        :returns: what it committed: the version, the commit id, the rows, files and bytes added.
        """
        return writes.append(
            self._handle, commit_id, data, on_rows=on_rows, source_ids=source_ids, schema_mode=schema_mode
        )

    def upsert(
        self,
        data: DataLike,
        *,
        op_column: str | None = None,
        delete_ops: Collection[str] = DELETE_OPS,
        last_wins: bool = False,
        commit_id: str | None = None,
        source_ids: Sequence[str] = (),
        count: bool = False,
    ) -> WriteResult:
        """Insert ``data``'s rows, replacing every live row with one of their primary keys, in one
        commit (see :func:`castable.ops.writes.upsert`: change feeds with ``op_column``).

        :returns: what it committed. How many live rows it replaced (and so how many it
            inserted) is not counted unless ``count``: the replaced keys get a tombstone and no
            row is read for it; ``count=True`` counts the live rows of the versions before and
            after (a read of both).
        """
        return self._counted(
            count,
            writes.upsert(
                self._handle,
                commit_id,
                data,
                op_column=op_column,
                delete_ops=delete_ops,
                last_wins=last_wins,
                source_ids=source_ids,
            ),
        )

    def overwrite(
        self, data: DataLike, *, where: Where | None = None, commit_id: str | None = None, count: bool = False
    ) -> WriteResult:
        """Replace every row of the table, or exactly the rows matching ``where``, with ``data`` in
        one commit (see :func:`castable.ops.writes.overwrite`); what it committed, the rows it
        replaced counted when that needs no read or when ``count`` (as :meth:`upsert`)."""
        return self._counted(count, writes.overwrite(self._handle, commit_id, data, where=where))

    def update(
        self, set: Mapping[str, object], where: Where | None = None, *, commit_id: str | None = None
    ) -> WriteResult:
        """Set columns of the rows matching ``where`` (every row without it) to SQL expressions of
        their old values in one commit; what it committed, ``rows_updated`` included (see
        :func:`castable.ops.writes.update`)."""
        return writes.update(self._handle, commit_id, set, where)

    def merge(self, source: DataLike, *, source_alias: str = "s", target_alias: str = "t") -> MergeBuilder:
        """A merge of ``source`` into the table by primary key: add ``when_*`` clauses, then
        ``execute()`` (see :mod:`castable.ops.merge`)."""
        return MergeBuilder(self._handle, source, source_alias=source_alias, target_alias=target_alias)

    def add_files(
        self,
        files: Sequence[str | DataFile],
        *,
        mode: AddMode = "append",
        where: Where | None = None,
        commit_id: str | None = None,
        verify: Verify = "decode",
    ) -> WriteResult:
        """Register Parquet files already written under the table's ``data/`` prefix, in ``mode``
        (append, upsert or overwrite), each decoded in full unless ``verify="footer"``; what it
        committed (see :func:`castable.ops.writes.add_files`)."""
        return writes.add_files(self._handle, commit_id, files, mode=mode, where=where, verify=verify)

    def batch_writer(
        self,
        *,
        max_rows: int = 1_000_000,
        max_bytes: int = 128 * 1024 * 1024,
        max_seconds: float = 10.0,
        commit_id_prefix: str | None = None,
    ) -> BatchWriter:
        """A writer that groups many small appends into few commits (see :class:`BatchWriter`)."""
        return BatchWriter(
            self._handle,
            max_rows=max_rows,
            max_bytes=max_bytes,
            max_seconds=max_seconds,
            commit_id_prefix=commit_id_prefix,
        )

    def delete(self, predicate: Where, *, commit_id: str | None = None, count: bool = False) -> WriteResult:
        """Soft-delete the rows matching ``predicate`` with one tombstone file.

        Nothing is committed when no row matches (``committed`` is False).

        :param predicate: the rows to delete, in castable's SQL or as an Arrow expression.
        :param commit_id: makes the delete idempotent (see :meth:`append`).
        :param count: count the rows deleted when the delete did not: a delete by primary key
            (a range, or a list of keys) writes its tombstone without reading which keys are
            live, which is what makes it constant-time; counting reads the live rows of the
            versions before and after.
        :returns: what it committed: the version, the commit id and ``rows_deleted`` (``None``,
            "not counted", for a delete by key unless ``count``).
        """
        return self._counted(count, writes.delete(self._handle, commit_id, predicate))

    def _counted(self, count: bool, result: WriteResult) -> WriteResult:
        """``result`` with its uncounted rows counted, if asked and if it committed a version of
        its own (inside a transaction nothing is committed yet, and nothing is counted)."""
        if not count or not result.not_counted() or not result.committed or result.staged:
            return result
        return result.counted(self.count(version=result.version - 1), self.count(version=result.version))

    def erase(
        self,
        predicate: Where,
        *,
        commit_id: str | None = None,
        mode: EraseMode = "auto",
        purge: bool = False,
        files: list[str] | None = None,
    ) -> EraseReport:
        """Physically remove the rows matching ``predicate`` and commit the rewritten files.

        ``mode="splice"`` rewrites only the affected row groups server-side (multipart upload
        with range copies), ``"rewrite"`` rewrites whole files, ``"auto"`` splices unless a file
        is small. Older versions still reference the old files until ``purge_erased`` (or
        ``purge=True``) expires them and deletes the old objects: a purge after an erase that
        changed anything expires every version before it (each lists a replaced file), so time
        travel and the change feed start at the erase; its report says which
        (``report.purge.versions_expired``, in words ``report.described()``). ``files`` restricts the erase
        to those data files (one unit of work of a fan-out).
        """
        report = writes.erase(self._handle, commit_id, predicate, mode=mode, files=files)
        if purge:
            report.purge = self.maintenance.purge_erased(report)
        return report

    def restore(
        self, version: int | None = None, *, as_of: datetime | str | None = None, commit_id: str | None = None
    ) -> WriteResult:
        """Commit a new version whose files and tombstones are those of ``version`` (or of the
        version at ``as_of``); what it committed (see :func:`castable.ops.metadata.restore`). No data is copied."""
        return metadata.restore(self._handle, commit_id, version, as_of=as_of)

    def alter(self, *, commit_id: str | None = None) -> SchemaUpdate[WriteResult]:
        """Changes to the schema, committed together as one version when the update's
        ``commit()`` is called (or its ``with`` block ends). No data is read or written:
        columns are found in data files by field id, so files of every schema generation
        read together. Lossy changes, and dropping or retyping the primary key, are refused."""
        return SchemaUpdate(partial(metadata.alter, self._handle, commit_id))

    def add_columns(self, columns: Sequence[pa.Field], *, commit_id: str | None = None) -> WriteResult:
        """Add nullable ``columns`` in one commit (an :meth:`alter` of adds only, what a write
        bringing new columns asks for before it writes files with them); what it committed."""
        update = self.alter(commit_id=commit_id)
        for column in columns:
            update.add_column(column.name, column.type)
        return update.commit()

    def set_properties(
        self, changes: Mapping[str, object], *, remove: Collection[str] = (), commit_id: str | None = None
    ) -> WriteResult:
        """Commit new values of table properties, and remove those named in ``remove`` (the
        others keep theirs); what it committed. A version of its own, like a schema change: no data
        is read or written, and an unknown or malformed setting is refused with nothing committed."""
        return metadata.set_properties(self._handle, commit_id, changes, remove=remove)

    @property
    def partitioning(self) -> Partitioning:
        """The table's partition specs: the default one new files are written with, and older ones."""
        return self.manifest.partitioning

    def partition_by(self, fields: PartitionBy, *, commit_id: str | None = None) -> WriteResult:
        """Partition new files by ``fields`` (``"day(ts)"``, ``"bucket(16, id)"``, ``"region"``;
        none: unpartitioned), in a version of its own that rewrites nothing: files written before
        keep their spec, and scans prune each file by its own. Iceberg's spec evolution."""
        return metadata.partition_by(self._handle, commit_id, fields)

    @property
    def sorting(self) -> Sorting:
        """The table's sort orders: the default one writes and compaction follow, and older ones."""
        return self.manifest.sorting

    def sort_by(self, fields: SortBy, *, commit_id: str | None = None) -> WriteResult:
        """Sort the rows of every file written from now on (appends, rewrites, compaction) by
        ``fields`` (``"ts"``, ``"id DESC NULLS LAST"``, ``"day(ts)"``; none: unsorted), in a
        version of its own that rewrites nothing; a compaction sorts older files. Iceberg's
        write order."""
        return metadata.sort_by(self._handle, commit_id, fields)

    def upgrade(self, *, commit_id: str | None = None) -> WriteResult:
        """Rewrite the table in the latest format version, in one commit that copies no data:
        the files and tombstones are listed in segments; what it committed (nothing, if the
        table is already in the latest format)."""
        return metadata.upgrade(self._handle, commit_id)

    def compact(
        self,
        *,
        min_file_size: int | None = None,
        delete_ratio: float | None = None,
        sort_by: str | None = None,
        coalesce_tombstones: bool = True,
        files: list[str] | None = None,
        commit_id: str | None = None,
    ) -> CompactReport:
        """``table.maintenance.compact``: rewrite small and delete-heavy files, merge tombstones."""
        return self.maintenance.compact(
            min_file_size=min_file_size,
            delete_ratio=delete_ratio,
            sort_by=sort_by,
            coalesce_tombstones=coalesce_tombstones,
            files=files,
            commit_id=commit_id,
        )

    def compact_group(
        self, files: list[str], *, sort_by: str | None = None, commit_id: str | None = None
    ) -> CompactReport:
        """``table.maintenance.compact_group``: rewrite exactly ``files``, one planned group."""
        return self.maintenance.compact_group(files, sort_by=sort_by, commit_id=commit_id)

    def coalesce_tombstones(self, *, commit_id: str | None = None) -> CompactReport:
        """``table.maintenance.coalesce_tombstones``: merge tombstone files, rewriting no data."""
        return self.maintenance.coalesce_tombstones(commit_id=commit_id)

    def plan_compaction(
        self, *, min_file_size: int | None = None, delete_ratio: float | None = None
    ) -> list[list[str]]:
        """``table.maintenance.plan_compaction``: groups of files worth compacting in parallel."""
        return self.maintenance.plan_compaction(min_file_size=min_file_size, delete_ratio=delete_ratio)

    def expire(self, *, retain_versions: int | None = None, retain_for: timedelta | None = None) -> ExpireReport:
        """``table.maintenance.expire``: delete the manifests of old versions."""
        return self.maintenance.expire(retain_versions=retain_versions, retain_for=retain_for)

    def gc(self, *, orphan_grace: timedelta | None = None, dry_run: bool = False) -> GcReport:
        """``table.maintenance.gc``: delete files no retained version references."""
        return self.maintenance.gc(orphan_grace=orphan_grace, dry_run=dry_run)

    def purge_erased(self, report: EraseReport) -> PurgeReport:
        """``table.maintenance.purge_erased``: complete an erasure."""
        return self.maintenance.purge_erased(report)

    def repair(self, *, commit_id: str | None = None) -> int:
        """``table.maintenance.repair``: make a damaged table writable again."""
        return self.maintenance.repair(commit_id=commit_id)

    def __repr__(self) -> str:
        return f"Table({self.uri!r}, version={self.version})"


def handle_of(table: Table) -> TableHandle:
    """The internal handle under ``table``: for the library's layers above this one (a database
    commits and resets its members' handles, a front end asks what a write would refuse)."""
    return table._handle
