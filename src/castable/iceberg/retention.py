"""Published Iceberg metadata follows castable's retention (docs/iceberg.md, "Retention").

``expire`` drops castable versions: the table is published again, so the metadata readers
open lists retained versions only, and the metadata files and manifest lists of the expired
versions are deleted. ``gc`` deletes files no retained version references: the Iceberg objects
derived from such files go with them (a segment's manifest, a tombstone's position deletes, an
inline entry's rows), once older than the same grace, so a publication still in flight keeps
what it just wrote. Every name castable writes under ``metadata/`` says what it derives from;
any other object there is an Iceberg engine's manifest or manifest list, written for a commit
through the catalog (``castable.catalog``), which castable translated and never references:
it goes after the same grace, which covers a commit still in flight.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import datetime

from castable.commit.pointer import retention_floor
from castable.format.layout import DATA_PREFIX, TOMBSTONE_PREFIX
from castable.format.segment import SEGMENT_PREFIX
from castable.iceberg.publication import HINT, INLINE, METADATA, publish_through, read_hint
from castable.iceberg.schema import IcebergPublishError
from castable.maintenance.gc import referenced_objects, retained_versions
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore

log = logging.getLogger(__name__)
_VERSIONED = re.compile(rf"^{METADATA}(?:v(\d+)\.metadata\.json|snap-(\d+)-castable\.avro)$")
_SEGMENT = re.compile(rf"^{METADATA}castable-(?:data|tombstone)-([0-9a-f-]+)\.avro$")
_DELETES = re.compile(rf"^{METADATA}castable-([0-9a-f-]+)-deletes\.parquet$")


def published(store: ObjectStore) -> bool:
    """Whether the table has Iceberg metadata to keep in step (one HEAD)."""
    return store.exists(HINT)


def after_expire(store: ObjectStore, newest: int, snapshot_of: Callable[[int], Snapshot]) -> list[str]:
    """Publish ``newest`` (its metadata then lists only retained versions), then delete the
    metadata files and manifest lists of versions below the retention floor; their keys."""
    floor = retention_floor(store)
    try:
        publish_through(store, newest, snapshot_of, again=True)
    except IcebergPublishError as e:  # the expiry stands; the newest publishable version is published again
        log.warning("version %d of %s is not published as Iceberg: %s", newest, store.uri, e)
        hint = read_hint(store)[0]
        if hint is not None and hint >= floor:
            publish_through(store, hint, snapshot_of, again=True)
    gone = []
    for info in store.list(METADATA):
        found = _VERSIONED.match(info.key)
        if found and int(found.group(1) or found.group(2)) < floor:
            gone.append(info.key)
    store.delete_many(gone)
    return gone


def sweep(store: ObjectStore, older_than: datetime, *, dry_run: bool) -> list[str]:
    """Delete the Iceberg objects derived from castable objects no retained version references,
    and those Iceberg engines wrote, last modified before ``older_than``; their keys."""
    referenced = referenced_objects(store, retained_versions(store))
    segments = {
        p.removeprefix(SEGMENT_PREFIX).removesuffix(".arrow") for p in referenced if p.startswith(SEGMENT_PREFIX)
    }
    tombstones = {p.rsplit("/", 1)[-1].removesuffix(".del") for p in referenced if p.startswith(TOMBSTONE_PREFIX)}
    inline = {p.rsplit("/", 1)[-1] for p in referenced if p.startswith(DATA_PREFIX)}
    gone = []
    for info in store.list(METADATA):
        if info.last_modified is not None and info.last_modified >= older_than:
            continue
        key = info.key
        if (
            ((found := _SEGMENT.match(key)) and found.group(1) not in segments)
            or ((found := _DELETES.match(key)) and found.group(1) not in tombstones)
            or (key.startswith(INLINE) and key.removeprefix(INLINE) not in inline)
            or not _castables(key)
        ):
            gone.append(key)
    if not dry_run:
        store.delete_many(gone)
    return gone


def _castables(key: str) -> bool:
    """Whether castable's publication wrote the object ``key`` of ``metadata/``."""
    return bool(
        key == HINT or key.startswith(INLINE) or _VERSIONED.match(key) or _SEGMENT.match(key) or _DELETES.match(key)
    )
