"""Creating a table: version 0 checked and written, once, at a location that nests in no other
table or database (docs/format.md sections 1 to 3)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping

import pyarrow as pa

from castable.commit.dblog import LOG_PREFIX
from castable.commit.log import read_manifest
from castable.commit.pointer import encode_pointer
from castable.errors import InvalidInputError, TableAlreadyExistsError
from castable.format.entries import CommitInfo
from castable.format.evolution import check_key_columns, check_names, with_all_ids
from castable.format.filelist import DATA, TOMBSTONES, FileList
from castable.format.layout import POINTER_KEY, manifest_key
from castable.format.manifest import FORMAT_VERSIONS, Manifest, Membership
from castable.format.partitioning import Partitioning
from castable.format.properties import checked
from castable.format.sorting import Sorting
from castable.format.times import now
from castable.inputs.orders import SortBy, parse_sort_by
from castable.inputs.partitions import PartitionBy, parse_partition_by
from castable.store import ObjectStore, PreconditionFailedError


def initial_manifest(
    schema: pa.Schema,
    *,
    primary_key: str | list[str] | None,
    properties: Mapping[str, object] | None,
    format_version: int,
    database: Membership | None = None,
    table_uuid: str | None = None,
    partition_by: PartitionBy | None = None,
    sort_by: SortBy | None = None,
) -> Manifest:
    """Version 0 of a new table, its definition checked (every create starts here); its uuid
    is new unless a catalog announced one (``table_uuid``)."""
    if format_version not in FORMAT_VERSIONS:
        raise InvalidInputError(f"format_version must be one of {FORMAT_VERSIONS}, not {format_version!r}")
    if not isinstance(schema, pa.Schema) or len(schema) == 0:
        raise InvalidInputError("schema must be a non-empty pyarrow.Schema")
    check_names(list(schema))
    repeated = sorted({name for name in schema.names if schema.names.count(name) > 1})
    if repeated:
        raise InvalidInputError(f"column names must be unique; repeated: {repeated}")
    keys = [primary_key] if isinstance(primary_key, str) else list(primary_key or [])
    check_key_columns(schema, keys)
    props = checked(properties, schema, keys)
    schema = schema.remove_metadata()
    if format_version >= 2:
        schema = with_all_ids(schema)
    partitioning = Partitioning()
    if partition_by:
        if format_version < 2:
            raise InvalidInputError("a partitioned table needs format version 2")
        partitioning = partitioning.evolved(parse_partition_by(partition_by, schema), schema)
    sorting = Sorting()
    if sort_by:
        if format_version < 2:
            raise InvalidInputError("a sort order needs format version 2")
        sorting = sorting.evolved(parse_sort_by(sort_by, schema), schema)
    return Manifest(
        table_uuid=str(uuid.uuid4() if table_uuid is None else uuid.UUID(table_uuid)),
        version=0,
        previous=None,
        created_at=now(),
        schema=schema,
        primary_key=tuple(keys),
        properties=props,
        commit=CommitInfo("create", str(uuid.uuid4()), {}),
        data_files=FileList(DATA, schema),
        tombstones=FileList(TOMBSTONES, schema),
        format_version=format_version,
        database=database,
        partitioning=partitioning,
        sorting=sorting,
    )


def create(store: ObjectStore, manifest: Manifest, *, within: ObjectStore | None = None) -> None:
    """Write version 0 (``manifest``) and the pointer of a standalone table at ``store``
    (nested in no table or database below ``within``, if given).

    A create that crashed between the two is completed by one asking for the same definition;
    ``TableAlreadyExistsError`` if a table (or a half-created one of another definition) is there."""
    if store.exists(POINTER_KEY):
        raise TableAlreadyExistsError(f"a table already exists at {store.uri}")
    check_not_nested(store, within)
    store.check_conditional_writes()
    try:
        store.put(manifest_key(0), manifest.to_json(), if_none_match=True)
    except PreconditionFailedError:
        _check_half_created(store, manifest)
    with contextlib.suppress(PreconditionFailedError):  # a concurrent create of the same table wrote it
        store.put(POINTER_KEY, encode_pointer(0), if_none_match=True)


def _check_half_created(store: ObjectStore, wanted: Manifest) -> None:
    """Version 0 exists: a table, or a create that crashed before its pointer, which this
    create completes when it asks for the same definition; anything else is refused."""
    found = read_manifest(store, 0)
    definition = (found.schema, found.primary_key, found.properties, found.partitioning, found.sorting)
    if store.exists(POINTER_KEY):
        raise TableAlreadyExistsError(f"a table already exists at {store.uri}")
    if definition != (wanted.schema, wanted.primary_key, wanted.properties, wanted.partitioning, wanted.sorting):
        raise TableAlreadyExistsError(
            f"a half-created table (version 0, no pointer: its create crashed) with another schema or "
            f"properties is at {store.uri}; open it, or create it again with the same definition"
        )


def holds_table(store: ObjectStore) -> bool:
    """Whether a table (or a create of one that crashed before its pointer) is at ``store``."""
    return store.exists(POINTER_KEY) or store.exists(manifest_key(0))


def holds_database(store: ObjectStore) -> bool:
    """Whether a database (or a create of one that crashed before its pointer) is at ``store``."""
    return holds_table(store.child(LOG_PREFIX))


def check_not_nested(store: ObjectStore, within: ObjectStore | None = None) -> None:
    """Refuse a table inside another table's prefix or above one: maintenance of the outer
    table (gc of its ``data/``) would delete the inner table's files. ``within``: only the
    prefixes strictly inside it are checked (a catalog's warehouse, whose callers may read
    nothing above their namespaces)."""
    inside = None if within is None else within.uri.rstrip("/") + "/"
    for parent in store.parents():
        if inside is not None and not parent.uri.rstrip("/").startswith(inside):
            break
        if holds_table(parent):
            raise InvalidInputError(
                f"cannot create a table at {store.uri}: it lies inside the table at {parent.uri}, whose "
                "maintenance would delete its files; choose a location outside that prefix"
            )
        if holds_database(parent):
            raise InvalidInputError(
                f"cannot create a table at {store.uri}: it lies inside the database at {parent.uri}; create "
                "it with open_database(...).create_table(name, ...), or choose a location outside that prefix"
            )
    markers = ["/" + POINTER_KEY, "/" + manifest_key(0)]
    for info in store.list():
        inner = next((info.key.removesuffix(m) for m in markers if info.key.endswith(m)), None)
        if inner is not None:
            raise InvalidInputError(
                f"cannot create a table at {store.uri}: a table exists inside it, at {store.uri}/{inner}; "
                "choose a location that holds no table"
            )
