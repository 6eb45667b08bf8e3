"""Writes that replace rows in one commit: upsert by primary key, overwrite, overwrite where.

Each is new data files plus a delete of the rows they replace (tombstones, at delete cost:
a key list needs no data read), committed as one version. What differs is what a concurrent
commit that adds rows in the replaced range means (:mod:`castable.conflicts`):

- an upsert *supersedes* the rows with its keys: it re-plans its delete on the newer version, so
  rows another writer added with the same keys are replaced too and each key keeps one live
  row, the later commit's;
- an overwrite *claims* its range: rows added there meanwhile would be silently dropped, so the
  commit fails with a conflict instead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from castable.commit import NextState
from castable.delete import DeleteChange
from castable.errors import InvalidInputError
from castable.manifest import DataFile, Manifest
from castable.predicate import Predicate
from castable.store import ObjectStore


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
    ) -> None:
        self.delete = DeleteChange(store, replaced, base)
        self.replaced = replaced
        self.files = files
        self.operation = operation
        self.exclusive = exclusive
        """True for an overwrite (rows added meanwhile in the range are a conflict), False for an
        upsert (they are replaced too)."""

    def build(self, base: Manifest) -> NextState:
        ranged: dict[str, Any] = {"claims" if self.exclusive else "supersedes": self.replaced}
        self.delete.rebase(base, self.operation, replace(self.delete.footprint, **ranged))
        deleted = self.delete.apply(base)
        present = {f.path for f in deleted.data_files}
        clash = [f.path for f in self.files if f.path in present]
        if clash:
            raise InvalidInputError(f"already part of the table: {clash}")
        added = tuple(replace(f, added_version=base.version + 1) for f in self.files)
        return NextState(
            data_files=deleted.data_files + added,
            tombstones=deleted.tombstones,
            summary={
                "rows_added": sum(f.rows for f in self.files),
                "files_added": len(self.files),
                "bytes_added": sum(f.size for f in self.files),
                "rows_replaced": deleted.summary["rows_deleted"],
                "files_removed": deleted.summary["files_removed"],
                "tombstone": deleted.summary["tombstone"],
                "replans": self.delete.replans,
            },
        )
