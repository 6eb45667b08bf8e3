"""Reading a table's log of versions: a version's manifest by number, the newest version (the
pointer, then the versions after it that exist), and the version current at a time (the
time-travel search over commit times, docs/format.md sections 2 and 11)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Protocol, TypeVar

from castable.commit.pointer import ABSENT, Pointer, read_pointer
from castable.errors import (
    CorruptObjectError,
    TableNotFoundError,
    VersionNotFoundError,
)
from castable.format.layout import POINTER_KEY, manifest_key
from castable.format.manifest import Manifest
from castable.store import (
    ObjectNotFoundError,
    ObjectStore,
)
from castable.store.readahead import beside


def read_manifest(store: ObjectStore, version: int, table_uuid: str | None = None) -> Manifest:
    """The manifest of ``version``; ``VersionNotFoundError`` if it does not (or no longer) exist.

    With ``table_uuid`` the manifest must belong to that table: a store that let another
    table's writer overwrite this one's versions is reported, not read as if nothing happened.
    """
    key = manifest_key(version)
    try:
        blob = store.get(key)
    except ObjectNotFoundError:
        raise VersionNotFoundError(f"version {version} does not exist in {store.uri}") from None
    manifest = Manifest.from_json(blob.data, key=key, store=store)
    if manifest.version != version:
        raise CorruptObjectError(f"{key} claims to be version {manifest.version}")
    if table_uuid is not None and manifest.table_uuid != table_uuid:
        raise CorruptObjectError(
            f"{store.uri}/{key} belongs to table {manifest.table_uuid}, not {table_uuid}: the table was "
            "re-created or overwritten (a store that ignores conditional writes allows this)"
        )
    return manifest


class Versioned(Protocol):
    """A log entry that knows its version number: a table manifest or a database version."""

    @property
    def version(self) -> int: ...


V = TypeVar("V", bound=Versioned)


class Timed(Versioned, Protocol):
    @property
    def created_at(self) -> datetime: ...


T = TypeVar("T", bound=Timed)


def entry_as_of(read: Callable[[int], T], oldest: int, latest: T, as_of: datetime) -> T | None:
    """The newest entry of a log created at or before ``as_of`` (``created_at`` grows with the
    version, so a binary search between ``oldest`` and ``latest``); ``None`` if there is none.
    An entry ``read`` cannot find (expired) counts as older."""
    if latest.created_at <= as_of:
        return latest
    lo, hi = oldest, latest.version
    found: T | None = None
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            entry = read(mid)
        except VersionNotFoundError:
            lo = mid + 1
            continue
        if entry.created_at <= as_of:
            found, lo = entry, mid + 1
        else:
            hi = mid
    return found


def newest_log_entry(
    store: ObjectStore,
    read: Callable[[int], V],
    known: V | None = None,
    *,
    owner: Callable[[V], str],
    done: Callable[[V], bool] | None = None,
    newer_than: int | None = None,
) -> tuple[V, Pointer]:
    """The newest committed entry of the log in ``store``: from the pointer (or from ``known``,
    an entry already in hand, if that is newer), then forward while ``v<N+1>`` exists, each
    entry read with ``read`` (which may be called for two versions at once). Two round trips
    when the pointer is current, however far behind ``known`` is: the pointer, then its entry
    and the next one's (absent) together. Every entry must have the ``owner`` of the first (a
    log re-created or overwritten is reported, not read on). An entry for which ``done`` holds
    ends the search where it is, and so does the first entry above ``newer_than`` (a writer that
    lost a race needs a newer base, not proof that it is the newest: its next conditional PUT
    tells, and that saves a request)."""
    ahead: Callable[[], V | None] | None = None  # answers for the entry after ``entry``, once looked for
    for _ in range(3):
        try:
            pointer = read_pointer(store)
        except TableNotFoundError:
            if not store.exists(manifest_key(0)):
                raise
            pointer = ABSENT  # a create that crashed before its pointer: version 0 is there
        if known is not None and known.version >= pointer.version:
            entry = known
            break
        try:
            entry, ahead = beside(partial(read, pointer.version), partial(_ahead, read, pointer.version + 1))
            break
        except VersionNotFoundError:
            continue  # expired between the two reads: the pointer has moved on since
    else:
        raise CorruptObjectError(
            f"{store.uri}/{POINTER_KEY} names version {pointer.version}, whose manifest "
            f"{manifest_key(pointer.version)} does not exist"
        )
    first = owner(known if known is not None else entry)
    while (done is None or not done(entry)) and (newer_than is None or entry.version <= newer_than):
        following = ahead() if ahead is not None else _if_exists(read, entry.version + 1)
        if following is None:
            break
        if owner(following) != first:
            raise CorruptObjectError(
                f"version {following.version} of {store.uri} belongs to {owner(following)}, not {first}: the log "
                "was re-created or overwritten (a store that ignores conditional writes allows this)"
            )
        entry, ahead = following, None
    return entry, pointer


def _if_exists(read: Callable[[int], V], version: int) -> V | None:
    """``read(version)``, or ``None`` if that version does not exist."""
    try:
        return read(version)
    except VersionNotFoundError:
        return None


def _ahead(read: Callable[[int], V], version: int) -> Callable[[], V | None]:
    """:func:`_if_exists` now, its answer (or its error) given when asked: a version read ahead
    that the search turns out not to need must not fail it."""
    try:
        found = _if_exists(read, version)
    except Exception as e:  # any failure is the caller's only if it asks
        error = e

        def fail() -> V | None:
            raise error

        return fail
    return lambda: found


def newest_manifest(
    store: ObjectStore,
    *,
    known: Manifest | None = None,
    table_uuid: str | None = None,
    newer_than: int | None = None,
) -> tuple[Manifest, Pointer]:
    """The newest committed version of the table in ``store`` (see :func:`newest_log_entry`, also
    for ``newer_than``); for a table of a database, the first version found, which names the
    database to read it through (its own pointer is not moved by commits)."""
    owner = table_uuid or (known.table_uuid if known is not None else None)
    return newest_log_entry(
        store,
        partial(read_manifest, store, table_uuid=owner),
        known,
        owner=lambda m: m.table_uuid,
        done=lambda m: m.database is not None,
        newer_than=newer_than,
    )
