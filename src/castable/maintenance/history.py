"""Time travel and history: a table's retained versions by number or by time, and its commits
newest first (docs/format.md sections 2 and 3: versions are dense, each with its commit time)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from castable.commit.log import entry_as_of, read_manifest
from castable.commit.pointer import retention_floor
from castable.commit.written import WriteResult
from castable.errors import CorruptObjectError, InvalidInputError, VersionNotFoundError
from castable.format.entries import CommitInfo
from castable.format.manifest import Manifest
from castable.maintenance.gc import retained_versions
from castable.store import ObjectStore


@dataclass(frozen=True)
class HistoryEntry:
    """One commit in the table's history; an unreadable version has ``error`` and no details."""

    version: int
    timestamp: datetime | None
    operation: str
    commit_id: str
    summary: dict[str, Any]
    error: str | None = None

    @property
    def result(self) -> WriteResult:
        """What the commit did, as its write returned it."""
        return WriteResult.from_commit(self.version, CommitInfo(self.operation, self.commit_id, self.summary))

    def described(self) -> str:
        """What the commit did, in words (:meth:`WriteResult.described`), or its error."""
        return self.error if self.error is not None else self.result.described()


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
