"""Iceberg metadata for castable tables, so every Iceberg reader (Athena, Trino, Spark, DuckDB,
Snowflake, pyiceberg) reads them with no catalog: ``publish(table)`` writes the current
version's metadata under ``<table>/metadata/`` and returns its location (docs/iceberg.md).

Needs pyiceberg: ``pip install 'castable[iceberg]'``.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from castable.iceberg.glue import GlueRegistration, register
from castable.iceberg.publication import Published, publish_through
from castable.iceberg.schema import IcebergPublishError
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore

__all__ = ["GlueRegistration", "IcebergPublishError", "Published", "publish", "publish_after_purge", "register_glue"]

log = logging.getLogger(__name__)


class _Table(Protocol):
    @property
    def store(self) -> ObjectStore: ...

    @property
    def version(self) -> int: ...

    def snapshot(self, version: int | None = None) -> Snapshot: ...


def publish(table: _Table, version: int | None = None) -> str:
    """Publish ``version`` of ``table`` (the newest it knows, by default) as Iceberg metadata,
    with every retained version the last publication did not reach; the location of its
    ``v<version>.metadata.json``, which ``StaticTable.from_metadata`` opens (``iceberg_scan``
    finds it from the table's location, through ``version-hint.text``). Idempotent; a
    publication that crashed half way is repaired by the next."""
    target = table.version if version is None else version
    return publish_through(table.store, target, table.snapshot).location


def publish_after_purge(table: _Table) -> str | None:
    """Publish the newest version again after a purge deleted every published object (they may
    hold erased values), so Iceberg readers and the Glue table, which names that version's
    metadata, read on at once: no commit need follow a purge. The purge stands whatever
    happens here: a failure is logged, ``None`` returned, and the next publication repairs it."""
    try:
        return publish(table)
    except Exception as e:
        log.warning("could not publish %s as Iceberg again after its purge: %s", table.store.uri, e)
        return None


def register_glue(
    table: _Table, database: str, name: str, *, location: str | None = None, glue: Any = None
) -> GlueRegistration:
    """Make Glue table ``database.name`` the Iceberg table of ``table`` (for Athena and every
    engine that finds tables in the Glue Data Catalog), naming its metadata at ``location``,
    by default a publication of the newest version. Created the first time; moved only forward
    after, so racing registrations leave the newest. ``glue`` is a boto3 Glue client (by
    default one from the environment)."""
    if glue is None:
        import boto3

        glue = boto3.client("glue")
    return register(table.store, location or publish(table), database=database, name=name, glue=glue)
