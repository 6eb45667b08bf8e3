"""Databases: several tables, one commit point, one snapshot (docs/format.md section 13).

>>> import castable, pyarrow as pa
>>> db = castable.create_database("/tmp/shop")
>>> orders = db.create_table("orders", pa.schema([("id", pa.int64())]), primary_key="id")
>>> lines = db.create_table("lines", pa.schema([("order_id", pa.int64())]))
>>> with db.transaction() as tx:
...     _ = tx.table("orders").append(pa.table({"id": [1]}))
...     _ = tx.table("lines").append(pa.table({"order_id": [1, 1]}))
>>> snap = db.snapshot()
>>> snap.table("orders").count(), snap.table("lines").count()
(1, 2)

These are the user's objects; the member tables they make commit through the committers of
:mod:`castable.commit.dbcommitters` (the database's log, a transaction's stager, a snapshot's
pinned reader).
"""

from __future__ import annotations

import contextlib
import uuid
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_random_exponential

from castable.commit import dblog
from castable.commit.change import Change, new_commit_id
from castable.commit.conflicts import Isolation, check_isolation
from castable.commit.create import check_not_nested, initial_manifest
from castable.commit.dbcommitters import (
    DatabaseLog,
    PinnedReader,
    TransactionStager,
    check_name,
    commit_retention,
    member_name,
)
from castable.commit.dblog import LOG_PREFIX, DatabaseVersion, TableWrite
from castable.commit.log import entry_as_of, read_manifest
from castable.commit.pointer import encode_pointer
from castable.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    CorruptObjectError,
    DatabaseAlreadyExistsError,
    DatabaseNotFoundError,
    EmptyWriteError,
    InvalidInputError,
    TableAlreadyExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)
from castable.format.entries import CommitInfo
from castable.format.layout import POINTER_KEY, manifest_key
from castable.format.manifest import LATEST_FORMAT_VERSION, Manifest, Membership, RecentCommits
from castable.format.properties import TableProperties
from castable.format.times import as_datetime, now
from castable.inputs.orders import SortBy
from castable.inputs.partitions import PartitionBy
from castable.maintenance.erase import EraseReport, check_erasable
from castable.maintenance.erasechange import EraseChange, EraseMode, check_mode
from castable.ops.feed import member_changes
from castable.read.changes import ChangeScan
from castable.read.predicate import Predicate
from castable.read.where import Where, parse_predicate
from castable.store import ObjectStore, PreconditionFailedError, store_from_uri
from castable.table import Table, handle_of

R = TypeVar("R")


def create_database(uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Database:
    """Create an empty database at ``uri`` (``s3://bucket/prefix``, ``file:///path`` or a path)."""
    return Database.create(store_from_uri(uri, storage_options))


def open_database(uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Database:
    """Open the latest version of the database at ``uri``."""
    return Database.load(store_from_uri(uri, storage_options))


@dataclass(frozen=True)
class DatabaseHistoryEntry:
    """One commit in the database's history: which tables it wrote, and how."""

    version: int
    timestamp: datetime
    operation: str
    commit_id: str
    tables: dict[str, dict[str, Any]]


class Database:
    """A handle on one database. It caches the newest version it has seen; ``refresh()`` reloads."""

    def __init__(self, log: DatabaseLog) -> None:
        self._log = log
        """The database's log as this handle knows it, and its member tables' committer."""

    @classmethod
    def load(cls, root: ObjectStore) -> Database:
        return cls(DatabaseLog.load(root))

    @classmethod
    def of_member(cls, store: ObjectStore, manifest: Manifest) -> Database:
        """The database of the member table at ``store`` (its parent prefix)."""
        membership = manifest.database
        if membership is None:
            raise InvalidInputError(f"{store.uri} is not a table of a database")
        parents = store.parents()
        try:
            db = cls.load(parents[0]) if parents else None
        except DatabaseNotFoundError:
            db = None
        if db is None or db._log.head.database_uuid != membership.database_uuid:
            raise CorruptObjectError(
                f"{store.uri} belongs to database {membership.database_uuid}, which is not at its parent prefix"
            )
        return db

    @classmethod
    def create(cls, root: ObjectStore) -> Database:
        log = root.child(LOG_PREFIX)
        if log.exists(POINTER_KEY) or log.exists(manifest_key(0)):
            raise DatabaseAlreadyExistsError(f"a database already exists at {root.uri}")
        if root.exists(POINTER_KEY) or root.exists(manifest_key(0)):
            raise DatabaseAlreadyExistsError(f"a table already exists at {root.uri}")
        check_not_nested(root)
        root.check_conditional_writes()
        first = DatabaseVersion(
            database_uuid=str(uuid.uuid4()),
            version=0,
            previous=None,
            created_at=now(),
            commit=CommitInfo("create", str(uuid.uuid4()), {}),
            tables={},
            manifests={},
            recent_commits=RecentCommits(),
        )
        try:
            log.put(manifest_key(0), first.to_json(), if_none_match=True)
        except PreconditionFailedError:
            raise DatabaseAlreadyExistsError(f"a database was created at {root.uri} meanwhile") from None
        log.put(POINTER_KEY, encode_pointer(0), if_none_match=True)
        return cls.load(root)

    # ------------------------------------------------------------------ metadata

    @property
    def store(self) -> ObjectStore:
        """The object store under the database's root."""
        return self._log.store

    @property
    def uri(self) -> str:
        return self.store.uri

    @property
    def version(self) -> int:
        """The newest database version this handle knows (``refresh()`` to look for newer ones)."""
        return self._log.head.version

    def tables(self) -> list[str]:
        """The names of the member tables, as of the newest known version."""
        return sorted(self._log.head.tables)

    def refresh(self) -> Database:
        """Load the newest committed version."""
        self._log.refresh()
        return self

    def committed_version(self, commit_id: str) -> int | None:
        """The database version a commit with this id landed as, while the recent history holds
        it; a transaction repeating that id commits nothing."""
        return self._log.head.recent_commits.get(commit_id)

    def version_at(self, version: int | None = None, as_of: datetime | str | None = None) -> DatabaseVersion:
        """A database version by number, the one current at ``as_of``, or the newest known."""
        if version is not None and as_of is not None:
            raise InvalidInputError("give version or as_of, not both")
        if as_of is not None:
            return self._version_as_of(as_datetime(as_of))
        head = self._log.head
        if version is None:
            return head
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise InvalidInputError(f"version must be a non-negative integer, not {version!r}")
        if version == head.version:
            return head
        return dblog.read_version(self._log.log_store, version, head.database_uuid)

    def _version_as_of(self, as_of: datetime) -> DatabaseVersion:
        if as_of.tzinfo is None:
            as_of = as_of.astimezone()
        head = self._log.refresh()
        read = partial(dblog.read_version, self._log.log_store, database_uuid=head.database_uuid)
        found = entry_as_of(read, 0, head, as_of)
        if found is None:
            raise VersionNotFoundError(f"the database at {self.uri} did not exist at {as_of.isoformat()}")
        return found

    def history(self, limit: int | None = None) -> list[DatabaseHistoryEntry]:
        """Commits newest first, down to the first or ``limit``."""
        head = self._log.refresh()
        entries: list[DatabaseHistoryEntry] = []
        for number in range(head.version, -1, -1):
            if limit is not None and len(entries) >= limit:
                break
            at = self.version_at(number)
            c = at.commit
            entries.append(
                DatabaseHistoryEntry(at.version, at.created_at, c.operation, c.commit_id, c.summary.get("tables", {}))
            )
        return entries

    # --------------------------------------------------------------------- reads

    def snapshot(self, version: int | None = None, as_of: datetime | str | None = None) -> DatabaseSnapshot:
        """Every table at one database version: the newest known, ``version``, or the one at ``as_of``."""
        return DatabaseSnapshot(self, self.version_at(version, as_of))

    def changes(
        self,
        name: str,
        start_version: int,
        end_version: int | None = None,
        *,
        columns: list[str] | None = None,
        filter: Where | None = None,
    ) -> ChangeScan:
        """Row changes of table ``name`` committed in database versions ``start_version``
        through ``end_version`` (``None``: the newest), as :meth:`castable.Table.changes` reads
        them, with each row's ``_commit_version`` the database version that committed it."""
        head = self._log.refresh()
        store = self.store.child(check_name(name))
        return member_changes(
            store,
            head,
            self.version_at,
            partial(self._log.member, name),
            name,
            start_version,
            end_version,
            columns=columns,
            filter=filter,
        )

    def table(self, name: str) -> Table:
        """A handle on member table ``name`` at its newest known version; its writes commit
        through the database log (one-table transactions)."""
        return Table(self.store.child(check_name(name)), self._log.member(name, self._log.head), self._log)

    def member_table(self, store: ObjectStore, manifest: Manifest) -> Table:
        """A handle on the member table at ``store`` (whose ``manifest`` names this database) at
        its newest version in the database, committing through it."""
        return Table(store, self._log.member(member_name(manifest, store.uri), self._log.head), self._log)

    # -------------------------------------------------------------------- writes

    def create_table(
        self,
        name: str,
        schema: pa.Schema,
        *,
        primary_key: str | list[str] | None = None,
        partition_by: PartitionBy | None = None,
        sort_by: SortBy | None = None,
        properties: Mapping[str, object] | None = None,
        commit_id: str | None = None,
        table_uuid: str | None = None,
    ) -> Table:
        """Add an empty table ``name`` to the database, in one database commit (``table_uuid``:
        the uuid a catalog announced; ``partition_by`` and ``sort_by`` as for :func:`castable.create_table`)."""
        check_name(name)
        commit_id = new_commit_id(commit_id)
        manifest = initial_manifest(
            schema,
            primary_key=primary_key,
            properties=properties,
            format_version=LATEST_FORMAT_VERSION,
            database=Membership(self._log.head.database_uuid, name, 0),
            table_uuid=table_uuid,
            partition_by=partition_by,
            sort_by=sort_by,
        )
        self.refresh()
        if self.committed_version(commit_id) is not None:  # a retry of a create that landed
            return self.table(name)
        if name in self._log.head.tables:
            raise TableAlreadyExistsError(f"database {self.uri} already has a table {name!r}")
        store = self.store.child(name)
        if store.exists(POINTER_KEY) or store.exists(manifest_key(0)):
            raise TableAlreadyExistsError(f"a table that is not in the database is at {store.uri}")
        self.store.check_conditional_writes()
        self._log.commit("create_table", commit_id, creates={name: manifest})
        return self.table(name)

    def drop_table(self, name: str, *, commit_id: str | None = None) -> int:
        """Remove table ``name`` from the database in one database commit, then delete its
        files; the database version the drop is. A commit to the table since it was last read
        fails (``CommitConflictError``); older database versions no longer read it
        (``VersionNotFoundError``). A drop repeated with its ``commit_id`` (after a crash or a
        lost answer) finishes deleting the files and lands once."""
        check_name(name)
        commit_id = new_commit_id(commit_id)
        self.refresh()
        version = self.committed_version(commit_id)
        if version is None:
            if name not in self._log.head.tables:
                raise TableNotFoundError(f"database {self.uri} has no table {name!r}; it has {self.tables()}")
            self.store.check_conditional_writes()
            version = self._log.commit("drop_table", commit_id, drops=[name]).version
        self._log.forget(name)
        if name not in self._log.head.tables:  # else a table made since under the name: it stays
            _delete_member_files(self.store.child(name), self._log.head.database_uuid, name)
        return version

    def transaction(self, commit_id: str | None = None, *, isolation: Isolation = "snapshot") -> Transaction:
        """A transaction over any of the tables: ``with db.transaction() as tx: tx.table(...)...``
        commits every write made through ``tx`` as one database version when the block ends,
        or none of them if it raises.

        ``isolation="snapshot"`` (the default): the transaction reads one snapshot, and fails
        with ``CommitConflictError`` if a commit since then changed a row it writes (first
        committer wins: no lost updates; write skew is possible). ``"serializable"`` also fails
        if such a commit changed a row it read (its scans' rows), so write skew is not.

        A transaction that only reads commits nothing and writes no version. Under snapshot
        isolation it cannot fail: it read one committed version. A serializable one still has
        its reads judged at the end, against the newest version, and fails like a writing one
        if a commit since its snapshot changed them. That is deliberate: castable serializes
        transactions in commit order, and with writers under snapshot isolation a reader can
        see a state that no serial order has (the read-only anomaly of Fekete, O'Neil and
        O'Neil, 2004), for which PostgreSQL's SSI can abort a read-only transaction too; a
        serializable read-only transaction that returns has read rows still current when it
        ended. Iceberg (and pyiceberg) never validate reads, so their read-only transactions
        are snapshot reads: use the default for that."""
        return Transaction(self, new_commit_id(commit_id), check_isolation(isolation))

    def run(
        self,
        fn: Callable[[Transaction], R],
        *,
        isolation: Isolation = "snapshot",
        commit_id: str | None = None,
        timeout: float | None = None,
    ) -> R:
        """Run ``fn(tx)`` as a transaction and commit it, running it again on a fresh snapshot
        (after a jittered, growing wait) while it fails with ``CommitConflictError``, for at
        most ``timeout`` seconds (default: the ``commit.timeout-seconds`` default); return what
        ``fn`` returned. Every run uses the same ``commit_id``, and after a
        ``CommitStateUnknownError`` the log is read before anything runs again: a run that
        landed is never repeated."""
        commit_id = new_commit_id(commit_id)
        check_isolation(isolation)
        limit = TableProperties.parse({}).commit_timeout_seconds if timeout is None else timeout
        retrying = Retrying(
            stop=stop_after_delay(limit),
            wait=wait_random_exponential(multiplier=0.01, max=1.0),
            retry=retry_if_exception_type((CommitConflictError, CommitStateUnknownError)),
            reraise=True,
        )
        for attempt in retrying:
            with attempt:
                tx = self.transaction(commit_id, isolation=isolation).begin()
                try:
                    result = fn(tx)
                except BaseException:
                    tx.abort()
                    raise
                try:
                    tx.commit()
                except CommitStateUnknownError:  # landed or not: the log says, and only then run again
                    if self.refresh().committed_version(commit_id) is None:
                        raise
        return result

    def erase(
        self,
        predicates: Mapping[str, str | pc.Expression | Predicate],
        *,
        commit_id: str | None = None,
        mode: EraseMode = "auto",
        purge: bool = False,
    ) -> dict[str, EraseReport]:
        """Physically remove the rows matching each table's predicate, in every table at once:
        the rewritten files of all the tables are committed as one database version. With
        ``purge``, each table's older versions and old objects are then removed (as
        :meth:`Table.purge_erased` does), so the erasure is complete."""
        check_mode(mode)
        if not predicates:
            raise EmptyWriteError("erase was given no table; nothing was committed")
        commit_id = new_commit_id(commit_id)
        self.refresh()
        tables = {name: self.table(name) for name in predicates}
        self.store.check_conditional_writes()
        parsed = {name: parse_predicate(p, tables[name].schema) for name, p in predicates.items()}
        check_erasable(self.store)
        changes = {
            name: EraseChange(t.store, parsed[name], t.manifest, mode, t.settings, None) for name, t in tables.items()
        }
        writes = [
            TableWrite(name, tables[name].manifest, [Change("erase", c.build)], commit_retention(tables[name].manifest))
            for name, c in changes.items()
            if not c.is_empty
        ]
        if commit_id in self._log.head.recent_commits or not writes:
            landed = {name: t.manifest for name, t in tables.items()}
        else:
            landed = self._log.commit("erase", commit_id, writes=writes).tables
        reports = {}
        for name, change in changes.items():
            report = reports[name] = change.report(landed.get(name, tables[name].manifest).version)
            if purge:
                report.purge = tables[name].refresh().purge_erased(report)
        return reports

    def __repr__(self) -> str:
        return f"Database({self.uri!r}, version={self.version}, tables={self.tables()})"


def _delete_member_files(store: ObjectStore, database_uuid: str, name: str) -> None:
    """Delete the objects of dropped member ``name`` at ``store``, its first manifest last: that
    one says the folder is this database's member, so a drop stopped half way is finished by
    the next, and a table of another owner found there is never touched."""
    try:
        first = read_manifest(store, 0)
    except (TableNotFoundError, VersionNotFoundError, CorruptObjectError):
        return  # deleted already, or not this database's member
    if first.database is None or (first.database.database_uuid, first.database.name) != (database_uuid, name):
        return
    keys = [info.key for info in store.list() if info.key != manifest_key(0)]
    store.delete_many(keys)
    store.delete(manifest_key(0))


class DatabaseSnapshot:
    """Every table of a database at one database version: a reader never sees half a transaction."""

    def __init__(self, database: Database, at: DatabaseVersion) -> None:
        self.database = database
        self._at = at

    @property
    def version(self) -> int:
        return self._at.version

    @property
    def created_at(self) -> datetime:
        return self._at.created_at

    @property
    def tables(self) -> dict[str, int]:
        """Each table's name and its version in this snapshot."""
        return {name: m.version for name, m in sorted(self._at.tables.items())}

    def table(self, name: str) -> Table:
        """Table ``name`` as this database version has it (read it with ``scan``, ``to_arrow``...)."""
        log = self.database._log
        return Table(log.store.child(check_name(name)), log.member(name, self._at), PinnedReader(log))

    def __repr__(self) -> str:
        return f"DatabaseSnapshot({self.database.uri!r}, version={self.version}, tables={self.tables})"


class Transaction:
    """Writes to several tables of a database, committed as one database version.

    Reads through ``tx.table(name)`` see the database as it was when the transaction began,
    plus the transaction's own writes. On commit every table is rebased on the newest version
    by its own rules (docs/format.md section 8); a conflict on any table aborts the whole transaction.
    Nothing is locked: a transaction left open blocks no one, and commits nothing.
    """

    def __init__(self, database: Database, commit_id: str, isolation: Isolation = "snapshot") -> None:
        self.database = database
        self.commit_id = commit_id
        self.isolation = isolation
        self.version: int | None = None
        """The database version the transaction committed as, once it has (its snapshot's, if it
        wrote nothing: it then commits no version of its own)."""
        self._staged = TransactionStager(database._log, commit_id, isolation)
        """The committer of the transaction's tables: its state, snapshot and staged writes."""
        self._tables: dict[str, Table] = {}

    def __enter__(self) -> Transaction:
        return self.begin()

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def begin(self) -> Transaction:
        """Start reading and writing (``with`` does it); the snapshot is the newest version now."""
        self._staged.begin()
        return self

    def table(self, name: str) -> Table:
        """Table ``name`` inside the transaction."""
        self._staged.open()
        if name not in self._tables:
            store = self.database.store.child(check_name(name))
            self._tables[name] = Table(store, self._staged.base(name), self._staged)
        return self._tables[name]

    @property
    def snapshot_version(self) -> int:
        """The database version the transaction reads (its snapshot)."""
        return self._staged.open().version

    @property
    def tables_written(self) -> list[str]:
        """The tables the transaction has written so far."""
        return sorted(self._staged.writes)

    def commit(self) -> int:
        """Commit every write as one database version; return it.

        A transaction that wrote nothing commits nothing (no version, no request under snapshot
        isolation) and returns its snapshot's version. A serializable one still has its reads
        judged, against the newest version: ``CommitConflictError`` if a commit since its
        snapshot changed one, as for a transaction that wrote (see :meth:`Database.transaction`)."""
        version, tables = self._staged.commit(undo=self._reset)
        self.version = version
        for name, table in self._tables.items():  # the handles now read what was committed
            if name in tables:
                handle_of(table).adopt(tables[name])
        return version

    def abort(self) -> None:
        """Drop every write: nothing is committed, and the files the writes wrote are deleted
        (nothing refers to them; files registered with ``add_files`` are the caller's, and
        stay). A transaction that has committed stays committed."""
        if self._staged.abort():
            for name in self._staged.writes:
                table = self._tables[name]
                written = self._staged.written(name, table.manifest)
                with contextlib.suppress(Exception):  # what cannot be deleted now is an orphan gc removes
                    table.store.delete_many(written)
            self._reset()

    def _reset(self) -> None:
        """Make the table handles read the transaction's snapshot again, without its writes."""
        for name, write in self._staged.writes.items():
            if name in self._tables:
                handle_of(self._tables[name]).reset_to(write.base)

    def __del__(self) -> None:
        if self._staged.state == "open" and self._staged.writes:
            warnings.warn(
                f"transaction {self.commit_id} was left open with writes to {sorted(self._staged.writes)}; "
                "nothing was committed",
                ResourceWarning,
                stacklevel=1,
            )

    def __repr__(self) -> str:
        return f"Transaction({self.commit_id!r}, {self._staged.state}, tables={sorted(self._staged.writes)})"
