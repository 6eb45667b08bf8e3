"""The table handle: a thin facade over the modules that read, write and maintain a table.

A :class:`Table` caches the newest version it has seen and is given its committer (its own
log, or its database's) when it is made; open or create one with :mod:`castable.tables`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa

from castable.commit.committer import Committer, OwnLog
from castable.commit.conflicts import Access, Rows
from castable.commit.handle import SchemaMode, WriteStart
from castable.commit.protocol import Change, CommitResult, NextState, new_commit_id
from castable.errors import CorruptObjectError, InvalidInputError
from castable.format.evolution import SchemaUpdate
from castable.format.manifest import DataFile, Manifest
from castable.format.properties import TableProperties
from castable.format.times import as_datetime
from castable.inputs.batches import DataLike, conforming_batches
from castable.maintenance.damage import Damage, assess
from castable.maintenance.erase import EraseMode, EraseReport
from castable.maintenance.history import HistoryEntry, history, manifest_as_of, manifest_of_version
from castable.ops import writes
from castable.ops.batching import BatchWriter
from castable.ops.feed import change_scan
from castable.ops.merge import MergeBuilder
from castable.ops.register import Verify
from castable.ops.replacement import Rewrite
from castable.ops.writes import DELETE_OPS, AddMode
from castable.read.changes import ChangeScan
from castable.read.predicate import Constant, Predicate, Where, parse_predicate
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore
from castable.table import iceberg
from castable.table.maintenance import TableMaintenance


class Table(TableMaintenance):
    """A handle on one table. It caches the newest version it has seen; ``refresh()`` reloads.

    Its ``committer`` commits its writes and finds its newest version: the table's own log, or
    for a table of a database the database (or a transaction, or a database snapshot)."""

    def __init__(
        self, store: ObjectStore, manifest: Manifest, committer: Committer, *, damage: Damage | None = None
    ) -> None:
        self.store = store
        self.committer = committer
        self._manifest = manifest
        self._damage = damage
        self._snapshot: Snapshot | None = None

    @classmethod
    def standalone(cls, store: ObjectStore, manifest: Manifest) -> Table:
        """A handle on the standalone table at ``store``, at ``manifest``, committing to its own log."""
        return cls(store, manifest, OwnLog(store, None))

    @property
    def uri(self) -> str:
        return self.store.uri

    @property
    def version(self) -> int:
        """The newest version this handle knows (``refresh()`` to look for newer ones)."""
        return self._manifest.version

    @property
    def schema(self) -> pa.Schema:
        return self._manifest.schema

    @property
    def primary_key(self) -> str | None:
        return self._manifest.primary_key[0] if self._manifest.primary_key else None

    @property
    def properties(self) -> dict[str, str]:
        return dict(self._manifest.properties)

    @property
    def settings(self) -> TableProperties:
        """The table's properties, parsed, with defaults for those not set."""
        return TableProperties.parse(self._manifest.properties)

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    @property
    def damage(self) -> str | None:
        """Why the table cannot be written (and perhaps its newest version not read), else ``None``."""
        return None if self._damage is None else self._damage.message

    def refresh(self) -> Table:
        """Load the newest committed version."""
        try:
            self.adopt(self.committer.newest(self._manifest))
        except CorruptObjectError as e:
            if self._manifest.database is not None:  # a member's versions are read from its database's log
                raise
            self._damage = assess(self.store, e, self._manifest.table_uuid)
            self.adopt(self._damage.readable)
        else:
            self._damage = None
        return self

    def adopt(self, manifest: Manifest) -> None:
        """Make a newer version this handle's own (an older one is ignored)."""
        if manifest.version >= self._manifest.version:
            self._manifest = manifest

    def reset_to(self, manifest: Manifest) -> None:
        """Read ``manifest`` from now on, even an older one (a transaction's writes dropped)."""
        self._manifest, self._snapshot = manifest, None

    def _readable(self) -> Manifest:
        """The newest version, which must be readable to be read or written on."""
        if self._damage is not None and not self._damage.newest_readable:
            raise CorruptObjectError(self._damage.message)
        return self._manifest

    def manifest_at(self, version: int | None = None, as_of: datetime | str | None = None) -> Manifest:
        """The manifest of a version, of the version current at ``as_of`` (a datetime or an ISO
        8601 string; without a zone, local time), or the newest known."""
        if version is not None and as_of is not None:
            raise InvalidInputError("give version or as_of, not both")
        if as_of is not None:
            return manifest_as_of(self.store, self.refresh()._manifest, as_datetime(as_of))
        if version is None:
            return self._readable()
        return manifest_of_version(self.store, self._manifest, version)

    def history(self, limit: int | None = None) -> list[HistoryEntry]:
        """Retained commits newest first, down to the oldest retained or ``limit``. Expired
        versions are skipped (an erasure's purge can expire some and keep older ones); an
        unreadable version is listed with its ``error``."""
        self.refresh()
        return history(self.store, self._manifest.table_uuid, limit)

    def snapshot(self, version: int | None = None, as_of: datetime | str | None = None) -> Snapshot:
        """Read access to a version. The handle keeps the last one it gave, so scans of the same
        version share what it has worked out (column mappings, row-group statistics)."""
        manifest = self.manifest_at(version, as_of)
        snapshot = self._snapshot
        if snapshot is None or snapshot.manifest is not manifest:
            snapshot = self._snapshot = Snapshot(self.store, manifest)
        return snapshot

    def scan(
        self,
        columns: list[str] | None = None,
        filter: Where | None = None,
        *,
        version: int | None = None,
        as_of: datetime | str | None = None,
    ) -> Scan:
        """A lazy scan of the newest known version, or of ``version`` / the version at ``as_of``."""
        if isinstance(columns, str):
            raise InvalidInputError(f"columns must be a list of names, such as {columns.split(',')!r}, not a string")
        snapshot = self.snapshot(version, as_of)
        predicate = None if filter is None else parse_predicate(filter, snapshot.schema)
        if version is None and as_of is None:
            self.observe(Rows(predicate or Constant(True), None if columns is None else tuple(columns)))
        return Scan(snapshot, columns, predicate)

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
        newest = self.refresh()._readable()
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
        return self._manifest.recent_commits.get(commit_id)

    def begin_write(self, commit_id: str | None) -> WriteStart:
        """Every write starts here: a valid ``commit_id`` (a new one if none is given), a store
        known to honour conditional writes (probed once per process and store), and the version
        that commit id already landed as, if it did (a retry commits nothing)."""
        if commit_id is not None and self.committer.transactional:
            raise InvalidInputError(
                "a write inside a transaction takes the transaction's commit_id: "
                "pass it to db.transaction(commit_id=...)"
            )
        checked = new_commit_id(commit_id)
        if self._damage is not None:
            raise CorruptObjectError(self._damage.message)
        self.store.check_conditional_writes()
        return WriteStart(checked, self._manifest.recent_commits.get(checked))

    def commit_change(
        self,
        operation: str,
        commit_id: str,
        build: Callable[[Manifest], NextState],
        access: Access | None = None,
        *,
        across_schema: bool = False,
    ) -> CommitResult:
        """Commit one change through the committer, declaring to the conflict model what a
        transaction validates for it (``access``; ``None`` for an operation that cannot run in
        one) and whether it holds ``across_schema`` changes."""
        change = Change(operation, build, access, across_schema)
        result = self.committer.commit_change(self._manifest, change, commit_id, self.adopt)
        self.adopt(result.manifest)
        if self.settings.publish_iceberg and isinstance(self.committer, OwnLog) and iceberg.publishes_here():
            iceberg.publish_soon(self.store, result.version)
        return result

    def observe(self, rows: Rows) -> None:
        """Tell the committer (a transaction records it) that ``rows`` of the current version were read."""
        self.committer.observe(self._manifest, rows)

    def conforming_batches(
        self, data: DataLike, schema: pa.Schema | None = None, *, fill: bool = False
    ) -> Iterator[pa.RecordBatch]:
        """``data`` as non-empty RecordBatches of ``schema`` (default: the table's); with
        ``fill``, nullable columns ``data`` lacks are NULL. ``SchemaMismatchError`` if it does not fit."""
        return conforming_batches(data, self.schema if schema is None else schema, self.primary_key, fill=fill)

    def append(
        self,
        data: DataLike,
        *,
        commit_id: str | None = None,
        on_rows: Callable[[int], None] | None = None,
        source_ids: Sequence[str] = (),
        schema_mode: SchemaMode = "strict",
    ) -> int:
        """Append rows in one commit and return the committed version (see :func:`castable.ops.writes.append`:
        idempotent ``commit_id``, ``source_ids`` consumed once, ``schema_mode``)."""
        return writes.append(
            self, data, commit_id=commit_id, on_rows=on_rows, source_ids=source_ids, schema_mode=schema_mode
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
    ) -> int:
        """Insert ``data``'s rows, replacing every live row with one of their primary keys, in one
        commit; return the version (see :func:`castable.ops.writes.upsert`: change feeds with ``op_column``)."""
        return writes.upsert(
            self,
            data,
            op_column=op_column,
            delete_ops=delete_ops,
            last_wins=last_wins,
            commit_id=commit_id,
            source_ids=source_ids,
        )

    def overwrite(self, data: DataLike, *, where: Where | None = None, commit_id: str | None = None) -> int:
        """Replace every row of the table, or exactly the rows matching ``where``, with ``data`` in
        one commit; return the version (see :func:`castable.ops.writes.overwrite`)."""
        return writes.overwrite(self, data, where=where, commit_id=commit_id)

    def update(self, set: Mapping[str, object], where: Where | None = None, *, commit_id: str | None = None) -> int:
        """Set columns of the rows matching ``where`` (every row without it) to SQL expressions of
        their old values in one commit; return the version (see :func:`castable.ops.writes.update`)."""
        return writes.update(self, set, where, commit_id=commit_id)

    def merge(self, source: DataLike, *, source_alias: str = "s", target_alias: str = "t") -> MergeBuilder:
        """A merge of ``source`` into the table by primary key: add ``when_*`` clauses, then
        ``execute()`` (see :mod:`castable.ops.merge`)."""
        return MergeBuilder(self, source, source_alias=source_alias, target_alias=target_alias)

    def rewrite(
        self, operation: str, derive: Callable[[Snapshot], Rewrite], access: Access, *, commit_id: str | None = None
    ) -> int | None:
        """Commit what ``derive`` makes of the latest version (rows replaced, rows written), made
        again on a newer version when a concurrent commit touched what it read; the version, or
        ``None`` when it changes nothing. The engine of :meth:`update` and merges; ``access`` is
        what a transaction validates for it."""
        return writes.rewrite(self, operation, derive, access, commit_id=commit_id)

    def add_files(
        self,
        files: Sequence[str | DataFile],
        *,
        mode: AddMode = "append",
        where: Where | None = None,
        commit_id: str | None = None,
        verify: Verify = "decode",
    ) -> int:
        """Register Parquet files already written under the table's ``data/`` prefix, in ``mode``
        (append, upsert or overwrite), each decoded in full unless ``verify="footer"``; return the
        version (see :func:`castable.ops.writes.add_files`)."""
        return writes.add_files(self, files, mode=mode, where=where, commit_id=commit_id, verify=verify)

    def check_add_mode(self, mode: str, where: Where | None = None) -> Predicate | None:
        """What :meth:`add_files` refuses in ``mode`` and ``where`` whatever the files hold (so an
        engine can ask before it writes them); the parsed ``where``."""
        return writes.check_add_mode(self, mode, where)

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
            self, max_rows=max_rows, max_bytes=max_bytes, max_seconds=max_seconds, commit_id_prefix=commit_id_prefix
        )

    def delete(self, predicate: Where, *, commit_id: str | None = None) -> int:
        """Soft-delete the rows matching ``predicate`` with one tombstone file; return the version.

        Nothing is committed (and the current version is returned) when no row matches.
        """
        return writes.delete(self, predicate, commit_id=commit_id)

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
        ``purge=True``) expires them and deletes the old objects. ``files`` restricts the erase
        to those data files (one unit of work of a fan-out).
        """
        report = writes.erase(self, predicate, commit_id=commit_id, mode=mode, files=files)
        if purge:
            report.purge = self.purge_erased(report)
        return report

    def restore(
        self, version: int | None = None, *, as_of: datetime | str | None = None, commit_id: str | None = None
    ) -> int:
        """Commit a new version whose files and tombstones are those of ``version`` (or of the
        version at ``as_of``); return it (see :func:`castable.ops.writes.restore`). No data is copied."""
        return writes.restore(self, version, as_of=as_of, commit_id=commit_id)

    def alter(self, *, commit_id: str | None = None) -> SchemaUpdate:
        """Changes to the schema, committed together as one version when the update's
        ``commit()`` is called (or its ``with`` block ends). No data is read or written:
        columns are found in data files by field id, so files of every schema generation
        read together. Lossy changes, and dropping or retyping the primary key, are refused."""
        return SchemaUpdate(partial(writes.alter, self, commit_id=commit_id))

    def add_columns(self, columns: Sequence[pa.Field], *, commit_id: str | None = None) -> int:
        """Add nullable ``columns`` in one commit (an :meth:`alter` of adds only, what a write
        bringing new columns asks for before it writes files with them); return the version."""
        update = self.alter(commit_id=commit_id)
        for column in columns:
            update.add_column(column.name, column.type)
        return update.commit()

    def set_properties(
        self, changes: Mapping[str, object], *, remove: Collection[str] = (), commit_id: str | None = None
    ) -> int:
        """Commit new values of table properties, and remove those named in ``remove`` (the
        others keep theirs); the version. A version of its own, like a schema change: no data
        is read or written, and an unknown or malformed setting is refused with nothing committed."""
        return writes.set_properties(self, changes, remove=remove, commit_id=commit_id)

    def upgrade(self, *, commit_id: str | None = None) -> int:
        """Rewrite the table in the latest format version, in one commit that copies no data:
        the files and tombstones are listed in segments; return that version (or the current
        one, with nothing committed, if the table is already in the latest format)."""
        return writes.upgrade(self, commit_id=commit_id)

    def _maintained(self) -> Manifest:
        """The newest version, to expire or collect garbage from: for a table of a database, the
        newest whose own manifest is written (every committed version is rolled forward first)."""
        manifest = self.committer.before_maintenance(self.refresh()._manifest)
        self.adopt(manifest)
        return manifest

    def __repr__(self) -> str:
        return f"Table({self.uri!r}, version={self.version})"
