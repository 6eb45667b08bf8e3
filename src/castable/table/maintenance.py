"""The maintenance methods of :class:`~castable.table.Table`: compaction, expiry, garbage
collection, the purge that completes an erasure, and repair of a damaged table. A mixin, so the
facade keeps one method per operation while each file keeps one concern."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol

from castable.commit.handle import Handle
from castable.commit.protocol import new_commit_id
from castable.errors import InvalidInputError
from castable.format.manifest import Manifest
from castable.maintenance import tasks
from castable.maintenance.compact import CompactReport
from castable.maintenance.damage import Damage, repair
from castable.maintenance.erase import EraseReport, PurgeReport
from castable.maintenance.erase import purge as purge_erased_objects
from castable.maintenance.gc import ExpireReport, GcReport
from castable.table import iceberg


class Maintained(Handle, Protocol):
    """What the maintenance methods need of the table they are part of."""

    _manifest: Manifest
    _damage: Damage | None

    def refresh(self) -> Maintained: ...

    def _readable(self) -> Manifest: ...

    def _maintained(self) -> Manifest: ...


class TableMaintenance:
    """Compaction, expiry, garbage collection, purges and repair, with defaults from the table's
    properties (docs/format.md section 12)."""

    def compact(
        self: Maintained,
        *,
        min_file_size: int | None = None,
        delete_ratio: float | None = None,
        sort_by: str | None = None,
        coalesce_tombstones: bool = True,
        files: list[str] | None = None,
        commit_id: str | None = None,
    ) -> CompactReport:
        """Rewrite small and delete-heavy files into files of the target size and merge tombstones.

        Defaults come from the ``compaction.*`` table properties. Old files stay for time travel
        until ``expire`` and ``gc`` remove them. ``files`` restricts the compaction to one group
        of :meth:`plan_compaction` (tombstones are then left as they are).
        """
        options = tasks.compact_options(self, min_file_size, delete_ratio, sort_by, coalesce_tombstones, files)
        return tasks.compact(self, options, commit_id=commit_id)

    def compact_group(
        self: Maintained, files: list[str], *, sort_by: str | None = None, commit_id: str | None = None
    ) -> CompactReport:
        """Rewrite exactly ``files`` (one group of :meth:`plan_compaction`, planned elsewhere: a
        workflow's or a Spark task's) into files of the target size, in one commit; tombstones are
        left as they are."""
        options = tasks.compact_options(self, 2**62, 1e-9, sort_by, True, files)
        return tasks.compact(self, options, commit_id=commit_id)

    def coalesce_tombstones(self: Maintained, *, commit_id: str | None = None) -> CompactReport:
        """Merge the tombstone files of the table's data files into one, rewriting no data file
        (but dropping those every row of which is deleted): the step after compacting groups."""
        return tasks.compact(self, tasks.compact_options(self, 1, 1.0, None, True, None), commit_id=commit_id)

    def plan_compaction(
        self: Maintained, *, min_file_size: int | None = None, delete_ratio: float | None = None
    ) -> list[list[str]]:
        """Groups of data files worth compacting, each about one target file in size: independent
        units of work that can be compacted in parallel (``compact(files=group)``)."""
        return tasks.plan_compaction(self, tasks.compact_options(self, min_file_size, delete_ratio))

    def expire(
        self: Maintained, *, retain_versions: int | None = None, retain_for: timedelta | None = None
    ) -> ExpireReport:
        """Delete the manifests of old versions: kept are the newest ``retain_versions`` and those
        younger than ``retain_for`` (defaults: the ``history.*`` properties); the latest always."""
        report = tasks.expire(self, self._maintained, retain_versions, retain_for)
        published = iceberg.retention(self.store)
        if published is not None and report.versions_expired:
            published.after_expire(self.store, self.version, self.snapshot)
        return report

    def gc(self: Maintained, *, orphan_grace: timedelta | None = None, dry_run: bool = False) -> GcReport:
        """Delete data and tombstone files no retained version references, once older than
        ``orphan_grace`` (default: ``gc.orphan-grace-seconds``), and abort stale multipart uploads;
        with them the Iceberg metadata published from them."""
        self._maintained()
        report = tasks.gc(self, orphan_grace, dry_run)
        published = iceberg.retention(self.store)
        if published is not None:
            grace = orphan_grace if orphan_grace is not None else timedelta(seconds=self.settings.orphan_grace_seconds)
            report.objects += published.sweep(self.store, datetime.now(UTC) - grace, dry_run=dry_run)
        return report

    def purge_erased(self: Maintained, report: EraseReport) -> PurgeReport:
        """Complete an erasure: expire the versions that still reference the old objects,
        delete those objects (and their noncurrent versions), and verify that no retained
        object still holds a matching row."""
        self._maintained()
        self.store.check_conditional_writes()
        purged = purge_erased_objects(self.store, report)
        if self.settings.publish_iceberg:
            iceberg.publish_after_purge(self.refresh())
        return purged

    def repair(self: Maintained, *, commit_id: str | None = None) -> int:
        """Make a damaged table (see :attr:`damage`) writable again; return its newest version.

        When the newest versions cannot be read, their contents are lost: the newest readable
        version's files and tombstones are committed as a new version after them (no data is
        copied; the unreadable manifests stay, listed by ``history``). A malformed pointer is
        rewritten to name the newest version. An undamaged table is left as it is.
        """
        if self._manifest.database is not None:
            raise InvalidInputError(
                "a table of a database needs no repair: a version whose own manifest is damaged or missing "
                "is read from the database log, which holds it"
            )
        self.refresh()
        if self._damage is None:
            return self.version
        checked = new_commit_id(commit_id)
        self.store.check_conditional_writes()
        repair(self.store, self._damage, commit_id=checked, commit_retention=self.settings.commit_id_retention)
        return self.refresh()._readable().version
