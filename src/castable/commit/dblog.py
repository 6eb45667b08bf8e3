"""The database log (docs/format.md section 13): one commit point for several tables.

A database is a prefix holding member tables and a log under ``_database/``, laid out like a
table's metadata: ``_database/manifest/v<M>.json`` is database version M, written once with
``If-None-Match: *``, and ``_database/_latest_manifest`` is its pointer, moved forward only.
The PUT of version M is the commit point of every write to every member, so a transaction
over several tables lands whole or not at all, and one database version is one consistent
snapshot of them all.

A database version lists each member's table version, and carries in full the manifests of
the table versions it commits. A member's own ``manifest/v<N>.json`` is a copy of it, written
after the commit (rolled forward). The database pointer moves past a version only once its
copies exist, and a writer rolls forward every version above the pointer before it commits,
so a member's copy can be missing only for the versions above the pointer, whose log entries
hold them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from castable.commit import conflicts
from castable.commit.change import Change, stage
from castable.commit.conflicts import Access
from castable.commit.log import newest_log_entry, read_manifest
from castable.commit.pointer import Pointer, advance_pointer, encode_pointer, retention_floor
from castable.commit.protocol import Race
from castable.errors import (
    CorruptObjectError,
    DatabaseNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)
from castable.format.entries import CommitInfo, dumps
from castable.format.filelist import SEGMENTS
from castable.format.layout import POINTER_KEY, manifest_key
from castable.format.manifest import INLINE_COMMITS, Manifest, Membership, RecentCommits
from castable.format.segment import SegmentRef
from castable.format.times import format_time, now, parse_time
from castable.store import (
    ObjectNotFoundError,
    ObjectStore,
    PreconditionFailedError,
    StoreError,
)
from castable.store.readahead import read_ahead

log = logging.getLogger(__name__)
T = TypeVar("T")

LOG_PREFIX = "_database"
"""The log's folder under the database root; member names cannot start with ``_``."""
FORMAT_NAME = "castable-database"
FORMAT_VERSION = 1
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
"""A member table's name: one path segment, so a name never reaches outside the database."""
COMMIT_RETENTION = 1000
"""Commit ids a database remembers, as ``commit.id-retention`` does for a table."""


@dataclass(frozen=True)
class Member:
    """One member table as a database version lists it."""

    table_uuid: str
    version: int
    committed_in: int
    """The database version whose log entry carries this table version's manifest."""

    def to_json(self) -> dict[str, Any]:
        return {"table_uuid": self.table_uuid, "version": self.version, "committed_in": self.committed_in}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Member:
        numbers = [doc["version"], doc["committed_in"]]
        if any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in numbers):
            raise ValueError(f"bad member versions {numbers!r}")
        return cls(str(doc["table_uuid"]), numbers[0], numbers[1])


@dataclass(frozen=True)
class DatabaseVersion:
    """One version of a database: every member's table version, and the manifests it commits."""

    database_uuid: str
    version: int
    previous: int | None
    created_at: datetime
    commit: CommitInfo
    tables: Mapping[str, Member]
    manifests: Mapping[str, bytes] = field(hash=False, compare=False)
    """Table name to the JSON of the table version this database version commits."""
    recent_commits: RecentCommits = field(default_factory=RecentCommits, hash=False, compare=False)

    def next(
        self, *, commit: CommitInfo, tables: Mapping[str, Member], manifests: Mapping[str, bytes]
    ) -> DatabaseVersion:
        version = self.version + 1
        return DatabaseVersion(
            database_uuid=self.database_uuid,
            version=version,
            previous=self.version,
            created_at=max(now(), self.created_at + timedelta(microseconds=1)),
            commit=commit,
            tables=tables,
            manifests=manifests,
            recent_commits=self.recent_commits.plus(
                {commit.commit_id: version}, retention=COMMIT_RETENTION, inline_limit=INLINE_COMMITS
            ),
        )

    def written(self, log_store: ObjectStore, created: list[str]) -> DatabaseVersion:
        """This version with its commits segment written, if it has a new one."""
        return replace(self, recent_commits=self.recent_commits.written(log_store, created))

    def to_json(self) -> bytes:
        recent = self.recent_commits
        doc = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "database_uuid": self.database_uuid,
            "version": self.version,
            "previous": self.previous,
            "created_at": format_time(self.created_at),
            "commit": {
                "operation": self.commit.operation,
                "commit_id": self.commit.commit_id,
                "summary": self.commit.summary,
            },
            "tables": {name: m.to_json() for name, m in sorted(self.tables.items())},
            "recent_commits": recent.inline,
            "commits_segment": None if recent.ref is None else recent.ref.to_json(),
        }
        manifests = ",".join(f"{json.dumps(name)}:{data.decode()}" for name, data in sorted(self.manifests.items()))
        return f'{dumps(doc)[:-1]},"manifests":{{{manifests}}}}}'.encode()

    @classmethod
    def from_json(cls, data: bytes, *, key: str, log_store: ObjectStore) -> DatabaseVersion:
        """Parse and validate a database version; anything malformed raises ``CorruptObjectError``."""
        try:
            doc = json.loads(data)
            if doc.get("format") != FORMAT_NAME:
                raise ValueError("not a castable database version")
            if doc.get("format_version") != FORMAT_VERSION:
                raise CorruptObjectError(f"database format version {doc.get('format_version')!r} is unknown")
            tables = {str(name): Member.from_json(m) for name, m in doc["tables"].items()}
            manifests = {str(name): dumps(m).encode() for name, m in doc["manifests"].items()}
            if set(manifests) - set(tables):
                raise ValueError(f"manifests of tables it does not list: {sorted(set(manifests) - set(tables))}")
            commits = doc.get("commits_segment")
            ref = None if commits is None else SegmentRef.from_json(commits)
            commit = doc["commit"]
            previous = doc["previous"]
            return cls(
                database_uuid=str(doc["database_uuid"]),
                version=int(doc["version"]),
                previous=None if previous is None else int(previous),
                created_at=parse_time(doc["created_at"]),
                commit=CommitInfo(str(commit["operation"]), str(commit["commit_id"]), dict(commit["summary"])),
                tables=tables,
                manifests=manifests,
                recent_commits=RecentCommits(
                    {str(k): int(v) for k, v in doc["recent_commits"].items()},
                    ref=ref,
                    older=None if ref is None else SEGMENTS.loader(log_store, "commits"),
                ),
            )
        except CorruptObjectError as e:
            raise CorruptObjectError(f"{key}: {e}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptObjectError(f"{key} is not a valid database version: {e!r}") from None


def read_version(log_store: ObjectStore, version: int, database_uuid: str | None = None) -> DatabaseVersion:
    """Database version ``version``; ``VersionNotFoundError`` if it does not exist."""
    key = manifest_key(version)
    try:
        blob = log_store.get(key)
    except ObjectNotFoundError:
        raise VersionNotFoundError(f"database version {version} does not exist in {log_store.uri}") from None
    found = DatabaseVersion.from_json(blob.data, key=key, log_store=log_store)
    if found.version != version:
        raise CorruptObjectError(f"{log_store.uri}/{key} claims to be version {found.version}")
    if database_uuid is not None and found.database_uuid != database_uuid:
        raise CorruptObjectError(
            f"{log_store.uri}/{key} belongs to database {found.database_uuid}, not {database_uuid}"
        )
    return found


def load_head(
    log_store: ObjectStore, known: DatabaseVersion | None = None
) -> tuple[DatabaseVersion, Pointer, list[DatabaseVersion]]:
    """The newest database version, its pointer, and every version above the pointer (whose
    members' copies may not be written yet), oldest first. Those the search did not pass
    (it starts from ``known`` when that is ahead of the pointer) are read too: only while the
    pointer lags, after a crash or during another writer's roll forward."""
    owner = None if known is None else known.database_uuid
    seen: list[DatabaseVersion] = []

    def read(version: int) -> DatabaseVersion:
        found = read_version(log_store, version, owner)
        seen.append(found)
        return found

    try:
        head, pointer = newest_log_entry(log_store, read, known, owner=lambda v: v.database_uuid)
    except TableNotFoundError:
        raise DatabaseNotFoundError(f"no castable database at {log_store.uri.removesuffix('/' + LOG_PREFIX)}") from None
    found = {v.version: v for v in seen}
    above = [found.get(n) or read(n) for n in range(pointer.version + 1, head.version)]
    return head, pointer, [*above, head] if head.version > pointer.version else []


def member_manifest(
    root: ObjectStore, log_store: ObjectStore, at: DatabaseVersion, name: str, *, older: bool = False
) -> Manifest:
    """The manifest of table ``name`` as database version ``at`` lists it: the member's own copy,
    or, while that is not written yet (or is damaged), the log entry that committed it. With
    ``older`` (``at`` is not the newest version), a table version the member's expiry removed
    is reported as expired first, since its files may be gone."""
    member = at.tables.get(name)
    if member is None:
        raise TableNotFoundError(f"database version {at.version} has no table {name!r}")
    store = root.child(name)
    expired = VersionNotFoundError(
        f"version {member.version} of table {name!r} has expired (database version {at.version} lists it)"
    )
    if older and member.version < retention_floor(store):
        raise expired
    if member.committed_in == at.version:
        return Manifest.from_json(at.manifests[name], key=f"{name}/{manifest_key(member.version)}", store=store)
    try:
        copy = read_manifest(store, member.version, member.table_uuid)
        if copy.database is not None and copy.database.version == member.committed_in:
            return copy
        raise CorruptObjectError(f"{store.uri}/{manifest_key(member.version)} was written outside its database")
    except (VersionNotFoundError, CorruptObjectError):  # not rolled forward yet, or damaged: the log holds it
        if member.version < retention_floor(store):
            raise expired from None
        try:
            committing = read_version(log_store, member.committed_in, at.database_uuid)
        except VersionNotFoundError:
            raise expired from None
        return member_manifest(root, log_store, committing, name)


def newest_member(
    root: ObjectStore, log_store: ObjectStore, head: DatabaseVersion, name: str, base: Manifest
) -> Manifest:
    """Table ``name`` as ``head`` lists it: ``base`` (an older version of it) when that is the
    one listed, else read; ``CommitConflictError`` if the table was dropped or re-created since."""
    member = head.tables.get(name)
    conflicts.check_member(name, None if member is None else member.table_uuid, base, head.version)
    if member is None or member.version == base.version:
        return base
    return member_manifest(root, log_store, head, name)


def validate_unwritten(root: ObjectStore, head: DatabaseVersion, checks: Sequence[Check]) -> None:
    """Judge the ``checks`` of a transaction that wrote nothing against ``head`` (a committed
    version newer than its snapshot), writing no log entry: ``CommitConflictError`` if a commit
    in between changed what it read, else it is as if it had run at ``head``."""
    log_store = root.child(LOG_PREFIX)

    def judge(check: Check) -> None:
        newest = newest_member(root, log_store, head, check.name, check.snapshot)
        conflicts.validate(root.child(check.name), check.snapshot, newest, check.access, table=check.name)

    _parallel([partial(judge, c) for c in checks])


def roll_forward(root: ObjectStore, pending: Sequence[DatabaseVersion], pointer: Pointer | None) -> Pointer | None:
    """Write the members' copies of the table versions ``pending`` commit (oldest first), then
    move the database pointer to the newest. Anyone may do it, any number of times: each copy
    is put with If-None-Match, and a copy already there must be this commit's. ``pointer`` is
    the database pointer last seen (a pointer this process moved last moves again with one
    request); the pointer as it ends is returned. The members' own pointers are left where they
    are: a member is read through its database, and expiry moves them."""
    for version in pending:
        _parallel([partial(_copy, root, version, name) for name in sorted(version.manifests)])
    if not pending:
        return pointer
    log_store = root.child(LOG_PREFIX)
    log_store.check_conditional_writes()  # the If-Match form this store wants (probed once per process)
    return advance_pointer(log_store, pending[-1].version, pointer) or pointer


def _copy(root: ObjectStore, version: DatabaseVersion, name: str) -> None:
    """Write member ``name``'s copy of the table version that ``version`` commits."""
    member = version.tables[name]
    store = root.child(name)
    key = manifest_key(member.version)
    try:
        store.put(key, version.manifests[name], if_none_match=True)
    except PreconditionFailedError:
        found = read_manifest(store, member.version, member.table_uuid)
        if found.database is None or found.database.version != version.version:
            raise CorruptObjectError(
                f"{store.uri}/{key} was not written by database version {version.version}: the table "
                "was written outside its database"
            ) from None
    if member.version == 0:  # a new member gets its pointer, which names version 0 from then on
        with contextlib.suppress(PreconditionFailedError):
            store.put(POINTER_KEY, encode_pointer(0), if_none_match=True)


def _parallel(tasks: list[Callable[[], T]]) -> list[T]:
    """Run independent requests (one per table) at once on the shared pool."""
    return list(read_ahead(iter(tasks), depth=len(tasks)))


@dataclass
class TableWrite:
    """What one commit does to one member table: ``changes`` planned on ``base``."""

    name: str
    base: Manifest
    changes: list[Change]
    commit_retention: int


@dataclass(frozen=True)
class Check:
    """What a transaction's commit validates of table ``name``: ``access`` since ``snapshot``
    (the table as the transaction's snapshot has it; see ``conflicts.validate``)."""

    name: str
    snapshot: Manifest
    access: Access


@dataclass
class DatabaseCommit:
    """The database version a commit is, the newest database version the writer saw, and the
    version each written table now has."""

    version: int
    head: DatabaseVersion
    tables: dict[str, Manifest]


def commit_to_database(
    root: ObjectStore,
    base: DatabaseVersion,
    *,
    writes: Sequence[TableWrite] = (),
    creates: Mapping[str, Manifest] | None = None,
    drops: Sequence[str] = (),
    checks: Sequence[Check] = (),
    operation: str,
    commit_id: str,
    pointer: Pointer | None = None,
    timeout: float = 120.0,
    on_newer_head: Callable[[DatabaseVersion, Pointer | None], None] | None = None,
    fair: bool = True,
) -> DatabaseCommit:
    """Commit ``writes`` (with the tables ``creates`` adds and ``drops`` removes) as one
    database version, rebasing every written table on the newest version until the commit
    lands (see :class:`DatabaseRace`)."""
    race = DatabaseRace(
        root,
        base,
        pointer,
        writes=writes,
        creates=creates or {},
        drops=drops,
        checks=checks,
        operation=operation,
        commit_id=commit_id,
        timeout=timeout,
        on_newer_head=on_newer_head,
        fair=fair,
    )
    if pointer is None or pointer.version < base.version:
        race.catch_up()
    return race.run()


class DatabaseRace(Race[tuple[DatabaseVersion, dict[str, Manifest]], DatabaseCommit]):
    """A commit to a database's log.

    A table that no concurrent commit touched keeps the version built for it; a table another
    commit changed is built again from its newest version, where each change re-validates
    itself (format section 8) and may raise ``CommitConflictError``, which aborts the whole
    transaction. A transaction's ``checks`` are judged first, on every newer version: a commit
    since its snapshot that changed rows it wrote (or, serializable, read) aborts it
    (``conflicts.validate``). A writer commits only on a version it knows to be rolled forward
    (the pointer it last saw is there); else it loads the newest and rolls forward what lies
    above the pointer first. The members' copies of this commit are written (rolled forward)
    before it returns. ``pointer`` is the database pointer last seen (see :func:`roll_forward`);
    the result carries it as it ends.
    """

    def __init__(
        self,
        root: ObjectStore,
        head: DatabaseVersion,
        pointer: Pointer | None,
        *,
        writes: Sequence[TableWrite],
        creates: Mapping[str, Manifest],
        checks: Sequence[Check],
        drops: Sequence[str] = (),
        operation: str,
        commit_id: str,
        timeout: float,
        on_newer_head: Callable[[DatabaseVersion, Pointer | None], None] | None,
        fair: bool = True,
    ) -> None:
        log_store = root.child(LOG_PREFIX)
        log_store.check_conditional_writes()
        super().__init__(log_store, commit_id=commit_id, operation=operation, timeout=timeout, fair=fair)
        self.root = root
        self.head = head
        self.writes = writes
        self.creates = creates
        self.drops = drops
        self.checks = checks
        self.on_newer_head = on_newer_head
        self._built: dict[tuple[str, int], Manifest] = {}
        self._newer: dict[tuple[str, int], Manifest] = {}
        self._validated: set[tuple[str, int]] = set()
        self.saw(pointer)

    def changes(self) -> Iterable[Change]:
        return (change for write in self.writes for change in write.changes)

    @property
    def known_version(self) -> int:
        return self.head.version

    def catch_up(self) -> None:
        head, found, pending = load_head(self.store, self.head)
        self.head = head
        self.saw(roll_forward(self.root, pending, found))
        if self.on_newer_head is not None:
            self.on_newer_head(head, self.pointer)

    def peek_next(self, after: int) -> bool:
        """Whether the log entry after version ``after`` (or after the head in hand) is
        committed; then the next attempt loads it and rolls it forward before building."""
        if not self.store.exists(manifest_key(max(after, self.head.version, self.taken) + 1)):
            return False
        self.behind = True
        return True

    def _current(self, name: str, base: Manifest) -> Manifest:
        """The version of table ``name`` (``base`` is an older one) that the head lists."""
        member = self.head.tables.get(name)
        key = (name, -1 if member is None else member.version)
        if key not in self._newer:  # read once, however many attempts find the table at that version
            self._newer[key] = newest_member(self.root, self.store, self.head, name, base)
        return self._newer[key]

    def _refuse_if_dropped(self, bases: dict[str, Manifest]) -> None:
        """Objects of a written table went missing while its write was staged: when a drop
        committed since this attempt read the head (it deletes the table's files once committed),
        that is the table gone (``TableNotFoundError``), not damage."""
        head, _, _ = load_head(self.store, self.head)
        gone = sorted(
            w.name
            for w in self.writes
            if (member := head.tables.get(w.name)) is None or member.table_uuid != bases[w.name].table_uuid
        )
        if gone:
            raise TableNotFoundError(
                f"table(s) {gone} of the database were dropped while this write committed; nothing was committed"
            )

    def _validate(self, check: Check) -> None:
        newest = self._current(check.name, check.snapshot)
        if (check.name, newest.version) not in self._validated:  # each newer version is judged once
            conflicts.validate(self.root.child(check.name), check.snapshot, newest, check.access, table=check.name)
            self._validated.add((check.name, newest.version))

    def _bases(self) -> dict[str, Manifest]:
        """Each written table at the version the head lists (read once per version)."""
        newest = _parallel([partial(self._current, w.name, w.base) for w in self.writes])
        return dict(zip([w.name for w in self.writes], newest, strict=True))

    def committed_before(self) -> DatabaseCommit | None:
        return _landed_before(self.root, self.head, self._bases(), self.commit_id)

    def _table_version(self, write: TableWrite, base: Manifest, created: list[str]) -> Manifest:
        key = (write.name, base.version)
        if key not in self._built:
            staged = stage(
                base,
                write.changes,
                planned=write.base,
                commit_id=self.commit_id,
                commit_retention=write.commit_retention,
            )
            self._built[key] = staged.written(self.root.child(write.name), created)
        return replace(
            self._built[key], database=Membership(self.head.database_uuid, write.name, self.head.version + 1)
        )

    def candidate(self, created: list[str]) -> tuple[str, bytes, tuple[DatabaseVersion, dict[str, Manifest]]]:
        _parallel([partial(self._validate, c) for c in self.checks])
        head = self.head
        taken = sorted(set(self.creates) & set(head.tables))
        if taken:
            raise TableAlreadyExistsError(f"the database already has table(s) {taken}; nothing was committed")
        missing = sorted(set(self.drops) - set(head.tables))
        if missing:
            raise TableNotFoundError(f"the database has no table(s) {missing} to drop; nothing was committed")
        members: list[str] = []  # segments of the members: kept for the next attempt, which may reuse them
        bases = self._bases()
        try:
            built = _parallel([partial(self._table_version, w, bases[w.name], members) for w in self.writes])
        except CorruptObjectError:
            self._refuse_if_dropped(bases)
            raise
        staged = {w.name: m for w, m in zip(self.writes, built, strict=True)}
        staged |= {
            name: replace(m, database=Membership(head.database_uuid, name, head.version + 1))
            for name, m in self.creates.items()
        }
        tables = dict(head.tables) | {
            name: Member(m.table_uuid, m.version, head.version + 1) for name, m in staged.items()
        }
        tables = {name: member for name, member in tables.items() if name not in self.drops}
        summary = {name: {"operation": m.commit.operation, **m.commit.summary} for name, m in staged.items()}
        summary |= {name: {"operation": "drop_table"} for name in self.drops}
        version = head.next(
            commit=CommitInfo(self.operation, self.commit_id, {"tables": summary}),
            tables=tables,
            manifests={name: m.to_json() for name, m in staged.items()},
        ).written(self.store, created)
        return manifest_key(version.version), version.to_json(), (version, staged)

    def owns(self, key: str, data: bytes) -> bool:
        return DatabaseVersion.from_json(data, key=key, log_store=self.store).commit.commit_id == self.commit_id

    def finish(self, staged: tuple[DatabaseVersion, dict[str, Manifest]]) -> DatabaseCommit:
        version, tables = staged
        try:
            self.saw(roll_forward(self.root, [version], self.pointer))
        except (StoreError, CorruptObjectError) as e:  # committed all the same: the next writer rolls it forward
            log.warning("could not roll database version %d forward: %s", version.version, e)
        self.head = version
        if self.on_newer_head is not None:
            self.on_newer_head(version, self.pointer)
        return DatabaseCommit(version.version, version, tables)


def _landed_before(
    root: ObjectStore, head: DatabaseVersion, bases: Mapping[str, Manifest], commit_id: str
) -> DatabaseCommit | None:
    """The commit ``commit_id`` if it landed before, as the database's recent commits or any
    written table's own (which a table keeps for its ``commit.id-retention`` commits) record it;
    each table at the version the commit made."""
    in_tables = {name: m.recent_commits[commit_id] for name, m in bases.items() if commit_id in m.recent_commits}
    version = head.recent_commits.get(commit_id)
    if version is None and not in_tables:
        return None
    tables = {name: _at(root.child(name), m, in_tables.get(name)) for name, m in bases.items()}
    if version is None:
        version = max(m.database.version for m in tables.values() if m.database is not None)
    return DatabaseCommit(version, head, tables)


def _at(store: ObjectStore, newest: Manifest, version: int | None) -> Manifest:
    """Version ``version`` of a table whose newest is ``newest`` (that one if it has expired)."""
    if version is None or version == newest.version:
        return newest
    try:
        return read_manifest(store, version, newest.table_uuid)
    except VersionNotFoundError:
        return newest
