"""The internal handle the operations receive: one table's state (the newest version seen, its
damage, the last snapshot given) and the two steps every write is built from.

:class:`~castable.table.Table` is the user's facade over a :class:`TableHandle`; the modules
that write, merge, batch and maintain a table take the handle (the protocol
:class:`castable.commit.handle.Handle`), so what only the library calls (``begin_write``,
``commit_change``, ``adopt``, ...) never shows on the user's object or in its reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

import pyarrow as pa

from castable.commit.change import Change, NextState, new_commit_id
from castable.commit.committer import Committer
from castable.commit.conflicts import Access, Rows
from castable.commit.handle import SchemaMode, WriteSession, written
from castable.commit.written import WriteResult
from castable.errors import CorruptObjectError, InvalidInputError
from castable.format.manifest import Manifest
from castable.format.properties import TableProperties
from castable.format.times import as_datetime
from castable.inputs.batches import DataLike, conforming_batches
from castable.maintenance.damage import Damage, assess
from castable.maintenance.history import manifest_as_of, manifest_of_version
from castable.ops import writes
from castable.read.predicate import Constant
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.read.where import Where, parse_predicate
from castable.store import ObjectStore


class TableHandle:
    """One table at the newest version it has seen, committing through its ``committer`` (the
    table's own log, or for a table of a database the database, a transaction or a snapshot)."""

    def __init__(
        self, store: ObjectStore, manifest: Manifest, committer: Committer, *, damage: Damage | None = None
    ) -> None:
        self.store = store
        self.committer = committer
        self._manifest = manifest
        self._damage = damage
        self._snapshot: Snapshot | None = None

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
        """The table's properties, parsed."""
        return TableProperties.parse(self._manifest.properties)

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    @property
    def damage(self) -> Damage | None:
        """What is damaged, if the newest versions or the pointer could not be read."""
        return self._damage

    def refresh(self) -> TableHandle:
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

    def readable(self) -> Manifest:
        """The newest version, which must be readable to be read or written on."""
        if self._damage is not None and not self._damage.newest_readable:
            raise CorruptObjectError(self._damage.message)
        return self._manifest

    def maintained(self) -> Manifest:
        """The newest version, to expire or collect garbage from: for a table of a database, the
        newest whose own manifest is written (every committed version is rolled forward first)."""
        manifest = self.committer.before_maintenance(self.refresh()._manifest)
        self.adopt(manifest)
        return manifest

    def manifest_at(self, version: int | None = None, as_of: datetime | str | None = None) -> Manifest:
        """The manifest of a version, of the version current at ``as_of`` (a datetime or an ISO
        8601 string; without a zone, local time), or the newest known."""
        if version is not None and as_of is not None:
            raise InvalidInputError("give version or as_of, not both")
        if as_of is not None:
            return manifest_as_of(self.store, self.refresh()._manifest, as_datetime(as_of))
        if version is None:
            return self.readable()
        return manifest_of_version(self.store, self._manifest, version)

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
        """A lazy scan of the newest known version, or of ``version`` / the version at ``as_of``;
        a scan of the newest is recorded as read (a transaction validates it)."""
        if isinstance(columns, str):
            raise InvalidInputError(f"columns must be a list of names, such as {columns.split(',')!r}, not a string")
        snapshot = self.snapshot(version, as_of)
        predicate = None if filter is None else parse_predicate(filter, snapshot.schema)
        if version is None and as_of is None:
            self.observe(Rows(predicate or Constant(True), None if columns is None else tuple(columns)))
        return Scan(snapshot, columns, predicate)

    def committed_version(self, commit_id: str) -> int | None:
        """The version a commit with this id landed as, while the table's recent history holds it."""
        return self._manifest.recent_commits.get(commit_id)

    def begin_write(self, commit_id: str | None) -> WriteSession:
        """Every write starts here (:func:`~castable.commit.handle.write_operation`): a session
        with a valid ``commit_id`` (a new one if none is given) on a store known to honour
        conditional writes (probed once per process and store), and the version that commit id
        already committed as, if it did (a retry commits nothing)."""
        if commit_id is not None and self.committer.transactional:
            raise InvalidInputError(
                "a write inside a transaction takes the transaction's commit_id: "
                "pass it to db.transaction(commit_id=...)"
            )
        checked = new_commit_id(commit_id)
        if self._damage is not None:
            raise CorruptObjectError(self._damage.message)
        self.store.check_conditional_writes()
        return WriteSession(checked, self._manifest.recent_commits.get(checked))

    def commit_change(
        self,
        operation: str,
        session: WriteSession,
        build: Callable[[Manifest], NextState],
        access: Access | None = None,
        *,
        across_schema: bool = False,
    ) -> WriteResult:
        """Commit one change through the committer, declaring to the conflict model what a
        transaction validates for it (``access``; ``None`` for an operation that cannot run in
        one) and whether it holds ``across_schema`` changes; what it committed. What follows a
        commit (publishing Iceberg metadata) is the committer's concern."""
        change = Change(operation, build, access, across_schema, session.uploads)
        result = self.committer.commit_change(self._manifest, change, session.commit_id, self.adopt)
        self.adopt(result.manifest)
        return written(session, operation, result)

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
    ) -> WriteResult:
        """Append rows in one commit (:func:`castable.ops.writes.append`); what it committed."""
        return writes.append(self, commit_id, data, on_rows=on_rows, source_ids=source_ids, schema_mode=schema_mode)
