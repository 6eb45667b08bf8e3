"""Snapshot expiry and garbage collection (docs/format.md section 12).

- ``expire`` deletes the manifests of versions outside the retention window (by count and by
  age; the newest version is always kept). Only a prefix of the history is ever expired, so
  the retained versions stay contiguous; the pointer records the new floor first.
- ``gc`` marks every object a retained manifest references (reading each distinct segment
  once) and sweeps data, tombstone and segment files that nothing references and that are
  older than the grace period (orphans of failed commits, files of expired versions), and
  aborts multipart uploads older than it. Objects are listed *before* manifests are read, so a
  file committed during the sweep is always seen as referenced; the grace period protects
  files uploaded by writers that have not committed yet.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from castable.commit.log import read_manifest
from castable.commit.pointer import raise_floor, retention_floor
from castable.errors import CorruptObjectError, VersionNotFoundError
from castable.format.filelist import Part
from castable.format.layout import DATA_PREFIX, MANIFEST_PREFIX, TOMBSTONE_PREFIX, manifest_key, version_of_manifest_key
from castable.format.manifest import Manifest
from castable.format.segment import SEGMENT_PREFIX
from castable.format.workplans import PLAN_PREFIXES
from castable.store import ObjectInfo, ObjectStore
from castable.store.probe import PROBE_PREFIX

_THREADS = 16


@dataclass
class ExpireReport:
    """Versions whose manifests were deleted, and how many remain."""

    versions_expired: list[int]
    versions_retained: int


@dataclass
class GcReport:
    """What garbage collection removed (or, with ``dry_run``, would remove)."""

    dry_run: bool
    objects: list[str] = field(default_factory=list)
    bytes: int = 0
    uploads_aborted: list[str] = field(default_factory=list)
    temporaries: list[str] = field(default_factory=list)
    """Temporary files of writers that died mid-write (local store), removed like orphans."""
    objects_scanned: int = 0
    objects_referenced: int = 0
    versions_scanned: int = 0
    segments_scanned: int = 0
    """Distinct manifest segments read (format version 2): each once, however many versions list it."""
    orphan_grace_seconds: float = 0.0
    """How old an unreferenced object must be to go: a younger one may be a writer's, not yet committed."""
    orphans_in_grace: int = 0
    """Unreferenced objects kept because they are younger than the grace period."""

    def summary(self) -> dict[str, object]:
        """Counts, named for what was done, or for a dry run what would be done."""
        removed, aborted = ("to_remove", "to_abort") if self.dry_run else ("removed", "aborted")
        return {
            "dry_run": self.dry_run,
            f"objects_{removed}": len(self.objects),
            f"bytes_{removed}": self.bytes,
            f"uploads_{aborted}": len(self.uploads_aborted),
            f"temporaries_{removed}": len(self.temporaries),
            "objects_scanned": self.objects_scanned,
            "objects_referenced": self.objects_referenced,
            "versions_scanned": self.versions_scanned,
            "segments_scanned": self.segments_scanned,
            "orphan_grace_seconds": self.orphan_grace_seconds,
            "orphans_in_grace": self.orphans_in_grace,
        }


def retained_versions(store: ObjectStore) -> list[int]:
    """Versions whose manifest exists at or above the retention floor, oldest first."""
    floor = retention_floor(store)
    found = (version_of_manifest_key(info.key) for info in store.list(MANIFEST_PREFIX))
    return sorted(v for v in found if v is not None and v >= floor)


def expire(
    store: ObjectStore,
    latest: Manifest,
    *,
    retain_versions: int | None,
    retain_for: timedelta | None,
    now: datetime,
) -> ExpireReport:
    """Delete the manifests of versions neither among the newest ``retain_versions`` nor younger
    than ``retain_for``. The newest version is always kept."""
    versions = [v for v in retained_versions(store) if v <= latest.version]
    keep_from = latest.version
    if retain_versions is not None:
        keep_from = min(keep_from, versions[-retain_versions] if retain_versions <= len(versions) else versions[0])
    if retain_for is not None:
        keep_from = min(keep_from, _first_version_since(store, versions, now - retain_for, latest))
    expired = [v for v in versions if v < keep_from]
    if expired:
        # First the floor: the pointer moves to the newest version and records that slots below
        # keep_from are going, so a stale writer that re-creates one of them notices.
        raise_floor(store, keep_from, latest.version)
    store.delete_many([manifest_key(v) for v in expired])
    return ExpireReport(expired, len(versions) - len(expired))


def _first_version_since(store: ObjectStore, versions: list[int], cutoff: datetime, latest: Manifest) -> int:
    """The oldest retained version created at or after ``cutoff`` (binary search: times increase)."""
    lo, hi = 0, len(versions) - 1
    if latest.created_at < cutoff:
        return latest.version
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            created = read_manifest(store, versions[mid]).created_at
        except (VersionNotFoundError, CorruptObjectError):  # gone, or unreadable: no age to keep it for
            lo = mid + 1
            continue
        if created >= cutoff:
            hi = mid
        else:
            lo = mid + 1
    return versions[lo]


def gc(store: ObjectStore, *, orphan_grace: timedelta, dry_run: bool, now: datetime) -> GcReport:
    """Sweep unreferenced data and tombstone files, store-probe scratch keys, workflows' work
    plans, incomplete multipart uploads and temporary files of killed writers, once older than
    ``orphan_grace``."""
    cutoff = now - orphan_grace
    objects: list[ObjectInfo] = [
        *store.list(DATA_PREFIX),
        *store.list(TOMBSTONE_PREFIX),
        *store.list(SEGMENT_PREFIX),
        *store.list(PROBE_PREFIX),
        *(o for prefix in PLAN_PREFIXES for o in store.list(prefix)),
    ]
    versions = retained_versions(store)
    referenced, segments = _marked(store, versions)
    report = GcReport(
        dry_run=dry_run,
        objects_scanned=len(objects),
        versions_scanned=len(versions),
        segments_scanned=len(segments),
        orphan_grace_seconds=orphan_grace.total_seconds(),
    )
    report.objects_referenced = sum(o.key in referenced for o in objects)
    orphans = [o for o in objects if o.key not in referenced]
    doomed = [o for o in orphans if _older(o, cutoff)]
    report.orphans_in_grace = len(orphans) - len(doomed)
    report.objects = [o.key for o in doomed]
    report.bytes = sum(o.size for o in doomed)
    uploads = [u for u in store.list_multipart_uploads() if u.initiated is not None and u.initiated < cutoff]
    report.uploads_aborted = [u.key for u in uploads]
    report.temporaries = store.sweep_temporaries(cutoff, dry_run=dry_run)
    if not dry_run:
        store.delete_many(report.objects)
        for u in uploads:
            store.abort_multipart(u.key, u.upload_id)
    return report


def referenced_objects(store: ObjectStore, versions: list[int]) -> set[str]:
    """Every object the manifests of ``versions`` reference: data and tombstone files, and the
    segments that list them and their recent commits."""
    return _marked(store, versions)[0]


def _marked(store: ObjectStore, versions: list[int]) -> tuple[set[str], dict[str, tuple[Part[Any], pa.Schema]]]:
    """What ``versions`` reference, and the distinct segments read to find it (each once)."""
    with ThreadPoolExecutor(_THREADS) as pool:
        roots = list(pool.map(lambda v: _references(store, v), versions))
        referenced = set().union(*(direct for direct, _ in roots))
        segments = {part.ref.path: (part, schema) for _, parts in roots for part, schema in parts if part.ref}
        for paths in pool.map(lambda item: item[0].paths(item[1]), segments.values()):
            referenced.update(paths)
    return referenced, segments


def _references(store: ObjectStore, version: int) -> tuple[set[str], list[tuple[Part[Any], pa.Schema]]]:
    """What a retained version references directly (its segments, or a version-1 manifest's
    entries) and the segments whose entries it references. Segments are shared across versions,
    so the caller reads each distinct one once: the cost grows with the segments written in
    the retained window, not with versions x table size."""
    try:
        m = read_manifest(store, version)
    except VersionNotFoundError:  # expired meanwhile: its files are no longer protected by it
        return set(), []
    except CorruptObjectError as e:
        raise CorruptObjectError(
            f"gc cannot tell which files version {version} references, so it removed nothing: {e}. "
            f"Restore that manifest, or let expire remove version {version} first"
        ) from None
    direct = {m.recent_commits.ref.path} if m.recent_commits.ref else set()
    parts: list[tuple[Part[Any], pa.Schema]] = []
    for files in (m.data_files, m.tombstones):
        for part in files.parts:
            if part.ref is None:
                direct.update(part.paths(m.schema))
            else:
                direct.add(part.ref.path)
                parts.append((part, m.schema))
    return direct, parts


def _older(info: ObjectInfo, cutoff: datetime) -> bool:
    return info.last_modified is not None and info.last_modified < cutoff
