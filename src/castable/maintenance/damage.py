"""A table whose pointer or newest manifests cannot be read: what still reads, and the repair
that makes it writable again (docs/format.md section 12)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace

from castable.commit.log import read_manifest
from castable.commit.pointer import reset_pointer
from castable.errors import CorruptObjectError, VersionNotFoundError
from castable.format.entries import CommitInfo
from castable.format.layout import manifest_key
from castable.format.manifest import Manifest
from castable.format.times import now
from castable.maintenance.gc import retained_versions
from castable.store import ObjectStore, PreconditionFailedError


@dataclass(frozen=True)
class Damage:
    """A table whose pointer or newest manifest(s) cannot be read: what can still be read."""

    readable: Manifest
    """The newest manifest that reads."""
    newest: int
    """The newest version that exists, readable or not."""
    message: str

    @property
    def newest_readable(self) -> bool:
        return self.readable.version == self.newest


def assess(store: ObjectStore, cause: CorruptObjectError, table_uuid: str | None = None) -> Damage:
    """After the pointer or the newest version failed to load: the newest manifest that still
    reads (and, when known, belongs to ``table_uuid``), and what to tell whoever wants to write
    (or read the newest version)."""
    versions = retained_versions(store)
    for version in reversed(versions):
        try:
            manifest = read_manifest(store, version, table_uuid)
        except (CorruptObjectError, VersionNotFoundError):
            continue
        if manifest.version == versions[-1]:
            state = "every version can be read, but the table cannot be written"
            fix = f"rewrites the pointer to name version {manifest.version}"
        else:
            state = f"versions up to {manifest.version} can still be read (version=...)"
            fix = f"commits version {manifest.version}'s files as the newest version"
        message = f"{store.uri} is damaged: {cause}; {state}. `castable repair` (Table.repair()) {fix}"
        return Damage(manifest, versions[-1], message)
    raise cause


def repair(store: ObjectStore, damage: Damage, *, commit_id: str, commit_retention: int) -> None:
    """Make a damaged table writable: when the newest versions cannot be read, commit the newest
    readable version's files and tombstones as a version after them (no data is copied; the
    unreadable manifests stay); then point the pointer at the newest version."""
    newest = damage.newest
    versions = retained_versions(store)
    if not damage.newest_readable:
        base = damage.readable
        lost = [v for v in versions if v > base.version]
        summary = {"restored_from": base.version, "unreadable_versions": lost}
        repaired = (
            replace(base, version=newest)
            .next(
                commit=CommitInfo("repair", commit_id, summary),
                created_at=now(),
                data_files=base.data_files,
                tombstones=base.tombstones,
                commit_retention=commit_retention,
            )
            .written(store)
        )
        with contextlib.suppress(PreconditionFailedError):  # a concurrent repair (or write) took it
            store.put(manifest_key(repaired.version), repaired.to_json(), if_none_match=True)
        newest = repaired.version
    reset_pointer(store, newest, oldest=versions[0])
