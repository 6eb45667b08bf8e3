"""Writes that replace rows in one commit: upsert by primary key, overwrite, overwrite where,
update and merge.

Each is new data files plus a delete of the rows they replace (tombstones, at delete cost:
a key list needs no data read), committed as one version. What differs is what a concurrent
commit means (:mod:`castable.commit.conflicts`):

- an upsert *supersedes* the rows with its keys: it re-plans its delete on the newer version, so
  rows another writer added with the same keys are replaced too and each key keeps one live
  row, the later commit's;
- an overwrite *claims* its range: rows added there meanwhile would be silently dropped, so the
  commit fails with a conflict instead;
- an update or a merge *reads* the rows it changes (:class:`RewriteChange`): if another commit
  removed or deleted rows in a file it read, it reads and writes again on the newer version, so
  it never changes a row that is gone nor misses a change committed to one it changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from castable.commit.change import NextState
from castable.commit.conflicts import Footprint, PlannedChange
from castable.errors import InvalidInputError
from castable.format.manifest import DataFile, FileList, Manifest
from castable.ops.delete import DeleteChange, FilePlanner, plan_files
from castable.read.predicate import Predicate
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore
from castable.store.uploads import Deferred


class ReplaceChange:
    """New data files and the delete of the rows matching ``replaced``, committed together."""

    def __init__(
        self,
        store: ObjectStore,
        base: Manifest,
        replaced: Predicate,
        files: list[DataFile],
        *,
        operation: str,
        exclusive: bool,
        sources: tuple[str, ...] = (),
        registered: bool = False,
        uploads: Deferred | None = None,
    ) -> None:
        self.delete = DeleteChange(store, replaced, base, uploads=uploads)
        self.sources = sources
        self.registered = registered
        """The files were written by another engine (``add_files``), as the summary says."""
        self.replaced = replaced
        self.files = files
        self.operation = operation
        self.exclusive = exclusive
        """True for an overwrite (rows added meanwhile in the range are a conflict), False for an
        upsert (they are replaced too)."""

    def build(self, base: Manifest) -> NextState:
        planned = self.delete.footprint
        footprint = (
            replace(planned, claims=self.replaced) if self.exclusive else replace(planned, supersedes=self.replaced)
        )
        self.delete.rebase(base, self.operation, footprint)
        state = replaced_state(
            self.delete.apply(base), self.files, base, registered=self.registered, replans=self.delete.replans
        )
        return replace(state, source_ids=self.sources)


@dataclass(frozen=True)
class Rewrite:
    """What an update or merge derives from one version: the rows it replaces, their new rows."""

    replaced: Predicate
    rows: pa.Table
    supersedes: Predicate | None = None
    """Rows matching this, added by a concurrent commit, would have changed the outcome
    (a merge's source keys: a key inserted meanwhile is no longer "not matched")."""
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Rewritten:
    """A rewrite made of one version: its new rows written as ``files``, and the rows they replace."""

    replaced: Predicate
    files: list[DataFile]
    supersedes: Predicate | None = None
    """As :attr:`Rewrite.supersedes`."""
    summary: dict[str, Any] = field(default_factory=dict)


class RewriteChange(PlannedChange):
    """Rows read from a version, changed, and written back in one commit: the read rows get
    tombstones and their new rows are appended. A re-plan reads and writes again.

    ``produce`` reads, changes and writes (here, or on a cluster); ``read_files`` plans the
    tombstones of the files the replaced rows' delete must read."""

    def __init__(
        self,
        store: ObjectStore,
        base: Manifest,
        produce: Callable[[Snapshot], Rewritten],
        *,
        operation: str,
        read_files: FilePlanner = plan_files,
        uploads: Deferred | None = None,
    ) -> None:
        self.store = store
        self.produce = produce
        self.read_files = read_files
        self.uploads = uploads
        self.operation = operation
        self._plan(base)

    def _plan(self, base: Manifest) -> None:
        self.planned_on = base
        rewrite = self.produce(Snapshot(self.store, base))
        self.files = rewrite.files
        self.delete = DeleteChange(self.store, rewrite.replaced, base, self.read_files, self.uploads)
        self.summary = rewrite.summary
        self.footprint = Footprint(reads=self.delete.footprint.targets, supersedes=rewrite.supersedes)

    @property
    def is_empty(self) -> bool:
        """Nothing to commit: no row is replaced and none is written."""
        return self.delete.plan.is_empty and not self.files

    def build(self, base: Manifest) -> NextState:
        self.rebase(base, self.operation)
        return replaced_state(self.delete.apply(base), self.files, base, replans=self.replans, **self.summary)


def replaced_state(
    deleted: NextState, files: Sequence[DataFile], base: Manifest, *, registered: bool = False, **summary: Any
) -> NextState:
    """The next version: ``deleted`` (a delete applied to ``base``) with ``files`` added. Files
    castable wrote have fresh names; ``registered`` ones are checked against the version's files."""
    if registered:
        check_new_files(deleted.data_files, files)
        summary["registered"] = True
    added = tuple(replace(f, added_version=base.version + 1) for f in files)
    return NextState(
        data_files=deleted.data_files + added,
        tombstones=deleted.tombstones,
        summary={
            "rows_added": sum(f.rows for f in files),
            "files_added": len(files),
            "bytes_added": sum(f.size for f in files),
            "rows_replaced": deleted.summary["rows_deleted"],
            "files_removed": deleted.summary["files_removed"],
            "tombstone": deleted.summary["tombstone"],
            **summary,
        },
    )


def check_new_files(present: FileList[DataFile], files: Sequence[DataFile]) -> None:
    """Refuse files a version already lists (a registration repeated under another commit id)."""
    clash = present.holding([f.path for f in files])
    if clash:
        raise InvalidInputError(f"already part of the table: {clash}")
