"""Opening and creating tables: each :class:`~castable.table.Table` handle is given its committer
here, the table's own log, or for a table of a database the database (docs/format.md section 13)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from castable.commit.create import create, initial_manifest
from castable.commit.log import newest_manifest
from castable.database import Database
from castable.errors import CorruptObjectError, EmptyWriteError, TableDroppedError
from castable.format.layout import DROPPED_KEY
from castable.format.manifest import LATEST_FORMAT_VERSION
from castable.format.properties import DROPPED
from castable.inputs.batches import DataLike, schema_of
from castable.inputs.orders import SortBy
from castable.inputs.partitions import PartitionBy
from castable.maintenance.damage import assess
from castable.store import ObjectStore, store_from_uri
from castable.table import Table
from castable.table.iceberg import own_log


def create_table(
    uri: str,
    schema: pa.Schema | DataLike,
    *,
    primary_key: str | list[str] | None = None,
    partition_by: PartitionBy | None = None,
    sort_by: SortBy | None = None,
    properties: Mapping[str, object] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    format_version: int = LATEST_FORMAT_VERSION,
) -> Table:
    """Create a table at ``uri`` (``s3://bucket/prefix``, ``file:///path`` or a path): empty,
    of a ``schema``, or from data (Arrow, a reader, pandas, polars...), which is its first append
    (version 1) in the schema the data has, timestamps in microseconds
    (:func:`~castable.inputs.batches.schema_of`); the table's history says what it wrote.
    ``partition_by`` partitions it by Iceberg's transforms of its columns (``"day(ts)"``,
    ``"bucket(16, id)"``, ``"region"``...): rows are put in files by partition, and scans skip
    the partitions a filter rules out. ``sort_by`` sorts the rows of every file written
    (``"ts"``, ``"id DESC NULLS LAST"``, ``"day(ts)"``...), compaction included.
    ``format_version=1`` writes a table that castable releases before version 2 can read."""
    store = store_from_uri(uri, storage_options)
    data = None
    if not isinstance(schema, pa.Schema):
        schema, data = schema_of(schema)
    table = create_table_at(
        store,
        schema,
        primary_key=primary_key,
        partition_by=partition_by,
        sort_by=sort_by,
        properties=properties,
        format_version=format_version,
    )
    if data is not None:
        with contextlib.suppress(EmptyWriteError):  # a schema and no rows: the table stays empty, as asked
            table.append(data)
    return table


def open_table(uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Table:
    """Open the latest version of the table at ``uri``."""
    return load_table(store_from_uri(uri, storage_options))


def create_table_at(
    store: ObjectStore,
    schema: pa.Schema,
    *,
    primary_key: str | list[str] | None = None,
    partition_by: PartitionBy | None = None,
    sort_by: SortBy | None = None,
    properties: Mapping[str, object] | None = None,
    format_version: int = LATEST_FORMAT_VERSION,
    table_uuid: str | None = None,
    within: ObjectStore | None = None,
) -> Table:
    """:func:`create_table` on a store already made (``table_uuid``: the uuid a catalog
    announced; ``within``: the warehouse it is created in, above which nothing is checked)."""
    manifest = initial_manifest(
        schema,
        primary_key=primary_key,
        properties=properties,
        format_version=format_version,
        table_uuid=table_uuid,
        partition_by=partition_by,
        sort_by=sort_by,
    )
    create(store, manifest, within=within)
    return load_table(store)


def load_table(store: ObjectStore, *, dropped: bool = False) -> Table:
    """The newest version of the table at ``store``; if it (or the pointer) cannot be read, a
    handle on the newest readable version that reads older versions and refuses writes until
    ``repair()``. A table of a database is opened through its database, so its writes commit there.
    A table dropped with its files kept is refused (``TableDroppedError``), unless ``dropped``
    (a catalog that registers or purges it)."""
    table = _newest(store)
    if not dropped and DROPPED in table.manifest.properties:
        raise TableDroppedError(
            f"the table at {store.uri} was dropped at {table.manifest.properties[DROPPED]} (its files are kept): "
            "register it in its catalog to bring it back, or purge it"
        )
    return table


def mark_dropped(table: Table) -> None:
    """Drop ``table`` and keep its files: a version that records the drop (every later open is
    refused, and gc, which opens the table, deletes nothing of it), then the listing's marker."""
    table.set_properties({DROPPED: datetime.now(UTC).isoformat(timespec="seconds")})
    table.store.put(DROPPED_KEY, b"{}")


def unmark_dropped(store: ObjectStore) -> Table:
    """Bring back the table dropped at ``store``: its marker goes, then a version without the drop."""
    table = load_table(store, dropped=True)
    store.delete(DROPPED_KEY)
    if DROPPED in table.manifest.properties:
        table.set_properties({}, remove=[DROPPED])
    return load_table(store)


def is_dropped(store: ObjectStore) -> bool:
    """Whether the table at ``store`` is dropped, as a listing tells it: by its marker alone."""
    return store.exists(DROPPED_KEY)


def _newest(store: ObjectStore) -> Table:
    try:
        manifest, pointer = newest_manifest(store)
    except CorruptObjectError as e:
        damage = assess(store, e)
        if damage.readable.database is None:
            return Table(store, damage.readable, own_log(store, None), damage=damage)
        manifest = damage.readable  # a member's own copies are damaged: its database's log holds them
    if manifest.database is not None:
        return Database.of_member(store, manifest).member_table(store, manifest)
    return Table(store, manifest, own_log(store, pointer))
