"""Change ranges: which versions a change feed reads, by number, by time or by database version.

The changes of version v are what versions v-1 and v differ by (:mod:`castable.read.changes`), so a
range needs the version before it; this module checks a range against what is retained and
fetches those manifests, for a table of its own and for a member of a database.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial

from castable.commit.dblog import DatabaseVersion
from castable.commit.log import read_manifest
from castable.commit.pointer import retention_floor
from castable.errors import InvalidInputError, VersionNotFoundError
from castable.format.manifest import Manifest
from castable.format.times import as_datetime
from castable.maintenance.history import manifest_as_of, manifest_of_version, missing_version
from castable.read.changes import ChangeScan, changes_schema
from castable.read.snapshot import Snapshot
from castable.read.where import Where, parse_predicate
from castable.store import ObjectStore

_READ_THREADS = 16


def checked_range(start: object, end: object, newest: int, where: str, *, open_end: bool) -> range:
    """Versions ``start..end`` of something whose newest version is ``newest``. A range starting
    just after the newest with an open end (a consumer that has read everything) is empty."""
    for name, value in (("start", start), ("end", end)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidInputError(f"{name} version must be a non-negative integer, not {value!r}")
    assert isinstance(start, int) and isinstance(end, int)
    if start > newest + 1 or end > newest:
        raise VersionNotFoundError(f"version {max(start, end)} of {where} does not exist (the newest is {newest})")
    if start > end and not (open_end and start == end + 1):
        raise InvalidInputError(f"start version {start} is after end version {end}")
    return range(start, end + 1)


def change_manifests(store: ObjectStore, newest: Manifest, versions: range) -> list[Manifest | None]:
    """The manifests a change range reads: the version before it (``None`` before version 0)
    and each of its versions, fetched in parallel. A range starting at or below the retention
    floor raises ``VersionNotFoundError`` naming the oldest version whose changes can be read."""
    start = versions.start
    floor = retention_floor(store)
    if start > 0 and start - 1 < floor:
        raise VersionNotFoundError(
            f"the changes of version {start} of {store.uri} need version {start - 1}, which has expired; "
            f"the oldest version whose changes can be read is {floor + 1}"
        )
    wanted = range(max(start - 1, 0), versions.stop)
    with ThreadPoolExecutor(min(_READ_THREADS, len(wanted))) as pool:
        found = list(pool.map(partial(_retained, store, newest), wanted))
    return ([None] if start == 0 else []) + list(found)


def _retained(store: ObjectStore, newest: Manifest, version: int) -> Manifest:
    """A version at or above the retention floor (checked once for the range, not per version)."""
    if version == newest.version:
        return newest
    try:
        return read_manifest(store, version, newest.table_uuid)
    except VersionNotFoundError:
        raise VersionNotFoundError(missing_version(store, version)) from None


def change_scan(
    store: ObjectStore,
    newest: Manifest,
    start_version: int | None,
    end_version: int | None,
    *,
    start_time: datetime | str | None = None,
    end_time: datetime | str | None = None,
    columns: list[str] | None = None,
    filter: Where | None = None,
) -> ChangeScan:
    """The changes committed in ``start_version..end_version`` (``None``: the newest), or
    between ``start_time`` and ``end_time`` (each mapped as ``as_of`` maps a time); see
    :class:`castable.read.changes.ChangeScan`. ``filter`` may name the change columns too."""
    if (start_version is None) == (start_time is None):
        raise InvalidInputError("give a start version or a start time, not both and not neither")
    if end_version is not None and end_time is not None:
        raise InvalidInputError("give an end version or an end time, not both")
    if isinstance(columns, str):
        raise InvalidInputError(f"columns must be a list of names, such as {columns.split(',')!r}, not a string")
    start = change_start(store, newest, as_datetime(start_time)) if start_time is not None else start_version
    end = newest.version if end_version is None else end_version
    if end_time is not None:
        end = change_start(store, newest, as_datetime(end_time), after=True) - 1
    if end < 0 and start == 0:  # a window that closed before the table's first version
        return _scan(store, [None], manifest_of_version(store, newest, 0), columns, filter)
    versions = checked_range(start, end, newest.version, store.uri, open_end=end_version is None)
    if versions:
        manifests = change_manifests(store, newest, versions)
    else:
        manifests = [manifest_of_version(store, newest, versions.start - 1)]
    last = manifests[-1]
    assert last is not None
    return _scan(store, manifests, last, columns, filter)


def member_changes(
    store: ObjectStore,
    head: DatabaseVersion,
    read: Callable[[int], DatabaseVersion],
    member: Callable[[DatabaseVersion], Manifest],
    name: str,
    start_version: int,
    end_version: int | None,
    *,
    columns: list[str] | None = None,
    filter: Where | None = None,
) -> ChangeScan:
    """The changes of member table ``name`` (at ``store``) committed in database versions
    ``start_version..end_version`` (``None``: ``head``'s), numbered by database version: each
    table version a database version committed is read from it. ``read`` reads a database
    version, ``member`` the table's manifest in one."""
    end = head.version if end_version is None else end_version
    versions = checked_range(
        start_version, end, head.version, f"the database of {name!r}", open_end=end_version is None
    )
    wanted = range(max(versions.start - 1, 0), max(versions.stop, versions.start))
    with ThreadPoolExecutor(min(_READ_THREADS, len(wanted))) as pool:
        found = list(pool.map(read, wanted))
    before = found[0] if versions.start > 0 else None
    written = [at for at in found[1 if before is not None else 0 :] if at.version in versions and _commits(at, name)]
    last = member(found[-1])
    manifests: list[Manifest | None] = [member(before) if before is not None and name in before.tables else None]
    manifests += [member(at) for at in written]
    if any(m is not None and m.table_uuid != last.table_uuid for m in manifests):
        raise InvalidInputError(f"table {name!r} was created again within the range; start after its creation")
    return _scan(store, manifests, last, columns, filter, commit_versions=[at.version for at in written])


def _commits(at: DatabaseVersion, name: str) -> bool:
    """Whether database version ``at`` commits a version of table ``name``."""
    entry = at.tables.get(name)
    return entry is not None and entry.committed_in == at.version


def _scan(
    store: ObjectStore,
    manifests: list[Manifest | None],
    last: Manifest,
    columns: list[str] | None,
    filter: Where | None,
    *,
    commit_versions: list[int] | None = None,
) -> ChangeScan:
    """The scan of a range's ``manifests``, read under the schema of ``last``."""
    predicate = None if filter is None else parse_predicate(filter, changes_schema(last.schema))
    return ChangeScan(Snapshot(store, last), manifests, columns, predicate, commit_versions=commit_versions)


def change_start(store: ObjectStore, latest: Manifest, at: datetime, *, after: bool = False) -> int:
    """The first version committed at or after ``at`` (``after``: after it), where changes
    since ``at`` start; 0 if the table's first version is retained and came after ``at``."""
    at = at if at.tzinfo is not None else at.astimezone()
    try:
        current = manifest_as_of(store, latest, at)
    except VersionNotFoundError:
        if retention_floor(store) == 0:
            return 0
        raise
    return current.version + (current.created_at <= at if after else current.created_at < at)
