"""Time travel and history: a table's retained versions by number or by time, and its commits
newest first (docs/format.md sections 2 and 3: versions are dense, each with its commit time)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow.compute as pc

from castable.changes import ChangeScan, changes_schema
from castable.commit import entry_as_of, read_manifest
from castable.errors import CorruptObjectError, InvalidInputError, VersionNotFoundError
from castable.gc import retained_versions
from castable.manifest import Manifest
from castable.pointer import retention_floor
from castable.predicate import Predicate, parse_predicate
from castable.snapshot import Snapshot
from castable.store import ObjectStore
from castable.times import as_datetime

_READ_THREADS = 16


@dataclass(frozen=True)
class HistoryEntry:
    """One commit in the table's history; an unreadable version has ``error`` and no details."""

    version: int
    timestamp: datetime | None
    operation: str
    commit_id: str
    summary: dict[str, Any]
    error: str | None = None


def manifest_of_version(store: ObjectStore, known: Manifest, version: int) -> Manifest:
    """The manifest of ``version`` (``known`` if it is that one); ``VersionNotFoundError``
    saying whether it is not committed yet or has expired."""
    if not isinstance(version, int) or isinstance(version, bool):
        raise InvalidInputError(f"version must be an integer, not {version!r}")
    if version == known.version:
        return known
    if version < 0:
        raise VersionNotFoundError(f"version {version} does not exist; versions start at 0")
    try:
        if version < retention_floor(store):
            raise VersionNotFoundError()
        return read_manifest(store, version, known.table_uuid)
    except VersionNotFoundError:
        raise VersionNotFoundError(missing_version(store, version)) from None


def change_manifests(store: ObjectStore, newest: Manifest, start: int, end: int) -> list[Manifest | None]:
    """The manifests a change range ``start..end`` reads: version ``start - 1`` (``None`` for
    version 0) through ``end``, fetched in parallel. The changes of version v are what v-1 and v
    differ by, so a range needs the version before it: one starting at or below the retention
    floor raises ``VersionNotFoundError`` naming the oldest version whose changes can be read."""
    for name, value in (("start", start), ("end", end)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidInputError(f"{name} version must be a non-negative integer, not {value!r}")
    if start > end:
        raise InvalidInputError(f"start version {start} is after end version {end}")
    if end > newest.version:
        raise VersionNotFoundError(f"version {end} of {store.uri} does not exist (the newest is {newest.version})")
    floor = retention_floor(store)
    if start > 0 and start - 1 < floor:
        raise VersionNotFoundError(
            f"the changes of version {start} of {store.uri} need version {start - 1}, which has expired; "
            f"the oldest version whose changes can be read is {floor + 1}"
        )
    wanted = range(max(start - 1, 0), end + 1)
    with ThreadPoolExecutor(min(_READ_THREADS, len(wanted))) as pool:
        found = list(pool.map(partial(manifest_of_version, store, newest), wanted))
    return ([None] if start == 0 else []) + list(found)


def change_scan(
    store: ObjectStore,
    newest: Manifest,
    start_version: int | None,
    end_version: int | None,
    *,
    start_time: datetime | str | None = None,
    end_time: datetime | str | None = None,
    columns: list[str] | None = None,
    filter: str | pc.Expression | Predicate | None = None,
) -> ChangeScan:
    """The changes committed in ``start_version..end_version`` (``None``: the newest), or
    between ``start_time`` and ``end_time`` (each mapped as ``as_of`` maps a time); see
    :class:`castable.changes.ChangeScan`. ``filter`` may name the change columns too."""
    if (start_version is None) == (start_time is None):
        raise InvalidInputError("give start_version or start_time, not both and not neither")
    if end_version is not None and end_time is not None:
        raise InvalidInputError("give end_version or end_time, not both")
    if isinstance(columns, str):
        raise InvalidInputError(f"columns must be a list of names, such as {columns.split(',')!r}, not a string")
    if start_version is not None:
        start = start_version
    else:
        assert start_time is not None
        start = change_start(store, newest, as_datetime(start_time))
    end = newest.version if end_version is None else end_version
    if end_time is not None:
        end = manifest_as_of(store, newest, as_datetime(end_time)).version
    if start_time is not None and start == end + 1:  # no commit in the window
        manifests: list[Manifest | None] = [manifest_of_version(store, newest, end)]
    else:
        manifests = change_manifests(store, newest, start, end)
    last = manifests[-1]
    assert last is not None
    predicate = None if filter is None else parse_predicate(filter, changes_schema(last.schema))
    return ChangeScan(Snapshot(store, last), manifests, columns, predicate)


def change_start(store: ObjectStore, latest: Manifest, at: datetime) -> int:
    """The first version committed at or after ``at``: where changes since ``at`` start (0 if
    the table's first retained version is 0 and came after ``at``)."""
    at = at if at.tzinfo is not None else at.astimezone()
    try:
        current = manifest_as_of(store, latest, at)
    except VersionNotFoundError:
        if retention_floor(store) == 0:
            return 0
        raise
    return current.version + (current.created_at < at)


def manifest_as_of(store: ObjectStore, latest: Manifest, as_of: datetime) -> Manifest:
    """The version current at ``as_of`` (without a zone, local time), searched below ``latest``."""
    if as_of.tzinfo is None:
        as_of = as_of.astimezone()
    found = entry_as_of(
        partial(read_manifest, store, table_uuid=latest.table_uuid), retention_floor(store), latest, as_of
    )
    if found is None:
        raise VersionNotFoundError(f"no retained version of {store.uri} existed at {as_of.isoformat()}")
    return found


def history(store: ObjectStore, table_uuid: str, limit: int | None = None) -> list[HistoryEntry]:
    """Retained commits newest first, down to the oldest retained or ``limit``; expired versions
    are skipped and an unreadable one is listed with its ``error``."""
    entries: list[HistoryEntry] = []
    for version in reversed(retained_versions(store)):
        if limit is not None and len(entries) >= limit:
            break
        try:
            m = read_manifest(store, version, table_uuid)
        except VersionNotFoundError:
            continue
        except CorruptObjectError as e:
            entries.append(HistoryEntry(version, None, "unreadable", "", {}, error=str(e)))
            continue
        c = m.commit
        entries.append(HistoryEntry(m.version, m.created_at, c.operation, c.commit_id, c.summary))
    return entries


def missing_version(store: ObjectStore, version: int) -> str:
    """Why ``version`` cannot be read: not committed yet, or expired."""
    versions = retained_versions(store)
    if not versions or version > versions[-1]:
        newest = versions[-1] if versions else "unknown"
        return f"version {version} of {store.uri} does not exist (the newest is {newest})"
    return (
        f"version {version} of {store.uri} has expired (removed by expire or an erasure's purge); "
        f"retained versions run from {versions[0]} to {versions[-1]}"
    )
