"""A client's commit (its requirements and updates, as the Iceberg REST spec has them) made as
castable commits.

Requirements are checked against the table's newest version as published; a snapshot becomes
one castable commit made on exactly that version (the files its manifests added and removed),
so a concurrent castable commit makes it fail with 409 and the client plans again. castable
numbers the snapshots it publishes by version: a client's snapshot id is kept as the commit's
id (``iceberg-snapshot-<id>``), so a commit repeated after its answer was lost lands once.
Everything a request asks is checked before anything is committed."""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.manifest import DataFileContent, FileFormat, ManifestEntryStatus, read_manifest_list
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.sorting import SortOrder
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSnapshotUpdate,
    AddSortOrderUpdate,
    AssignUUIDUpdate,
    RemovePropertiesUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSortOrderUpdate,
    SetDefaultSpecUpdate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
    UpgradeFormatVersionUpdate,
)

from castable.catalog.errors import BadRequestError, CatalogError, UnsupportedError
from castable.catalog.metadata import current_metadata, stored_names, stored_properties
from castable.catalog.schemas import arrow_schema, partition_fields, schema_update, sort_fields
from castable.catalog.warehouse import Namespace, Warehouse
from castable.format.entries import DataFile
from castable.format.partitioning import misplaced
from castable.format.sorting import SortField
from castable.iceberg.files import StoredFileIO
from castable.iceberg.partitions import castable_values
from castable.iceberg.publication import INLINE, METADATA
from castable.inputs.partitions import FieldSpec
from castable.ops import writes
from castable.ops.register import check_files, table_key
from castable.read.predicate import InList, Predicate
from castable.store import ObjectNotFoundError, canonical_location
from castable.store.threads import shared_pool
from castable.table import Table, handle_of

SNAPSHOT_COMMIT = "iceberg-snapshot-{}"
"""The castable commit id of a client's snapshot."""
OPERATIONS = {"append": "append", "overwrite": "overwrite", "delete": "delete", "replace": "compact"}
"""castable's operation for each of Iceberg's: a ``replace`` moves rows between files, as compaction does."""
MAIN = "main"
PUBLISHED = f"{METADATA}castable-"
"""Where castable's publication writes its manifests (clients carry them on in their lists)."""


T = TypeVar("T")


@dataclass
class Plan:
    """What one request asks of the table (its metadata ``base`` as published), checked."""

    base: TableMetadata
    properties: dict[str, str] = field(default_factory=dict)
    removals: list[str] = field(default_factory=list)
    schema: Schema | None = None
    snapshots: list[Snapshot] = field(default_factory=list)
    restore: int | None = None
    """The older version ``main`` is rolled back to (set-snapshot-ref to an earlier snapshot)."""
    spec: list[FieldSpec] | None = None
    """The fields of the partition spec made the default (add-spec and set-default-spec)."""
    order: list[SortField] | None = None
    """The fields of the sort order made the default (add-sort-order and set-default-sort-order)."""


class Committed(NamedTuple):
    """A request applied: the table at its new newest version, and the metadata the request's
    requirements were checked against (``None`` for a repeat of a commit that landed)."""

    table: Table
    base: TableMetadata | None


def commit(table: Table, request: CommitTableRequest, idempotency_key: str | None = None) -> Committed:
    """Apply ``request`` to ``table`` (as just loaded) in castable commits. ``CommitFailedException``
    (409) when a requirement fails or the table moved meanwhile."""
    snapshots = [u.snapshot for u in request.updates if isinstance(u, AddSnapshotUpdate)]
    commit_id = _commit_id([s.snapshot_id for s in snapshots[-1:]], idempotency_key)
    if commit_id is not None and table.committed_version(commit_id) is not None:
        return Committed(table, None)  # a repeat of a commit that landed (its answer was lost)
    # the client's manifests are read while its requirements are checked (the task only reads files)
    reading = shared_pool("catalog-reads", 16).submit(_written, StoredFileIO(table.store), snapshots)
    plan = _checked_plan(table, request)
    written = reading.result()
    parts = [p for p in ("properties", "schema", "partitioning", "sorting", "restore", "data") if _asks(plan, p)]

    def part_id(name: str) -> str | None:
        if commit_id is None:
            return None
        return commit_id if name == parts[-1] else f"{commit_id}:{name}"

    schema = None if plan.schema is None else schema_update(table.schema, table.manifest.primary_key, plan.schema)
    data = None if not plan.snapshots or schema is not None else _translate(table, written, plan.base)
    if plan.properties or plan.removals:
        table.set_properties(plan.properties, remove=plan.removals, commit_id=part_id("properties"))
    if schema is not None:
        update = table.alter(commit_id=part_id("schema"))
        update.changes.extend(schema.changes)
        update.commit()
    if plan.spec is not None:
        table.partition_by(plan.spec, commit_id=part_id("partitioning"))
    if plan.order is not None:
        table.sort_by(plan.order, commit_id=part_id("sorting"))
    if plan.restore is not None:
        table.restore(plan.restore, commit_id=part_id("restore"))
    if plan.snapshots:
        change = data or _translate(table, written, plan.base)  # files of a new schema are checked now
        writes.replace_files(
            handle_of(table),
            part_id("data"),
            change.removed,
            change.added,
            operation=change.operation,
            on_version=table.version,
            positions=change.positions,
            keys=change.keys,
            verify="checked",
        )
    return Committed(table, plan.base)


def commit_transaction(
    warehouse: Warehouse, requests: Sequence[CommitTableRequest], idempotency_key: str | None = None
) -> None:
    """The changes of several tables as one version of the castable database that holds them:
    all or nothing. Every table's requirements are checked and its snapshots translated before
    anything is committed; a table another commit moved meanwhile fails the whole transaction
    with 409. Schema and property changes are made by a table's own commit, not in one of
    these. A transaction of one table is that table's commit, in any namespace."""
    if not requests:
        raise BadRequestError("a transaction commits the changes of at least one table")
    names = [(tuple(r.identifier.namespace.root), r.identifier.name) for r in requests]
    if len(set(names)) != len(names):
        raise BadRequestError("a transaction names each table once")
    if len(requests) == 1:
        commit(warehouse.table(*names[0]), requests[0], idempotency_key)
        return
    namespaces = {namespace for namespace, _ in names}
    database = warehouse.database(namespaces.pop()) if len(namespaces) == 1 else None
    if database is None:
        raise UnsupportedError(
            "a transaction over several tables commits tables of one namespace that is a castable database "
            "(created with castable.database=true), as one database version"
        )
    snapshots = [u.snapshot.snapshot_id for r in requests for u in r.updates if isinstance(u, AddSnapshotUpdate)]
    commit_id = _commit_id(snapshots, idempotency_key)
    if commit_id is not None and database.refresh().committed_version(commit_id) is not None:
        return  # a repeat of a transaction that landed (its answer was lost)
    planned: list[tuple[str, int, Translated]] = []
    for (_, name), request in zip(names, requests, strict=True):
        table = database.table(name)
        plan = _checked_plan(table, request)
        if plan.schema is not None or plan.properties or plan.removals:
            raise UnsupportedError(
                f"{name}: a transaction over several tables commits their data; change a table's schema "
                "or properties with a commit of that table"
            )
        if plan.snapshots:
            written = _written(StoredFileIO(table.store), plan.snapshots)
            planned.append((name, table.version, _translate(table, written, plan.base)))
    with database.transaction(commit_id) as tx:
        for name, version, change in planned:
            writes.replace_files(
                handle_of(tx.table(name)),
                None,
                change.removed,
                change.added,
                operation=change.operation,
                on_version=version,
                positions=change.positions,
                keys=change.keys,
                verify="checked",
            )


def _commit_id(snapshot_ids: Sequence[int], idempotency_key: str | None) -> str | None:
    """The castable commit id that recognises a request sent again: its snapshots' ids, else
    the client's idempotency key; ``None`` (a new id) for a request with neither."""
    if len(snapshot_ids) == 1:
        return SNAPSHOT_COMMIT.format(snapshot_ids[0])
    if snapshot_ids:
        digest = hashlib.sha256(",".join(map(str, sorted(snapshot_ids))).encode()).hexdigest()
        return f"iceberg-snapshots-{digest}"
    return None if idempotency_key is None else f"iceberg-request-{idempotency_key}"


def _checked_plan(table: Table, request: CommitTableRequest) -> Plan:
    """What ``request`` asks of ``table``, its requirements checked against the newest version
    as published (409 when one fails)."""
    _, base = current_metadata(table)
    for requirement in request.requirements:
        requirement.validate(base)
    return _plan(base, request)


CREATING = (AssignUUIDUpdate, AddSchemaUpdate, SetCurrentSchemaUpdate, SetPropertiesUpdate, SetLocationUpdate)
"""The updates of a staged create's commit that the creation itself takes."""


def create(
    warehouse: Warehouse, namespace: Namespace, name: str, request: CommitTableRequest, idempotency_key: str | None
) -> Committed:
    """The table a staged create's commit (requirement ``assert-create``) makes: created with
    the uuid, schema and properties its updates give, then its
    snapshots committed on version 0. If they are refused, the new table is dropped again, so
    the request lands whole or not at all (bar a crash between the two)."""
    schemas: list[Schema] = []
    schema: Schema | None = None
    properties: dict[str, str] = {}
    table_uuid: str | None = None
    for update in request.updates:
        if isinstance(update, AssignUUIDUpdate):
            table_uuid = str(update.uuid)
        elif isinstance(update, AddSchemaUpdate):
            schemas.append(update.schema_)
        elif isinstance(update, SetCurrentSchemaUpdate):
            found = [s for s in schemas if update.schema_id in (-1, s.schema_id)]
            if not found:
                raise BadRequestError(
                    f"set-current-schema names schema {update.schema_id}, which the request does not add"
                )
            schema = found[-1]
        elif isinstance(update, SetPropertiesUpdate):
            properties |= update.updates
        elif isinstance(update, SetLocationUpdate) and canonical_location(update.location).rstrip("/") != (
            warehouse.location((*namespace, name))
        ):
            raise BadRequestError(f"a table of this catalog is at {warehouse.location((*namespace, name))}")
    if schema is None:
        raise BadRequestError("a create's commit adds the table's schema and makes it current")
    arrow, key = arrow_schema(schema)
    if properties.pop("format-version", "2") != "2":
        raise BadRequestError("castable publishes Iceberg format version 2: create the table without format-version")
    table = warehouse.create_table(
        namespace, name, arrow, primary_key=key, properties=stored_properties(properties), table_uuid=table_uuid
    )
    rest = [u for u in request.updates if not isinstance(u, CREATING)]
    if not rest:
        return Committed(table, None)
    try:
        return commit(table, CommitTableRequest(identifier=request.identifier, updates=tuple(rest)), idempotency_key)
    except Exception:
        with contextlib.suppress(CatalogError):
            warehouse.drop_table(namespace, name, purge=True)
        raise


def _asks(plan: Plan, part: str) -> bool:
    if part == "properties":
        return bool(plan.properties or plan.removals)
    if part == "restore":
        return plan.restore is not None
    if part == "partitioning":
        return plan.spec is not None
    if part == "sorting":
        return plan.order is not None
    return plan.schema is not None if part == "schema" else bool(plan.snapshots)


def _plan(base: TableMetadata, request: CommitTableRequest) -> Plan:
    """The request's updates, each checked; ``BadRequestError`` or ``UnsupportedError`` for one
    castable does not do, before anything is committed."""
    plan = Plan(base)
    added_schemas: list[Schema] = []
    added_specs: list[PartitionSpec] = []
    added_orders: list[SortOrder] = []
    for update in request.updates:
        if isinstance(update, SetPropertiesUpdate):
            plan.properties |= stored_properties(update.updates)
            plan.removals = [k for k in plan.removals if k not in plan.properties]
        elif isinstance(update, RemovePropertiesUpdate):
            plan.removals += stored_names(update.removals)
            plan.properties = {k: v for k, v in plan.properties.items() if k not in plan.removals}
        elif isinstance(update, AddSchemaUpdate):
            added_schemas.append(update.schema_)
        elif isinstance(update, SetCurrentSchemaUpdate):
            plan.schema = _named(
                "set-current-schema", "schema", added_schemas, base.schemas, update.schema_id, attrgetter("schema_id")
            )
        elif isinstance(update, AddSnapshotUpdate):
            plan.snapshots.append(update.snapshot)
        elif isinstance(update, SetSnapshotRefUpdate):
            _check_ref(base, plan, update)
        elif isinstance(update, AddPartitionSpecUpdate):
            added_specs.append(update.spec)
        elif isinstance(update, SetDefaultSpecUpdate):
            plan.spec = partition_fields(
                _named(
                    "set-default-spec",
                    "spec",
                    added_specs,
                    list(base.specs().values()),
                    update.spec_id,
                    attrgetter("spec_id"),
                )
            )
        elif isinstance(update, AddSortOrderUpdate):
            added_orders.append(update.sort_order)
        elif isinstance(update, SetDefaultSortOrderUpdate):
            plan.order = sort_fields(
                _named(
                    "set-default-sort-order",
                    "sort order",
                    added_orders,
                    base.sort_orders,
                    update.sort_order_id,
                    attrgetter("order_id"),
                )
            )
        else:
            _check_other(base, update)
    if plan.spec is not None and partition_fields(base.spec()) == plan.spec:
        plan.spec = None
    if plan.order is not None and sort_fields(base.sort_order()) == plan.order:
        plan.order = None
    if (
        plan.schema is not None
        and plan.schema.fields == base.schema().fields
        and sorted(plan.schema.identifier_field_ids) == sorted(base.schema().identifier_field_ids)
    ):
        plan.schema = None
    if plan.restore is not None and (plan.snapshots or plan.schema is not None):
        raise BadRequestError("a rollback of main is a commit of its own: it adds no snapshot and no schema")
    return plan


def _named(action: str, what: str, added: Sequence[T], held: Sequence[T], wanted: int, id_of: Callable[[T], int]) -> T:
    """The schema, spec or sort order an update names by id (``action``): the last one the
    request added (-1), or one it added or the table holds."""
    if wanted == -1:
        if not added:
            raise BadRequestError(f"{action} -1 names the last {what} added, and none was")
        return added[-1]
    found = [x for x in [*added, *held] if id_of(x) == wanted]
    if not found:
        raise BadRequestError(f"{action} names {what} {wanted}, which the table does not have")
    return found[0]


def _check_ref(base: TableMetadata, plan: Plan, update: SetSnapshotRefUpdate) -> None:
    if update.ref_name != MAIN or update.type != "branch":
        raise UnsupportedError(f"castable tables have one branch, main: {update.type} {update.ref_name!r} is refused")
    ids = [s.snapshot_id for s in plan.snapshots]
    if update.snapshot_id in ids[-1:] or update.snapshot_id == base.current_snapshot_id:
        return
    if not ids and any(s.snapshot_id == update.snapshot_id for s in base.snapshots):
        plan.restore = update.snapshot_id  # a rollback: castable restores that version as a new one
        return
    raise UnsupportedError(
        f"main moves to the snapshot a commit adds, to an older snapshot of the table (a rollback), or stays: "
        f"snapshot {update.snapshot_id} is refused"
    )


def _check_other(base: TableMetadata, update: Any) -> None:
    """The updates a table creation sends, accepted where they leave castable's table as it is."""
    if isinstance(update, AssignUUIDUpdate) and str(update.uuid) == str(base.table_uuid):
        return
    if isinstance(update, UpgradeFormatVersionUpdate) and update.format_version <= base.format_version:
        return
    if isinstance(update, SetLocationUpdate) and canonical_location(update.location).rstrip(
        "/"
    ) == base.location.rstrip("/"):
        return
    reasons = {
        "set-location": "a castable table stays where it is",
        "upgrade-format-version": "castable publishes Iceberg format version 2",
        "remove-snapshots": "castable expires versions by its retention (castable expire)",
        "remove-snapshot-ref": "castable tables have one branch, main",
    }
    action = getattr(update, "action", type(update).__name__)
    raise UnsupportedError(f"{action} is refused: {reasons.get(action, 'castable does not support it')}")


@dataclass
class Translated:
    """A chain of snapshots as one castable commit: its operation, the paths it removes, the
    files it adds (checked), the rows it deletes by position and by primary key."""

    operation: str
    removed: list[str]
    added: list[DataFile]
    positions: dict[str, list[int]]
    keys: Predicate | None = None


class Written(NamedTuple):
    """A client's snapshot and the files its own manifests add and remove."""

    snapshot: Snapshot
    entries: list[tuple[ManifestEntryStatus, IcebergDataFile]]


def _written(stored: StoredFileIO, snapshots: Sequence[Snapshot]) -> list[Written]:
    return [Written(s, _entries(stored, s)) for s in snapshots]


def _translate(table: Table, written: Sequence[Written], base: TableMetadata) -> Translated:
    """The castable commit of the ``written`` snapshots, made on the table's version (``base``
    as published)."""
    snapshots = [w.snapshot for w in written]
    removed: dict[str, None] = {}
    added: dict[str, IcebergDataFile] = {}
    deletes_added: list[IcebergDataFile] = []
    deletes_removed: list[IcebergDataFile] = []
    equality: list[IcebergDataFile] = []
    for w in written:
        for entry_status, data_file in w.entries:
            if data_file.content == DataFileContent.EQUALITY_DELETES:
                if entry_status != ManifestEntryStatus.ADDED or len(snapshots) > 1:
                    raise BadRequestError(
                        f"{data_file.file_path}: castable takes an equality delete file added by a commit of "
                        "one snapshot"
                    )
                equality.append(data_file)
            elif data_file.content == DataFileContent.POSITION_DELETES:
                (deletes_added if entry_status == ManifestEntryStatus.ADDED else deletes_removed).append(data_file)
            elif entry_status == ManifestEntryStatus.ADDED:
                added[data_file.file_path] = data_file
            elif data_file.file_path in added:
                del added[data_file.file_path]
            else:
                removed[_data_key(table, data_file.file_path)] = None
    positions: dict[str, list[int]] = {}
    for delete_file in deletes_added:
        for path, rows in _positions(table, delete_file).items():
            positions.setdefault(path, []).extend(rows)
    for delete_file in deletes_removed:
        kept = sorted(set(_positions(table, delete_file)) - set(removed))
        if kept:
            raise BadRequestError(
                f"{delete_file.file_path}: removing this delete file while its data files {kept} stay "
                "would bring their rows back"
            )
    kinds = {OPERATIONS.get(s.summary.operation.value if s.summary else "", "overwrite") for s in snapshots}
    operation = kinds.pop() if len(kinds) == 1 else "overwrite"
    keys = _deleted_keys(table, base, equality) if equality else None
    return Translated(operation, list(removed), _checked(table, list(added.values())), positions, keys)


def _deleted_keys(table: Table, base: TableMetadata, files: list[IcebergDataFile]) -> Predicate:
    """The rows equality delete ``files`` delete, as a predicate on the primary key: castable
    takes equality deletes on a one-column primary key only (its key-list tombstones); any
    other is refused. Each file applies to the rows committed before it, which is what a
    tombstone planned on the version the engine read deletes."""
    key = list(table.manifest.primary_key or [])
    if len(key) != 1:
        raise BadRequestError(
            "castable takes equality deletes on a table's one-column primary key only, and this table has "
            f"{'none' if not key else 'a key of ' + str(len(key)) + ' columns'}: write position deletes instead"
        )
    field_id = base.schema().find_field(key[0]).field_id
    values: list[pa.Array] = []
    for f in files:
        if list(f.equality_ids or []) != [field_id]:
            raise BadRequestError(
                f"{f.file_path}: an equality delete on fields {list(f.equality_ids or [])}; castable takes them on "
                f"the primary key {key[0]!r} (field {field_id}) only"
            )
        if f.file_format != FileFormat.PARQUET:
            raise BadRequestError(f"{f.file_path}: castable takes equality deletes in Parquet files only")
        location = canonical_location(f.file_path).removeprefix(f"{table.store.uri.rstrip('/')}/")
        rows = pq.read_table(io.BytesIO(table.store.get(location).data))
        column = next(
            (
                i
                for i, c in enumerate(rows.schema)
                if (c.metadata or {}).get(b"PARQUET:field_id") == str(field_id).encode()
            ),
            rows.schema.get_field_index(key[0]),
        )
        if column < 0 or rows.num_rows != f.record_count:
            raise BadRequestError(
                f"{f.file_path}: the manifest says {f.record_count} deletes of {key[0]!r}, and the file holds "
                f"{rows.num_rows} rows {'with' if column >= 0 else 'without'} that column"
            )
        values.append(rows.column(column).combine_chunks().cast(table.schema.field(key[0]).type))
    return InList(key[0], pc.unique(pa.concat_arrays(values)))


def _positions(table: Table, delete_file: IcebergDataFile) -> dict[str, list[int]]:
    """The rows a position delete file deletes: 0-based positions by castable path."""
    if delete_file.file_format != FileFormat.PARQUET:
        raise BadRequestError(f"{delete_file.file_path}: castable takes position deletes in Parquet files only")
    key = canonical_location(delete_file.file_path).removeprefix(f"{table.store.uri.rstrip('/')}/")
    rows = pq.read_table(io.BytesIO(table.store.get(key).data), columns=["file_path", "pos"])
    if rows.num_rows != delete_file.record_count:
        raise BadRequestError(
            f"{delete_file.file_path}: the manifest says {delete_file.record_count} deletes, "
            f"and the file holds {rows.num_rows}"
        )
    found: dict[str, list[int]] = {}
    for path, pos in zip(rows.column("file_path").to_pylist(), rows.column("pos").to_pylist(), strict=True):
        found.setdefault(path, []).append(pos)
    return {_data_key(table, path): positions for path, positions in found.items()}


def _entries(stored: StoredFileIO, snapshot: Snapshot) -> list[tuple[ManifestEntryStatus, IcebergDataFile]]:
    """The data files ``snapshot`` added or removed, from the manifests it wrote. A manifest
    list or manifest outside the table, or missing, refuses the commit (400): the client named
    it, and nothing was committed."""
    found: list[tuple[ManifestEntryStatus, IcebergDataFile]] = []
    try:
        for manifest in read_manifest_list(stored.new_input(_own(stored, snapshot.manifest_list))):
            own = canonical_location(manifest.manifest_path).removeprefix(f"{stored.root}/").startswith(PUBLISHED)
            if manifest.added_snapshot_id != snapshot.snapshot_id or own:
                continue  # a manifest of an earlier snapshot, carried on
            _own(stored, manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(stored, discard_deleted=False):
                if entry.status == ManifestEntryStatus.EXISTING:
                    continue
                found.append((entry.status, entry.data_file))
    except ObjectNotFoundError as e:
        raise BadRequestError(f"snapshot {snapshot.snapshot_id} names a file that does not exist: {e}") from e
    return found


def _own(stored: StoredFileIO, location: str) -> str:
    """``location``, if it is under the table's own; a commit names its own table's files only."""
    if not canonical_location(location).startswith(f"{stored.root}/"):
        raise BadRequestError(f"{location} is not under the table's location {stored.root}")
    return location


def _data_key(table: Table, location: str) -> str:
    """The castable path of a data file a client names: its key, or for an inline entry
    (published under ``metadata/inline/``) the entry's path."""
    root = table.store.uri.rstrip("/") + "/"
    key = canonical_location(location).removeprefix(root)
    if key.startswith(INLINE):
        name = key.removeprefix(INLINE)
        paths = [f.path for f in table.manifest.data_files if f.inline is not None and f.path.endswith(f"/{name}")]
        if paths:
            return paths[0]
    return table_key(table.store, location)


def _checked(table: Table, files: list[IcebergDataFile]) -> list[DataFile]:
    """The castable entries of the files a snapshot added, each described from its footer and
    refused if the client's manifest says otherwise of its rows or size."""
    for f in files:
        if f.file_format != FileFormat.PARQUET:
            raise BadRequestError(f"{f.file_path}: castable tables hold Parquet files only")
    entries = check_files(table.store, [f.file_path for f in files], table.schema, table.primary_key, "footer")
    for claimed, entry in zip(files, entries, strict=True):
        if (claimed.record_count, claimed.file_size_in_bytes) != (entry.rows, entry.size):
            raise BadRequestError(
                f"{claimed.file_path}: the manifest says {claimed.record_count} rows in {claimed.file_size_in_bytes} "
                f"bytes, and the file holds {entry.rows} rows in {entry.size} bytes"
            )
    return [_partitioned(table, claimed, entry) for claimed, entry in zip(files, entries, strict=True)]


def _partitioned(table: Table, claimed: IcebergDataFile, entry: DataFile) -> DataFile:
    """``entry`` in the partition its manifest entry names, refused if the table has no such
    spec or the file's statistics hold values outside that partition."""
    partitioning = table.manifest.partitioning
    try:
        spec = partitioning.spec(claimed.spec_id)
    except KeyError:
        raise BadRequestError(f"{claimed.file_path}: the table has no partition spec {claimed.spec_id}") from None
    known = {o.order_id for o in table.manifest.sorting.orders}
    entry = replace(entry, sort_order_id=claimed.sort_order_id if claimed.sort_order_id in known else 0)
    if not spec.fields:
        return entry
    placed = replace(entry, spec_id=spec.spec_id, partition=castable_values(claimed.partition, spec, table.schema))
    problem = misplaced(placed, spec, table.schema)
    if problem is not None:
        raise BadRequestError(f"{claimed.file_path}: {problem}")
    return placed
