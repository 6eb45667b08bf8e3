"""The committers of a database's member tables (docs/format.md section 13): who commits a member's
changes, as :class:`~castable.commit.committer.OwnLog` commits a standalone table's.

- :class:`DatabaseLog`: the database's log as one database handle knows it (the newest version
  seen, its pointer, the newest manifest read of each member), the commits to it, and the
  committer of a member's writes outside a transaction (each a one-table transaction).
- :class:`TransactionStager`: a transaction's writes staged table by table, with what each read
  and replaced, then committed as one database version, or dropped.
- :class:`PinnedReader`: the committer of a table read at one database version (a snapshot's):
  its refresh stays there, its writes commit through the database log.

The user's ``Database``, ``Transaction`` and ``DatabaseSnapshot`` (:mod:`castable.database`) hold
these and give them to the member tables they make; nothing here knows of ``Table``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from castable.commit import dblog
from castable.commit.change import TRANSACTION, Change, CommitResult, stage
from castable.commit.committer import NewerBase
from castable.commit.conflicts import Access, Isolation, Rows
from castable.commit.dblog import LOG_PREFIX, NAME, DatabaseCommit, DatabaseVersion, TableWrite
from castable.commit.pointer import Pointer
from castable.errors import InvalidInputError, TableNotFoundError, TransactionClosedError, VersionNotFoundError
from castable.format.manifest import Manifest
from castable.format.properties import TableProperties
from castable.store import ObjectStore


def check_name(name: object) -> str:
    """A member table's name, refused unless it is one path segment inside the database."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInputError(
            f"{name!r} is not a table name inside the database: use one path segment of letters, digits, "
            "'_' and '-' (at most 128, starting with a letter or digit)"
        )
    return name


def member_name(manifest: Manifest, uri: str) -> str:
    """The name in its database of the member table ``manifest`` is a version of (at ``uri``)."""
    if manifest.database is None:
        raise InvalidInputError(f"{uri} is not a table of a database")
    return manifest.database.name


def commit_retention(manifest: Manifest) -> int:
    """How many commit ids the table keeps (``commit.id-retention``), for a write to it."""
    return TableProperties.parse(manifest.properties).commit_id_retention


class DatabaseLog:
    """One database's log as a database handle knows it: the newest version seen (``refresh()``
    reloads), the commits to it, and the committer of its member tables outside a transaction,
    whose writes it commits as one database version each (a blind write, rebased by its own rules,
    format section 8)."""

    transactional = False

    def __init__(self, root: ObjectStore, head: DatabaseVersion, pointer: Pointer | None) -> None:
        self.store = root
        """The database's root: its member tables are folders under it."""
        self.log_store = root.child(LOG_PREFIX)
        self.head = head
        """The newest database version seen."""
        self.pointer = pointer
        """The pointer seen with it; a commit's conditional write of the pointer starts from here."""
        self._manifests: dict[str, Manifest] = {}
        """The newest manifest read of each member table."""

    @classmethod
    def load(cls, root: ObjectStore) -> DatabaseLog:
        """The newest version of the database at ``root``."""
        head, pointer, _ = dblog.load_head(root.child(LOG_PREFIX))
        return cls(root, head, pointer)

    def refresh(self) -> DatabaseVersion:
        """Load the newest committed version, and return it."""
        head, pointer, _ = dblog.load_head(self.log_store, self.head)
        self.adopt(head, pointer)
        return self.head

    def adopt(self, head: DatabaseVersion, pointer: Pointer | None) -> None:
        """Make a newer version (and the pointer seen with it) this handle's own."""
        if head.version >= self.head.version:
            self.head, self.pointer = head, pointer

    def member(self, name: str, at: DatabaseVersion) -> Manifest:
        """Table ``name`` at database version ``at``; the newest one read of each table is kept."""
        member = at.tables.get(check_name(name))
        if member is None:
            raise TableNotFoundError(
                f"database {self.store.uri} has no table {name!r} at version {at.version}; it has {sorted(at.tables)}"
            )
        now = self.head.tables.get(name)
        if now is None or now.table_uuid != member.table_uuid:
            raise VersionNotFoundError(
                f"table {name!r} of database version {at.version} was dropped since, and its files with it"
            )
        kept = self._manifests.get(name)
        if kept is not None and (kept.table_uuid, kept.version) == (member.table_uuid, member.version):
            return kept
        manifest = dblog.member_manifest(self.store, self.log_store, at, name, older=at.version < self.head.version)
        if kept is None or kept.version < manifest.version:
            self._manifests[name] = manifest
        return manifest

    def forget(self, name: str) -> None:
        """Drop the manifest kept of member ``name`` (the database dropped it)."""
        self._manifests.pop(name, None)

    def commit(
        self,
        operation: str,
        commit_id: str,
        *,
        writes: list[TableWrite] | None = None,
        creates: Mapping[str, Manifest] | None = None,
        drops: Sequence[str] = (),
        checks: list[dblog.Check] | None = None,
    ) -> DatabaseCommit:
        """Commit ``writes``, ``creates`` and ``drops`` as one database version, retried under the
        written tables' commit settings (their longest timeout; fair turns if all ask for them)."""
        props = [TableProperties.parse(w.base.properties) for w in writes or []]
        result = dblog.commit_to_database(
            self.store,
            self.head,
            writes=writes or [],
            creates=creates,
            drops=drops,
            checks=checks or [],
            operation=operation,
            commit_id=commit_id,
            pointer=self.pointer,
            timeout=max(
                (p.commit_timeout_seconds for p in props), default=TableProperties.parse({}).commit_timeout_seconds
            ),
            on_newer_head=self.adopt,
            fair=bool(props) and all(p.commit_fair_turns for p in props),
        )
        for name, manifest in result.tables.items():
            kept = self._manifests.get(name)
            if kept is None or kept.version <= manifest.version:
                self._manifests[name] = manifest
        return result

    # --------------------------------------------- Committer, for member tables

    def commit_change(self, base: Manifest, change: Change, commit_id: str, on_newer: NewerBase) -> CommitResult:
        """A write to one member table outside a transaction: a blind write, rebased by its own
        rules (format section 8), committed as one database version."""
        name = member_name(base, self.store.uri)
        if self.head.tables.get(name, None) is None or self.head.tables[name].version < base.version:
            self.refresh()
        write = TableWrite(name, base, [change], commit_retention(base))
        result = self.commit(change.operation, commit_id, writes=[write])
        manifest = result.tables[name]
        return CommitResult(manifest.version, manifest, None)

    def observe(self, base: Manifest, rows: Rows) -> None:
        """Reads outside a transaction are not validated."""

    def newest(self, known: Manifest) -> Manifest:
        head = self.refresh()
        return self.member(member_name(known, self.store.uri), head)

    def before_maintenance(self, known: Manifest) -> Manifest:
        """Write the table's own copies of every committed version first (gc keeps only the
        files that a table's own manifests reference); the table at the version rolled forward
        to is what is maintained, not a newer one whose copy may not be written yet."""
        head, pointer, pending = dblog.load_head(self.log_store, self.head)
        self.adopt(head, dblog.roll_forward(self.store, pending, pointer))
        return self.member(member_name(known, self.store.uri), head)


class PinnedReader:
    """The committer of a table read at a database version: its writes still commit through the
    database (rebasing on the newest version), but a refresh stays at the snapshot's version."""

    transactional = False

    def __init__(self, log: DatabaseLog) -> None:
        self.log = log

    def commit_change(self, base: Manifest, change: Change, commit_id: str, on_newer: NewerBase) -> CommitResult:
        return self.log.commit_change(base, change, commit_id, on_newer)

    def observe(self, base: Manifest, rows: Rows) -> None:
        """A snapshot's reads are not part of any transaction."""

    def newest(self, known: Manifest) -> Manifest:
        return known

    def before_maintenance(self, known: Manifest) -> Manifest:
        return self.log.before_maintenance(known)


class TransactionStager:
    """The committer of a transaction's tables: each write is staged (the table handle then reads
    the transaction's own writes), with what it read and replaced, and at commit every table is
    rebased on the newest version by its own rules and committed as one database version."""

    transactional = True

    def __init__(self, log: DatabaseLog, commit_id: str, isolation: Isolation) -> None:
        self.log = log
        self.commit_id = commit_id
        self.isolation = isolation
        self.state = "new"
        """``new``, ``open`` once begun, then ``committed``, ``aborted`` or ``failed``."""
        self._base: DatabaseVersion | None = None
        self._bases: dict[str, Manifest] = {}
        """Each table as the snapshot has it (the handle moves on to the transaction's writes)."""
        self.writes: dict[str, TableWrite] = {}
        """The writes staged, by table."""
        self._access: dict[str, Access] = {}
        """What each table's reads and writes depend on, validated at commit."""
        self._registered: dict[str, set[str]] = {}
        """The files each table's writes registered (written elsewhere): an abort leaves them."""

    def begin(self) -> None:
        """Start reading and writing; the snapshot is the newest version now."""
        if self.state != "new":
            raise TransactionClosedError(f"transaction {self.commit_id} has already begun")
        self._base = self.log.refresh()
        self.state = "open"

    def open(self) -> DatabaseVersion:
        """The snapshot the transaction reads; ``TransactionClosedError`` unless it is open."""
        if self.state != "open" or self._base is None:
            raise TransactionClosedError(f"transaction {self.commit_id} is {self.state}: begin a new one")
        return self._base

    def base(self, name: str) -> Manifest:
        """Table ``name`` as the transaction's snapshot has it: what its writes are staged on."""
        self._bases[name] = self.log.member(name, self.open())
        return self._bases[name]

    def commit(self, undo: Callable[[], None]) -> tuple[int, Mapping[str, Manifest]]:
        """Commit every staged write as one database version: the version, and each written
        table's manifest in it. With no write nothing is committed, and the version is the
        snapshot's (a serializable transaction's reads are still judged, against the newest
        version). If the commit fails, ``undo`` runs and the transaction is failed."""
        snapshot = self.open()
        self.state = "failed"  # until the commit returns: a failed transaction is not used again
        try:
            checks = [
                dblog.Check(name, self._bases[name], access.under(self.isolation))
                for name, access in sorted(self._access.items())
            ]
            if self.writes:
                result = self.log.commit(
                    "transaction", self.commit_id, writes=list(self.writes.values()), checks=checks
                )
                version, tables = result.version, result.tables
            else:
                judged = [c for c in checks if not c.access.is_empty]
                if judged:
                    dblog.validate_unwritten(self.log.store, self.log.refresh(), judged)
                version, tables = snapshot.version, {}
        except BaseException:
            undo()
            raise
        self.state = "committed"
        return version, tables

    def abort(self) -> bool:
        """End the transaction unless it has ended already; whether it was still new or open
        (its staged writes are then dropped: nothing is committed)."""
        if self.state not in ("new", "open"):
            return False
        self.state = "aborted"
        return True

    def written(self, name: str, staged: Manifest) -> list[str]:
        """The data and tombstone files that table ``name``'s staged writes wrote, which its
        ``staged`` manifest lists: nothing else refers to them (files registered with
        ``add_files`` are the caller's, and not among them)."""
        before = _objects(self.writes[name].base) | self._registered.get(name, set())
        return sorted(_objects(staged) - before)

    # ------------------------------------------- Committer, for the tables in it

    def commit_change(self, base: Manifest, change: Change, commit_id: str, on_newer: NewerBase) -> CommitResult:
        """Stage one change: the table handle then reads the transaction's own writes."""
        self.open()
        if change.access is None:
            raise InvalidInputError(
                f"{change.operation} cannot run inside a transaction (append, delete, upsert, overwrite, update, "
                "merge and add_files can); run it on db.table(...) outside one"
            )
        name = member_name(base, self.log.store.uri)
        write = self.writes.get(name) or TableWrite(name, self._bases[name], [], commit_retention(base))
        staged = stage(
            write.base,
            [*write.changes, change],
            planned=write.base,
            commit_id=self.commit_id,
            commit_retention=write.commit_retention,
        )
        write.changes.append(change)
        self.writes[name] = write
        summary = staged.commit.summary
        if (summary["operations"][-1] if staged.commit.operation == TRANSACTION else summary).get("registered"):
            added = {f.path for f in staged.data_files} - {f.path for f in base.data_files}
            self._registered.setdefault(name, set()).update(added)
        self._access[name] = self._access.get(name, Access()) + change.access
        return CommitResult(staged.version, replace(staged, version=write.base.version), None, staged=True)

    def observe(self, base: Manifest, rows: Rows) -> None:
        """Record a read of the transaction's snapshot (validated at commit when serializable)."""
        if self.state == "open":
            name = member_name(base, self.log.store.uri)
            self._access[name] = self._access.get(name, Access()) + Access(reads=(rows,))

    def newest(self, known: Manifest) -> Manifest:
        return known

    def before_maintenance(self, known: Manifest) -> Manifest:
        raise InvalidInputError("maintenance (expire, gc, purge) cannot run inside a transaction")


def _objects(manifest: Manifest) -> set[str]:
    """The data and tombstone files ``manifest`` refers to."""
    return {f.path for f in manifest.data_files} | {t.path for t in manifest.tombstones}
