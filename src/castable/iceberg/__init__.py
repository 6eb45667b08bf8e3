"""Iceberg metadata for castable tables, so every Iceberg reader (Athena, Trino, Spark, DuckDB,
Snowflake, pyiceberg) reads them with no catalog: ``publish(table)`` writes the current
version's metadata under ``<table>/metadata/`` and returns its location (docs/iceberg.md).

Needs pyiceberg: ``pip install 'castable[iceberg]'``.
"""

from __future__ import annotations

from typing import Protocol

from castable.iceberg.publish import Published, publish_through
from castable.iceberg.schema import IcebergPublishError
from castable.snapshot import Snapshot
from castable.store import ObjectStore

__all__ = ["IcebergPublishError", "Published", "publish"]


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
