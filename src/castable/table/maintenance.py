"""A table's maintenance, ``table.maintenance`` (as pyiceberg's ``Table.maintenance`` and
deltalake's ``DeltaTable.optimize``): compaction, expiry, garbage collection, the purge that
completes an erasure, and repair of a damaged table, over the table's internal handle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from castable.commit.change import new_commit_id
from castable.errors import InvalidInputError
from castable.maintenance import tasks
from castable.maintenance.compact import CompactReport
from castable.maintenance.damage import repair
from castable.maintenance.erase import EraseReport, PurgeReport
from castable.maintenance.erase import purge as purge_erased_objects
from castable.maintenance.gc import ExpireReport, GcReport
from castable.table.handle import TableHandle
from castable.table.iceberg import publish_after_purge, retention


class Maintenance:
    """Compaction, expiry, garbage collection, purges and repair of one table, with defaults from
    the table's properties (docs/format.md section 12)."""

    def __init__(self, table: TableHandle) -> None:
        self._table = table

    def compact(
        self,
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
        options = tasks.compact_options(self._table, min_file_size, delete_ratio, sort_by, coalesce_tombstones, files)
        return tasks.compact(self._table, commit_id, options)

    def compact_group(
        self, files: list[str], *, sort_by: str | None = None, commit_id: str | None = None
    ) -> CompactReport:
        """Rewrite exactly ``files`` (one group of :meth:`plan_compaction`, planned elsewhere: a
        workflow's or a Spark task's) into files of the target size, in one commit; tombstones are
        left as they are."""
        return self.compact(min_file_size=2**62, delete_ratio=1e-9, sort_by=sort_by, files=files, commit_id=commit_id)

    def coalesce_tombstones(self, *, commit_id: str | None = None) -> CompactReport:
        """Merge the tombstone files of the table's data files into one, rewriting no data file
        (but dropping those every row of which is deleted): the step after compacting groups."""
        return self.compact(min_file_size=1, delete_ratio=1.0, commit_id=commit_id)

    def plan_compaction(
        self, *, min_file_size: int | None = None, delete_ratio: float | None = None
    ) -> list[list[str]]:
        """Groups of data files worth compacting, each about one target file in size: independent
        units of work that can be compacted in parallel (``compact(files=group)``)."""
        return tasks.plan_compaction(self._table, tasks.compact_options(self._table, min_file_size, delete_ratio))

    def expire(self, *, retain_versions: int | None = None, retain_for: timedelta | None = None) -> ExpireReport:
        """Delete the manifests of old versions: kept are the newest ``retain_versions`` and those
        younger than ``retain_for`` (defaults: the ``history.*`` properties); the latest always."""
        report = tasks.expire(self._table, self._table.maintained, retain_versions, retain_for)
        published = retention(self._table.store)
        if published is not None and report.versions_expired:
            published.after_expire(self._table.store, self._table.version, self._table.snapshot)
        return report

    def gc(self, *, orphan_grace: timedelta | None = None, dry_run: bool = False) -> GcReport:
        """Delete data and tombstone files no retained version references, once older than
        ``orphan_grace`` (default: ``gc.orphan-grace-seconds``), and abort stale multipart uploads;
        with them the Iceberg metadata published from them."""
        self._table.maintained()
        report = tasks.gc(self._table, orphan_grace, dry_run)
        published = retention(self._table.store)
        if published is not None:
            grace = (
                orphan_grace
                if orphan_grace is not None
                else timedelta(seconds=self._table.settings.orphan_grace_seconds)
            )
            report.objects += published.sweep(self._table.store, datetime.now(UTC) - grace, dry_run=dry_run)
        return report

    def purge_erased(self, report: EraseReport) -> PurgeReport:
        """Complete an erasure: expire the versions that still reference the old objects,
        delete those objects (and their noncurrent versions), and verify that no retained
        object still holds a matching row."""
        self._table.maintained()
        self._table.store.check_conditional_writes()
        purged = purge_erased_objects(self._table.store, report)
        if self._table.settings.publish_iceberg:
            publish_after_purge(self._table.refresh())
        return purged

    def repair(self, *, commit_id: str | None = None) -> int:
        """Make a damaged table (see :attr:`damage`) writable again; return its newest version.

        When the newest versions cannot be read, their contents are lost: the newest readable
        version's files and tombstones are committed as a new version after them (no data is
        copied; the unreadable manifests stay, listed by ``history``). A malformed pointer is
        rewritten to name the newest version. An undamaged table is left as it is.
        """
        if self._table.manifest.database is not None:
            raise InvalidInputError(
                "a table of a database needs no repair: a version whose own manifest is damaged or missing "
                "is read from the database log, which holds it"
            )
        damage = self._table.refresh().damage
        if damage is None:
            return self._table.version
        checked = new_commit_id(commit_id)
        self._table.store.check_conditional_writes()
        repair(self._table.store, damage, commit_id=checked, commit_retention=self._table.settings.commit_id_retention)
        return self._table.refresh().readable().version
