"""One conflict model for every operation's rebase (docs/format.md section 8).

A change is planned on a base version. When another writer commits first, the change is built
again on the newer version, and before that it is judged here: the change declares what its
plan depends on (a :class:`Footprint`), the model compares that with what was committed since
the base (:class:`Commits`), and answers keep, re-plan, or conflict. An operation states its
rules by the footprint it declares; none re-derives them in its own code.

| footprint field | what the plan did with it | committed since the base | answer |
| --- | --- | --- | --- |
| ``targets`` | named these data files in tombstone entries, or dropped them whole | one is gone | re-plan |
| ``reads`` | copied the live rows of these files (their deletes applied) | one is gone, or gained deletes | re-plan |
| ``merges`` | replaced these tombstone files by a merged one | one is gone | re-plan |
| ``supersedes`` | replaces every row matching this predicate | a new file may hold such a row | re-plan |
| ``claims`` | replaces every row matching this predicate, and no other | a new file may hold such a row | conflict |

A re-planned change is judged again against the next writer's commits, from its new base.
Three more rules hold for every change at every build (:func:`judge_base`): a change planned
on another schema than the newer base's conflicts unless it declares that it holds across
schema changes (append, alter, restore); a change consuming an input (``source_ids``) that a
commit of the newer base's recent history consumed conflicts; and a table of a database that
was dropped or re-created meanwhile conflicts (:func:`check_member`).

Those are the rules for blind writes. A transaction reads a snapshot and writes from what it
read, so re-planning it could lose an update; its writes (and, when serializable, its reads)
are an :class:`Access` per table, which :func:`validate` judges against every commit since the
transaction's snapshot, by what the rows hold:

| access field | what the transaction did | committed since its snapshot | answer |
| --- | --- | --- | --- |
| ``keys`` | wrote rows by key (upsert, merge, overwrite) | any change to a row matching it | conflict |
| ``rows`` | replaced the rows it saw (update, delete) | one of those rows changed or is gone | conflict |
| ``reads`` | read rows (scans; what an update or delete selects) | serializable: any change to one | conflict |

Under snapshot isolation (first committer wins) lost updates cannot happen and write skew can;
serializable also judges ``reads``, so write skew cannot happen either.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import Literal, get_args

import pyarrow as pa

from castable.errors import CommitConflictError, InvalidInputError
from castable.format.evolution import same_schema
from castable.format.manifest import DataFile, Manifest
from castable.read.predicate import Match, Predicate
from castable.read.scan import Scan
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore

Isolation = Literal["snapshot", "serializable"]
ISOLATION_LEVELS: tuple[str, ...] = get_args(Isolation)


class Verdict(enum.Enum):
    """What to do with a change planned on an older base."""

    KEEP = "keep"
    """Nothing it depends on changed: build it on the newer base as planned."""
    REPLAN = "replan"
    """Plan it again on the newer base (deletes are never dropped, rows never resurrected)."""


@dataclass(frozen=True)
class Footprint:
    """What a planned change depends on (see the module's table)."""

    targets: frozenset[str] = frozenset()
    reads: frozenset[str] = frozenset()
    merges: frozenset[str] = frozenset()
    supersedes: Predicate | None = None
    claims: Predicate | None = None


@dataclass(frozen=True)
class Commits:
    """What was committed between a change's base and a newer version."""

    removed: frozenset[str]
    """Data files of the base that the newer version no longer lists."""
    added: tuple[DataFile, ...]
    """Data files the newer version lists and the base did not."""
    deleted_in: frozenset[str]
    """Data files named by tombstone files the base did not have."""
    tombstones_removed: frozenset[str]
    """Tombstone files of the base that the newer version no longer lists."""
    schema: pa.Schema

    @classmethod
    def between(cls, base: Manifest, newer: Manifest) -> Commits:
        """Read from the segments that differ between the two versions only (format version 2)."""
        added, removed = newer.data_files.diff(base.data_files)
        new_tombstones, tombstones_removed = newer.tombstones.diff(base.tombstones)
        return cls(
            removed=frozenset(removed),
            added=tuple(added),
            deleted_in=frozenset(p for t in new_tombstones for p in t.files),
            tombstones_removed=frozenset(tombstones_removed),
            schema=newer.schema,
        )


def judge_base(planned: Manifest, current: Manifest, *, operations: str, across_schema: bool) -> None:
    """``CommitConflictError`` if changes planned on ``planned`` cannot be built on ``current``
    because the schema changed in between and they do not hold ``across_schema``."""
    if not across_schema and not same_schema(current.schema, planned.schema):
        raise CommitConflictError(
            f"{operations} was planned on the schema of version {planned.version}, which a concurrent commit "
            f"changed (newest: version {current.version}); nothing was committed: run it again"
        )


def check_sources(base: Manifest, sources: tuple[str, ...]) -> None:
    """``CommitConflictError`` for a change consuming inputs that a commit of ``base``'s recent
    history already consumed (two writers that picked up the same input never both add it)."""
    taken = {s: base.recent_commits[s] for s in sources if s in base.recent_commits}
    if taken:
        raise CommitConflictError(
            f"{len(taken)} source(s) were already appended (version {max(taken.values())}): "
            f"{sorted(taken)[:5]}; nothing was committed"
        )


def check_member(name: str, table_uuid: str | None, planned: Manifest, database_version: int) -> None:
    """``CommitConflictError`` if table ``name`` of a database (``table_uuid`` as its newest
    version lists it, ``None`` if it has none) is not the table a change was planned on."""
    if table_uuid != planned.table_uuid:
        raise CommitConflictError(
            f"table {name!r} was dropped or re-created by database version {database_version}; nothing was committed"
        )


def judge(footprint: Footprint, commits: Commits, *, operation: str) -> Verdict:
    """Keep or re-plan a change whose plan has ``footprint``, given ``commits`` since its base;
    ``CommitConflictError`` when no plan on the newer base can honour what it claims."""
    if footprint.claims is not None:
        clash = _added_holding(commits, footprint.claims)
        if clash:
            raise CommitConflictError(
                f"{operation} conflicts with a concurrent commit that added rows it would replace "
                f"({len(clash)} file(s), e.g. {clash[0]}); nothing was committed: run it again to include them"
            )
    if footprint.targets & commits.removed or footprint.merges & commits.tombstones_removed:
        return Verdict.REPLAN
    if footprint.reads & (commits.removed | commits.deleted_in):
        return Verdict.REPLAN
    if footprint.supersedes is not None and _added_holding(commits, footprint.supersedes):
        return Verdict.REPLAN
    return Verdict.KEEP


class PlannedChange(ABC):
    """A change planned on a base version: on each newer base it asks :func:`judge` whether to
    keep its plan or plan again, so every operation rebases by the same rule."""

    planned_on: Manifest
    """The version the current plan was made on."""
    footprint: Footprint
    """What the current plan depends on; set by :meth:`_plan`."""
    replans: int = 0

    @abstractmethod
    def _plan(self, base: Manifest) -> None:
        """Plan the change on ``base``, setting ``planned_on`` and ``footprint``."""

    def rebase(self, base: Manifest, operation: str, footprint: Footprint | None = None) -> None:
        """Keep the plan, or plan again on ``base``, as the model judges ``footprint`` (default:
        the plan's own) against what was committed since the plan's base."""
        commits = Commits.between(self.planned_on, base)
        if judge(footprint or self.footprint, commits, operation=operation) is Verdict.REPLAN:
            self.replans += 1
            self._plan(base)


def _added_holding(commits: Commits, predicate: Predicate) -> list[str]:
    """The added files whose statistics leave room for a row matching ``predicate``."""
    return [f.path for f in commits.added if _may_hold(f, predicate, commits.schema)]


def _may_hold(f: DataFile, predicate: Predicate, schema: pa.Schema) -> bool:
    if f.rows == 0:
        return False
    return predicate.match(lambda column: f.column_stats(column, schema), f.rows) is not Match.NONE


def check_isolation(isolation: object) -> Isolation:
    """``isolation`` if it names a level castable gives, else ``InvalidInputError``."""
    if isolation not in ISOLATION_LEVELS:
        raise InvalidInputError(f"isolation must be one of {ISOLATION_LEVELS}, not {isolation!r}")
    return isolation  # type: ignore[return-value]


@dataclass(frozen=True)
class Rows:
    """The rows of one table matching ``predicate``, as seen through ``columns`` (all if
    ``None``), and the operation that wrote or read them (for messages)."""

    predicate: Predicate
    columns: tuple[str, ...] | None = None
    by: str = "scan"


@dataclass(frozen=True)
class Access:
    """What a transaction's operations did to one table (see the module's second table)."""

    keys: tuple[Rows, ...] = ()
    rows: tuple[Rows, ...] = ()
    reads: tuple[Rows, ...] = ()

    def __add__(self, other: Access) -> Access:
        return Access(self.keys + other.keys, self.rows + other.rows, self.reads + other.reads)

    def under(self, isolation: Isolation) -> Access:
        """What ``isolation`` judges of it: snapshot isolation leaves reads unchecked."""
        return self if isolation == "serializable" else Access(self.keys, self.rows)

    @property
    def is_empty(self) -> bool:
        return not (self.keys or self.rows or self.reads)


def validate(store: ObjectStore, snapshot: Manifest, head: Manifest, access: Access, *, table: str) -> None:
    """``CommitConflictError`` (naming ``table`` and the keys) if a commit between the
    transaction's ``snapshot`` of the table and ``head`` changed rows that ``access`` depends
    on. Rows are compared by value, so a compaction that only moved them is no conflict; a
    range no committed file could hold is settled from statistics, unread."""
    if head.version == snapshot.version or access.is_empty:
        return
    if not same_schema(snapshot.schema, head.schema):
        raise CommitConflictError(
            f"table {table!r}: a commit since the transaction's snapshot (version {snapshot.version}) changed "
            f"its schema (newest: version {head.version}); nothing was committed: run the transaction again"
        )
    commits = Commits.between(snapshot, head)
    checks = (
        [("wrote", r, False) for r in access.keys]
        + [("replaced", r, True) for r in access.rows]
        + [("read", r, False) for r in access.reads]
    )
    for verb, rows, removed_only in checks:
        if not _touched(store, snapshot, commits, rows.predicate):
            continue
        before, after = _values(store, snapshot, rows), _values(store, head, rows)
        changed = before - after if removed_only else (before - after) + (after - before)
        if changed:
            raise CommitConflictError(
                f"table {table!r}: the transaction's {rows.by} {verb} rows that a commit since its snapshot (version "
                f"{snapshot.version}, newest {head.version}) changed{_which(snapshot, rows, changed)}; "
                "nothing was committed: run the transaction again"
            )


def _touched(store: ObjectStore, snapshot: Manifest, commits: Commits, predicate: Predicate) -> bool:
    """Whether the commits added a file, or removed or deleted from a file of the snapshot, whose
    statistics leave room for a row matching ``predicate``."""
    if _added_holding(commits, predicate):
        return True
    changed = commits.removed | commits.deleted_in
    return bool(changed) and any(f.path in changed for f in Snapshot(store, snapshot).prune_files(predicate))


def _values(store: ObjectStore, manifest: Manifest, rows: Rows) -> Counter[tuple[object, ...]]:
    """The live rows of ``manifest`` that ``rows`` names, as a multiset of value tuples."""
    columns = None if rows.columns is None else list(rows.columns)
    if columns is not None and manifest.primary_key and manifest.primary_key[0] not in columns:
        columns.append(manifest.primary_key[0])  # so a conflict can name the keys
    found = Scan(Snapshot(store, manifest), columns, rows.predicate).to_arrow()
    if not found.num_columns:  # a count: how many rows match is what was read
        return Counter({(): found.num_rows})
    return Counter(zip(*(c.to_pylist() for c in found.columns), strict=True))


def _which(snapshot: Manifest, rows: Rows, changed: Counter[tuple[object, ...]]) -> str:
    """The changed rows' keys, for the message (when the key is among the columns compared)."""
    key = snapshot.primary_key[0] if snapshot.primary_key else None
    names = list(snapshot.schema.names if rows.columns is None else rows.columns)
    names += [key] if key is not None and key not in names else []
    if key is None or key not in names:
        return f" ({sum(changed.values())} row(s))"
    keys = sorted({row[names.index(key)] for row in changed}, key=repr)
    shown = ", ".join(map(repr, keys[:10])) + (", ..." if len(keys) > 10 else "")
    return f" ({key} {shown})"
