"""One conflict model for every operation's rebase (DESIGN section 4).

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
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass

import pyarrow as pa

from castable.errors import CommitConflictError
from castable.manifest import DataFile, Manifest
from castable.predicate import Match, Predicate


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
