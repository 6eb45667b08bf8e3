"""Who commits a table's changes: its own log, or its database (docs/format.md sections 7 and 13).

A :class:`~castable.table.Table` handle is given its committer when it is made, and every write,
refresh and maintenance step of the handle goes through it; the handle never looks for its
database itself. Both kinds keep the handle current through ``on_newer``. A standalone table's is
:class:`OwnLog`, here; a member table's, its database's log, a transaction's stager or a
snapshot's pinned reader, are :mod:`castable.commit.dbcommitters`'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from castable.commit.change import Change, CommitResult
from castable.commit.conflicts import Rows
from castable.commit.log import newest_manifest
from castable.commit.pointer import Pointer
from castable.commit.protocol import commit_to_table
from castable.format.manifest import Manifest
from castable.format.properties import TableProperties
from castable.store import ObjectStore

NewerBase = Callable[[Manifest], None]
"""Hears of every newer version a committer loads, so a handle stays current even when a
commit then fails."""

AfterCommit = Callable[[ObjectStore, CommitResult], None]
"""What follows each commit of a table's own log (publishing its Iceberg metadata): it must
never fail or delay the commit it follows."""


class Committer(Protocol):
    """What commits one table's changes and says what its newest version is."""

    transactional: bool
    """Whether commits are only staged (a transaction), so maintenance cannot run."""

    def commit_change(self, base: Manifest, change: Change, commit_id: str, on_newer: NewerBase) -> CommitResult:
        """Commit (or stage) ``change``, planned on ``base``."""

    def observe(self, base: Manifest, rows: Rows) -> None:
        """Hear of a read of ``rows`` of ``base`` (a transaction validates it at commit)."""

    def newest(self, known: Manifest) -> Manifest:
        """The newest version this committer can see (``known`` is the newest the handle has)."""

    def before_maintenance(self, known: Manifest) -> Manifest:
        """Make the table's own manifests complete (or refuse) before expire, gc or purge; the
        newest version that has its own manifest, the one to maintain."""


class OwnLog:
    """A standalone table's committer: the table's own log of manifests and its pointer."""

    transactional = False

    def __init__(self, store: ObjectStore, pointer: Pointer | None, after_commit: AfterCommit | None = None) -> None:
        self.store = store
        self.pointer = pointer
        """The newest pointer seen; a commit's conditional write of it starts from here."""
        self.after_commit = after_commit

    def commit_change(self, base: Manifest, change: Change, commit_id: str, on_newer: NewerBase) -> CommitResult:
        def heard(manifest: Manifest, pointer: Pointer | None) -> None:
            self._seen(manifest, pointer)
            on_newer(manifest)

        props = TableProperties.parse(base.properties)
        result = commit_to_table(
            self.store,
            base,
            change,
            commit_id=commit_id,
            pointer=self.pointer,
            timeout=props.commit_timeout_seconds,
            commit_retention=props.commit_id_retention,
            on_newer_base=heard,
            fair=props.commit_fair_turns,
        )
        self._seen(result.manifest, result.pointer)
        if self.after_commit is not None:
            self.after_commit(self.store, result)
        return result

    def observe(self, base: Manifest, rows: Rows) -> None:
        """Reads outside a transaction are not validated."""

    def newest(self, known: Manifest) -> Manifest:
        manifest, pointer = newest_manifest(self.store, known=known, table_uuid=known.table_uuid)
        self._seen(manifest, pointer)
        return manifest

    def before_maintenance(self, known: Manifest) -> Manifest:
        """A table's own log is complete: the newest version (just loaded) is the one to maintain."""
        return known

    def _seen(self, manifest: Manifest, pointer: Pointer | None) -> None:
        if pointer is not None and (self.pointer is None or pointer.version >= self.pointer.version):
            self.pointer = pointer
