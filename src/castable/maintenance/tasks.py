"""Maintenance of a table handle: compaction, expiry of old versions and garbage collection
(docs/format.md section 12), with their defaults taken from the table's properties."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from castable.commit.handle import Handle, WriteSession, write_operation
from castable.errors import InvalidInputError, columns_hint
from castable.format.manifest import Manifest
from castable.format.times import now
from castable.maintenance.compact import CompactChange, CompactOptions, CompactReport, plan_groups
from castable.maintenance.gc import ExpireReport, GcReport
from castable.maintenance.gc import expire as expire_versions
from castable.maintenance.gc import gc as collect_garbage


def _compacted_before(t: Handle, w: WriteSession, options: CompactOptions) -> CompactReport:
    """A retried compaction's report: nothing rewritten now."""
    assert w.committed_as is not None
    return CompactReport(w.committed_as)


@write_operation(_compacted_before)
def compact(t: Handle, w: WriteSession, options: CompactOptions) -> CompactReport:
    """See :meth:`castable.table.Table.compact`."""
    change = CompactChange(t.store, t.manifest, t.settings, options)
    if change.is_empty:
        return CompactReport(t.version)
    version = t.commit_change("compact", w, change.build).version
    return change.report(version)


def plan_compaction(t: Handle, options: CompactOptions) -> list[list[str]]:
    """See :meth:`castable.table.Table.plan_compaction`."""
    return plan_groups(t.snapshot(), options, t.settings.target_file_size)


def compact_options(
    t: Handle,
    min_file_size: int | None,
    delete_ratio: float | None,
    sort_by: str | None = None,
    coalesce_tombstones: bool = False,
    files: list[str] | None = None,
) -> CompactOptions:
    """A compaction's options, the ``compaction.*`` properties standing in for those not given."""
    props = t.settings
    if sort_by is not None and sort_by not in t.schema.names:
        raise InvalidInputError(f"sort_by names unknown column {sort_by!r} {columns_hint(sort_by, t.schema.names)}")
    return CompactOptions(
        min_file_size=props.compact_min_file_size if min_file_size is None else min_file_size,
        delete_ratio=props.compact_delete_ratio if delete_ratio is None else delete_ratio,
        sort_by=sort_by,
        coalesce_tombstones=coalesce_tombstones and files is None,
        only=None if files is None else frozenset(files),
    )


def expire(
    t: Handle, maintained: Callable[[], Manifest], retain_versions: int | None, retain_for: timedelta | None
) -> ExpireReport:
    """See :meth:`castable.table.Table.expire`; ``maintained`` gives the newest version, which is kept."""
    if retain_versions is None and retain_for is None:
        props = t.settings
        retain_versions, retain_for = props.retain_versions, timedelta(seconds=props.retain_seconds)
    if retain_versions is not None and retain_versions < 1:
        raise InvalidInputError("retain_versions must be at least 1")
    t.store.check_conditional_writes()
    latest = maintained()
    return expire_versions(t.store, latest, retain_versions=retain_versions, retain_for=retain_for, now=now())


def gc(t: Handle, orphan_grace: timedelta | None, dry_run: bool) -> GcReport:
    """See :meth:`castable.table.Table.gc`."""
    grace = timedelta(seconds=t.settings.orphan_grace_seconds) if orphan_grace is None else orphan_grace
    if grace < timedelta(0):
        raise InvalidInputError("orphan_grace cannot be negative")
    return collect_garbage(t.store, orphan_grace=grace, dry_run=dry_run, now=now())
