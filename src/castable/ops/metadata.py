"""The commits of a table handle that write no data file: a restore (an older version's files
and tombstones, listed again), a schema change (alter, docs/format.md section 4), new table
properties (section 9), and an upgrade to the latest format version. Like the writes of
:mod:`castable.ops.writes`, each is a :func:`~castable.commit.handle.write_operation` and ends
with one :meth:`Handle.commit_change`; a bad change is refused before anything is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from castable.commit.change import NextState
from castable.commit.handle import Handle, WriteSession, committed_result, unchanged, write_operation
from castable.commit.written import WriteResult
from castable.errors import InvalidInputError
from castable.format.evolution import SchemaUpdate, restored
from castable.format.manifest import LATEST_FORMAT_VERSION, Manifest
from castable.format.partitioning import Partitioning, check_sources, described
from castable.format.properties import checked
from castable.format.sorting import Sorting, check_sort_sources, sort_described
from castable.inputs.orders import SortBy, parse_sort_by
from castable.inputs.partitions import PartitionBy, parse_partition_by
from castable.ops.uniqueness import keys_kept
from castable.store import ObjectStore


@write_operation(committed_result)
def restore(
    t: Handle, w: WriteSession, version: int | None = None, *, as_of: datetime | str | None = None
) -> WriteResult:
    """Commit a new version whose data files and tombstones are those of ``version`` (or of the
    version current at ``as_of``); return it. No data is copied. Refused when that version has
    expired or any of its files is gone (removed outside castable: gc keeps a retained
    version's files). Commits made after it are not lost: they
    stay in the history, and a later restore can return to them.
    """
    if (version is None) == (as_of is None):
        raise InvalidInputError("restore needs a version or as_of (one of them)")
    target = t.manifest_at(version, as_of)
    stored = [f.path for f in target.data_files if f.inline is None]  # an inline entry's rows are in its segment
    gone = absent(t.store, stored + [f.path for f in target.tombstones])
    if gone:
        raise InvalidInputError(
            f"cannot restore version {target.version}: {len(gone)} of its files are gone "
            f"(e.g. {gone[0]}); restore a newer version"
        )
    summary = {"restored_version": target.version, "files": len(target.data_files), "rows": target.total_rows}

    def build(base: Manifest) -> NextState:
        schema = restored(target.schema, base.schema)
        return NextState(target.data_files, target.tombstones, summary, schema=schema, primary_key=target.primary_key)

    return t.commit_change("restore", w, keys_kept(t.store, build), across_schema=True)


@write_operation(committed_result)
def alter(t: Handle, w: WriteSession, update: SchemaUpdate[Any]) -> WriteResult:
    """Commit the schema changes of ``update`` (see :meth:`castable.table.Table.alter`)."""
    if t.manifest.format_version < 2:
        raise InvalidInputError("schema changes need format version 2: upgrade the table first (castable upgrade)")
    schema, _ = update.apply(t.schema, t.manifest.primary_key, t.version + 1)  # refuse a bad change before committing
    check_sources(t.manifest.partitioning, schema)
    check_sort_sources(t.manifest.sorting, schema)

    def build(base: Manifest) -> NextState:
        schema, key = update.apply(base.schema, base.primary_key, base.version + 1)
        check_sources(base.partitioning, schema)
        check_sort_sources(base.sorting, schema)
        summary = {"changes": update.describe()}
        return NextState(base.data_files, base.tombstones, summary, schema=schema, primary_key=key)

    return t.commit_change("alter", w, keys_kept(t.store, build), across_schema=True)


@write_operation(committed_result)
def partition_by(t: Handle, w: WriteSession, fields: PartitionBy) -> WriteResult:
    """See :meth:`castable.table.Table.partition_by`."""

    def laid(base: Manifest) -> tuple[Partitioning, dict[str, Any]]:
        partitioning = base.partitioning.evolved(parse_partition_by(fields, base.schema), base.schema)
        spec = partitioning.default
        return partitioning, {"spec_id": spec.spec_id, "fields": [described(f, base.schema) for f in spec.fields]}

    return _relayout(t, w, "partition-by", laid)


@write_operation(committed_result)
def sort_by(t: Handle, w: WriteSession, fields: SortBy) -> WriteResult:
    """See :meth:`castable.table.Table.sort_by`."""

    def laid(base: Manifest) -> tuple[Sorting, dict[str, Any]]:
        sorting = base.sorting.evolved(parse_sort_by(fields, base.schema), base.schema)
        order = sorting.default
        return sorting, {"order_id": order.order_id, "fields": [sort_described(f, base.schema) for f in order.fields]}

    return _relayout(t, w, "sort-by", laid)


def _relayout(
    t: Handle,
    w: WriteSession,
    operation: str,
    laid: Callable[[Manifest], tuple[Partitioning | Sorting, dict[str, Any]]],
) -> WriteResult:
    """Commit the layout (partitioning or sorting) ``laid`` makes of each base, in a version of
    its own that rewrites nothing; nothing when the base has it already, a bad field refused first."""
    if t.manifest.format_version < 2:
        raise InvalidInputError(f"{operation} needs format version 2: upgrade the table first (castable upgrade)")
    layout = laid(t.manifest)[0]
    if layout in (t.manifest.partitioning, t.manifest.sorting):
        return unchanged(t, w, operation)

    def build(base: Manifest) -> NextState:
        layout, summary = laid(base)
        partitioning = layout if isinstance(layout, Partitioning) else None
        sorting = layout if isinstance(layout, Sorting) else None
        return NextState(base.data_files, base.tombstones, summary, partitioning=partitioning, sorting=sorting)

    return t.commit_change(operation, w, build)


@write_operation(committed_result)
def set_properties(
    t: Handle, w: WriteSession, changes: Mapping[str, object], *, remove: Collection[str] = ()
) -> WriteResult:
    """See :meth:`castable.table.Table.set_properties`."""
    gone = set(remove) - set(changes)

    def after(base: Manifest) -> dict[str, str]:
        props = {k: v for k, v in base.properties.items() if k not in gone} | dict(changes)
        return checked(props, base.schema, base.primary_key)

    after(t.manifest)  # refuse a bad setting before committing

    def build(base: Manifest) -> NextState:
        summary: dict[str, Any] = {"set": {str(k): str(v) for k, v in changes.items()}}
        if gone:
            summary["removed"] = sorted(gone)
        return NextState(base.data_files, base.tombstones, summary, properties=after(base))

    return t.commit_change("set-properties", w, keys_kept(t.store, build), across_schema=True)


@write_operation(committed_result)
def upgrade(t: Handle, w: WriteSession) -> WriteResult:
    """See :meth:`castable.table.Table.upgrade`."""
    if t.manifest.format_version == LATEST_FORMAT_VERSION:
        return unchanged(t, w, "upgrade")

    def build(base: Manifest) -> NextState:
        summary = {"from_format_version": base.format_version, "format_version": LATEST_FORMAT_VERSION}
        return NextState(base.data_files, base.tombstones, summary, format_version=LATEST_FORMAT_VERSION)

    return t.commit_change("upgrade", w, build)


def absent(store: ObjectStore, keys: list[str]) -> list[str]:
    """The keys of ``keys`` that no object holds (checked 16 at a time)."""
    with ThreadPoolExecutor(16) as pool:
        return [key for key, there in zip(keys, pool.map(store.exists, keys), strict=True) if not there]
