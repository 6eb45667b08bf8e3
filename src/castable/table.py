"""The Table API: create, open, append, delete, scan, history and time travel."""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from castable.batching import BatchWriter
from castable.commit import (
    Change,
    CommitResult,
    NextState,
    Pointer,
    commit,
    encode_pointer,
    entry_as_of,
    load_latest,
    now,
    read_manifest,
    reset_pointer,
    retention_floor,
)
from castable.compact import CompactChange, CompactOptions, CompactReport, plan_groups
from castable.conflicts import Access, Rows, check_sources
from castable.dblog import LOG_PREFIX
from castable.delete import DeleteChange
from castable.erase import MODES as ERASE_MODES
from castable.erase import EraseChange, EraseMode, EraseReport, PurgeReport
from castable.erase import purge as purge_erased_objects
from castable.errors import (
    CommitConflictError,
    CorruptObjectError,
    EmptyWriteError,
    InvalidInputError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    VersionNotFoundError,
)
from castable.evolution import SchemaUpdate, merged, restored, same_schema, translate_stats, with_ids
from castable.expressions import Assignments
from castable.filelist import DATA, TOMBSTONES, FileList
from castable.gc import ExpireReport, GcReport, retained_versions
from castable.gc import expire as expire_versions
from castable.gc import gc as collect_garbage
from castable.inputs import arrow_pieces, is_dataframe
from castable.layout import POINTER_KEY, manifest_key
from castable.manifest import FORMAT_VERSIONS, LATEST_FORMAT_VERSION, CommitInfo, DataFile, Manifest, Membership
from castable.merge import MergeBuilder
from castable.predicate import Constant, InList, Predicate, parse_predicate
from castable.properties import TableProperties, normalize
from castable.register import check_files
from castable.replace import ReplaceChange, Rewrite, RewriteChange, check_new_files
from castable.scan import Scan
from castable.schema import conform
from castable.snapshot import Snapshot
from castable.stats import supports_stats
from castable.store import ObjectStore, PreconditionFailedError, store_from_uri
from castable.writer import write_data_files

if TYPE_CHECKING:
    import pandas as pd


AddMode = Literal["append", "upsert", "overwrite"]
ADD_MODES: tuple[str, ...] = get_args(AddMode)
DELETE_OPS = ("d", "delete")
"""The operations that delete their key in a change feed (Debezium writes ``d``)."""


@dataclass(frozen=True)
class HistoryEntry:
    """One commit in the table's history; an unreadable version has ``error`` and no details."""

    version: int
    timestamp: datetime | None
    operation: str
    commit_id: str
    summary: dict[str, Any]
    error: str | None = None


def new_commit_id(commit_id: str | None) -> str:
    if commit_id is None:
        return str(uuid.uuid4())
    if not isinstance(commit_id, str) or not commit_id or len(commit_id) > 256:
        raise InvalidInputError("commit_id must be a non-empty string of at most 256 characters")
    return commit_id


def initial_manifest(
    schema: pa.Schema,
    *,
    primary_key: str | list[str] | None,
    properties: Mapping[str, object] | None,
    format_version: int,
    database: Membership | None = None,
) -> Manifest:
    """Version 0 of a new table, its definition checked (every create starts here)."""
    if format_version not in FORMAT_VERSIONS:
        raise InvalidInputError(f"format_version must be one of {FORMAT_VERSIONS}, not {format_version!r}")
    if not isinstance(schema, pa.Schema) or len(schema) == 0:
        raise InvalidInputError("schema must be a non-empty pyarrow.Schema")
    repeated = sorted({name for name in schema.names if schema.names.count(name) > 1})
    if repeated:
        raise InvalidInputError(f"column names must be unique; repeated: {repeated}")
    keys = [primary_key] if isinstance(primary_key, str) else list(primary_key or [])
    if len(keys) > 1:
        raise InvalidInputError("castable supports a single-column primary key")
    for k in keys:
        if k not in schema.names:
            raise InvalidInputError(f"primary key column {k!r} is not in the schema")
        if not supports_stats(schema.field(k).type) or pa.types.is_floating(schema.field(k).type):
            raise InvalidInputError(f"primary key column {k!r} must be an integer, string, date, timestamp or decimal")
    schema = schema.remove_metadata()
    if format_version >= 2:
        schema = with_ids(schema)
    return Manifest(
        table_uuid=str(uuid.uuid4()),
        version=0,
        previous=None,
        created_at=now(),
        schema=schema,
        primary_key=tuple(keys),
        properties=normalize(properties),
        commit=CommitInfo("create", str(uuid.uuid4()), {}),
        data_files=FileList(DATA, schema),
        tombstones=FileList(TOMBSTONES, schema),
        format_version=format_version,
        database=database,
    )


def create_table(
    uri: str,
    schema: pa.Schema,
    *,
    primary_key: str | list[str] | None = None,
    properties: Mapping[str, object] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    format_version: int = LATEST_FORMAT_VERSION,
) -> Table:
    """Create an empty table at ``uri`` (``s3://bucket/prefix``, ``file:///path`` or a path);
    ``format_version=1`` writes a table that castable releases before version 2 can read."""
    store = store_from_uri(uri, storage_options)
    return Table.create(store, schema, primary_key=primary_key, properties=properties, format_version=format_version)


def open_table(uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Table:
    """Open the latest version of the table at ``uri``."""
    return Table.load(store_from_uri(uri, storage_options))


def as_datetime(value: datetime | str) -> datetime:
    """``as_of`` as a datetime: one already, or an ISO 8601 string such as ``2026-11-22T04:00:00Z``."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value)
    raise InvalidInputError(f"as_of must be a datetime or an ISO 8601 time such as 2026-11-22T04:00:00Z, not {value!r}")


def _from_pandas(df: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """A DataFrame converted to the table's types (pandas has no exact Arrow types of its own)."""
    extra = sorted(set(map(str, df.columns)) - set(schema.names))
    if extra:
        raise SchemaMismatchError(f"data does not match the table schema: unknown columns {extra}")
    try:
        return pa.Table.from_pandas(df, schema=schema, preserve_index=False)
    except (KeyError, pa.ArrowException, TypeError, ValueError) as e:
        raise SchemaMismatchError(f"the DataFrame does not convert to the table schema: {e!r}") from None


class Owner(Protocol):
    """What commits a table that does not commit on its own: its database, or a transaction."""

    transactional: bool
    """Whether commits are only staged (a transaction), so maintenance cannot run."""

    def commit_table(self, table: Table, change: Change, commit_id: str) -> CommitResult:
        """Commit (or stage) one change of ``table``."""

    def observe(self, table: Table, rows: Rows) -> None:
        """Hear of a read of ``table``'s current version (a transaction validates it at commit)."""

    def newest(self, table: Table) -> Manifest:
        """The newest version of ``table`` this owner can see."""

    def before_maintenance(self, table: Table) -> Manifest:
        """Make the table's own manifests complete (or refuse) before expire or gc; return the
        newest version that has its own manifest, the one to maintain."""


MemberResolver = Callable[[ObjectStore, Manifest], tuple[Owner, Manifest]]
"""Finds the database of a member table (at ``store``, whose ``manifest`` names it): the owner
its writes commit through, and the table's newest version as the database lists it."""
_resolvers: list[MemberResolver] = []


def register_member_resolver(resolver: MemberResolver) -> None:
    """Called by ``castable.database``, which builds on this module: a table finds its database
    through the resolver, so this module never imports that one."""
    _resolvers[:] = [resolver]


def _database_of(store: ObjectStore, manifest: Manifest) -> tuple[Owner, Manifest]:
    if not _resolvers:
        raise InvalidInputError(f"{store.uri} is a table of a database: import castable to open it")
    return _resolvers[0](store, manifest)


class Table:
    """A handle on one table. It caches the newest version it has seen; ``refresh()`` reloads.

    A table of a database has an ``owner`` (the database, or a transaction), through which its
    writes commit and its refreshes look."""

    def __init__(
        self, store: ObjectStore, manifest: Manifest, pointer: Pointer | None, *, owner: Owner | None = None
    ) -> None:
        self.store = store
        self._manifest = manifest
        self._pointer = pointer
        self._owner = owner
        self._damage: Damage | None = None
        self._snapshot: Snapshot | None = None

    @classmethod
    def load(cls, store: ObjectStore) -> Table:
        """The newest version; if it (or the pointer) cannot be read, a handle on the newest
        readable version that reads older versions and refuses writes until :meth:`repair`.
        A table of a database is opened through its database, so its writes commit there."""
        try:
            manifest, pointer = load_latest(store)
        except CorruptObjectError as e:
            damage = _assess(store, e)
            if damage.readable.database is not None:  # a member's own copies are damaged: the log holds them
                manifest = damage.readable
            else:
                table = cls(store, damage.readable, None)
                table._damage = damage
                return table
        if manifest.database is not None:
            owner, newest = _database_of(store, manifest)
            return cls(store, newest, None, owner=owner)
        return cls(store, manifest, pointer)

    @classmethod
    def create(
        cls,
        store: ObjectStore,
        schema: pa.Schema,
        *,
        primary_key: str | list[str] | None = None,
        properties: Mapping[str, object] | None = None,
        format_version: int = LATEST_FORMAT_VERSION,
    ) -> Table:
        manifest = initial_manifest(
            schema, primary_key=primary_key, properties=properties, format_version=format_version
        )
        if store.exists(POINTER_KEY):
            raise TableAlreadyExistsError(f"a table already exists at {store.uri}")
        check_not_nested(store)
        store.check_conditional_writes()
        try:
            store.put(manifest_key(0), manifest.to_json(), if_none_match=True)
        except PreconditionFailedError:
            cls._check_half_created(store, manifest)
        with contextlib.suppress(PreconditionFailedError):  # a concurrent create of the same table wrote it
            store.put(POINTER_KEY, encode_pointer(0), if_none_match=True)
        return cls.load(store)

    @staticmethod
    def _check_half_created(store: ObjectStore, wanted: Manifest) -> None:
        """Version 0 exists: a table, or a create that crashed before its pointer, which this
        create completes when it asks for the same definition; anything else is refused."""
        found = read_manifest(store, 0)
        definition = (found.schema, found.primary_key, found.properties)
        if store.exists(POINTER_KEY):
            raise TableAlreadyExistsError(f"a table already exists at {store.uri}")
        if definition != (wanted.schema, wanted.primary_key, wanted.properties):
            raise TableAlreadyExistsError(
                f"a half-created table (version 0, no pointer: its create crashed) with another schema or "
                f"properties is at {store.uri}; open it, or create it again with the same definition"
            )

    # ----------------------------------------------------------------- metadata

    @property
    def uri(self) -> str:
        return self.store.uri

    @property
    def version(self) -> int:
        """The newest version this handle knows (``refresh()`` to look for newer ones)."""
        return self._manifest.version

    @property
    def schema(self) -> pa.Schema:
        return self._manifest.schema

    @property
    def primary_key(self) -> str | None:
        return self._manifest.primary_key[0] if self._manifest.primary_key else None

    @property
    def properties(self) -> dict[str, str]:
        return dict(self._manifest.properties)

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    @property
    def _props(self) -> TableProperties:
        return TableProperties.parse(self._manifest.properties)

    @property
    def damage(self) -> str | None:
        """Why the table cannot be written (and perhaps its newest version not read), else ``None``."""
        return None if self._damage is None else self._damage.message

    def refresh(self) -> Table:
        """Load the newest committed version."""
        owner = self._routed()
        if owner is not None:
            self._adopt(owner.newest(self), None)
            return self
        try:
            self._adopt(*load_latest(self.store, known=self._manifest, table_uuid=self._manifest.table_uuid))
        except CorruptObjectError as e:
            self._damage = _assess(self.store, e, self._manifest.table_uuid)
            self._adopt(self._damage.readable, None)
        else:
            self._damage = None
        return self

    def _readable(self) -> Manifest:
        """The newest version, which must be readable to be read or written on."""
        if self._damage is not None and not self._damage.newest_readable:
            raise CorruptObjectError(self._damage.message)
        return self._manifest

    def _replace_manifest(self, manifest: Manifest) -> None:
        """Read ``manifest`` from now on, even an older one (a transaction's writes dropped)."""
        self._manifest, self._pointer, self._snapshot = manifest, None, None

    def _adopt(self, manifest: Manifest, pointer: Pointer | None) -> None:
        """Make a newer version this handle's own (an older one is ignored)."""
        if manifest.version >= self._manifest.version:
            self._manifest = manifest
            self._pointer = pointer

    def manifest_at(self, version: int | None = None, as_of: datetime | str | None = None) -> Manifest:
        """The manifest of a version, of the version current at ``as_of`` (a datetime or an ISO
        8601 string; without a zone, local time), or the newest known."""
        if version is not None and as_of is not None:
            raise InvalidInputError("give version or as_of, not both")
        if as_of is not None:
            return self._manifest_as_of(as_datetime(as_of))
        if version is None:
            return self._readable()
        if not isinstance(version, int) or isinstance(version, bool):
            raise InvalidInputError(f"version must be an integer, not {version!r}")
        if version == self._manifest.version:
            return self._manifest
        if version < 0:
            raise VersionNotFoundError(f"version {version} does not exist; versions start at 0")
        try:
            if version < retention_floor(self.store):
                raise VersionNotFoundError()
            return read_manifest(self.store, version, self._manifest.table_uuid)
        except VersionNotFoundError:
            raise VersionNotFoundError(_missing_version(self.store, version)) from None

    def _manifest_as_of(self, as_of: datetime) -> Manifest:
        if as_of.tzinfo is None:
            as_of = as_of.astimezone()
        latest = self.refresh()._manifest
        found = entry_as_of(
            partial(read_manifest, self.store, table_uuid=latest.table_uuid),
            retention_floor(self.store),
            latest,
            as_of,
        )
        if found is None:
            raise VersionNotFoundError(f"no retained version of {self.uri} existed at {as_of.isoformat()}")
        return found

    def history(self, limit: int | None = None) -> list[HistoryEntry]:
        """Retained commits newest first, down to the oldest retained or ``limit``. Expired
        versions are skipped (an erasure's purge can expire some and keep older ones); an
        unreadable version is listed with its ``error``."""
        self.refresh()
        entries: list[HistoryEntry] = []
        for version in reversed(retained_versions(self.store)):
            if limit is not None and len(entries) >= limit:
                break
            try:
                m = read_manifest(self.store, version, self._manifest.table_uuid)
            except VersionNotFoundError:
                continue
            except CorruptObjectError as e:
                entries.append(HistoryEntry(version, None, "unreadable", "", {}, error=str(e)))
                continue
            c = m.commit
            entries.append(HistoryEntry(m.version, m.created_at, c.operation, c.commit_id, c.summary))
        return entries

    # --------------------------------------------------------------------- reads

    def snapshot(self, version: int | None = None, as_of: datetime | str | None = None) -> Snapshot:
        """Read access to a version. The handle keeps the last one it gave, so scans of the same
        version share what it has worked out (column mappings, row-group statistics)."""
        manifest = self.manifest_at(version, as_of)
        snapshot = self._snapshot
        if snapshot is None or snapshot.manifest is not manifest:
            snapshot = self._snapshot = Snapshot(self.store, manifest)
        return snapshot

    def scan(
        self,
        columns: list[str] | None = None,
        filter: str | pc.Expression | Predicate | None = None,
        *,
        version: int | None = None,
        as_of: datetime | str | None = None,
    ) -> Scan:
        """A lazy scan of the newest known version, or of ``version`` / the version at ``as_of``."""
        if isinstance(columns, str):
            raise InvalidInputError(f"columns must be a list of names, such as {columns.split(',')!r}, not a string")
        snapshot = self.snapshot(version, as_of)
        predicate = None if filter is None else parse_predicate(filter, snapshot.schema)
        if version is None and as_of is None:
            self._observe(Rows(predicate or Constant(True), None if columns is None else tuple(columns)))
        return Scan(snapshot, columns, predicate)

    def to_arrow(self, **kwargs: Any) -> pa.Table:
        return self.scan(**kwargs).to_arrow()

    def count(self, **kwargs: Any) -> int:
        return self.scan(**kwargs).count()

    def committed_version(self, commit_id: str) -> int | None:
        """The version a commit with this id landed as, while the table's recent history holds it
        (``commit.id-retention`` commits); a write repeating that id commits nothing."""
        return self._manifest.recent_commits.get(commit_id)

    # -------------------------------------------------------------------- writes

    def _begin_write(self, commit_id: str | None) -> str:
        """Every write starts here: a valid ``commit_id`` (a new one if none is given), and a store
        known to honour conditional writes (probed once per process and store)."""
        owner = self._routed()
        if commit_id is not None and owner is not None and owner.transactional:
            raise InvalidInputError(
                "a write inside a transaction takes the transaction's commit_id: "
                "pass it to db.transaction(commit_id=...)"
            )
        checked = new_commit_id(commit_id)
        if self._damage is not None:
            raise CorruptObjectError(self._damage.message)
        self.store.check_conditional_writes()
        return checked

    def _routed(self) -> Owner | None:
        """The owner this handle's writes and refreshes go through. A handle on a table of a
        database that has none (made before the table's manifest was seen to name its
        database) gets the database now, so no write can bypass the database's log."""
        if self._owner is None and self._manifest.database is not None:
            self._owner, _ = _database_of(self.store, self._manifest)
        return self._owner

    def _observe(self, rows: Rows) -> None:
        """Tell the owner (a transaction records it) that ``rows`` of the current version were read."""
        owner = self._routed()
        if owner is not None:
            owner.observe(self, rows)

    def _maintained(self) -> Manifest:
        """The newest version, to expire or collect garbage from: for a table of a database, the
        newest whose own manifest is written (every committed version is rolled forward first)."""
        owner = self._routed()
        if owner is None:
            return self.refresh()._manifest
        manifest = owner.before_maintenance(self)
        self._adopt(manifest, None)
        return manifest

    def _commit(
        self,
        operation: str,
        commit_id: str,
        build: Callable[[Manifest], NextState],
        access: Access | None = None,
        *,
        across_schema: bool = False,
    ) -> CommitResult:
        """Commit one change, declaring to the conflict model what a transaction validates for it
        (``access``; ``None`` for an operation that cannot run in one) and whether it holds
        ``across_schema`` changes: through the owner (a database or a transaction), or on the
        table's own log."""
        change = Change(operation, build, access, across_schema)
        owner = self._routed()
        if owner is not None:
            result = owner.commit_table(self, change, commit_id)
            self._adopt(result.manifest, result.pointer)
            return result
        props = self._props
        result = commit(
            self.store,
            self._manifest,
            change,
            commit_id=commit_id,
            pointer=self._pointer,
            timeout=props.commit_timeout_seconds,
            commit_retention=props.commit_id_retention,
            on_newer_base=self._adopt,
        )
        self._adopt(result.manifest, result.pointer)
        return result

    def append(
        self,
        data: pa.Table | pa.RecordBatch | pa.RecordBatchReader | pd.DataFrame | Iterable[pa.RecordBatch],
        *,
        commit_id: str | None = None,
        on_rows: Callable[[int], None] | None = None,
        source_ids: Sequence[str] = (),
        schema_mode: Literal["strict", "merge"] = "strict",
    ) -> int:
        """Append rows in one commit and return the committed version.

        ``data`` streams into Parquet files of the target size; a repeated ``commit_id``
        returns the version that already holds it without writing anything. ``source_ids``
        name the inputs the rows come from (one per landed file, say): they are kept like commit
        ids, and an append naming a source a commit already consumed raises
        ``CommitConflictError`` and commits nothing, so two writers that picked up the same
        input never both append it.

        With ``schema_mode="merge"``, columns of ``data`` the table lacks are added to it (as
        nullable columns, in the same commit), as deltalake's ``schema_mode="merge"`` does;
        ``"strict"`` refuses them with ``SchemaMismatchError``.
        """
        commit_id = self._begin_write(commit_id)
        if commit_id in self._manifest.recent_commits:
            return self._manifest.recent_commits[commit_id]
        sources = tuple(source_ids)
        check_sources(self._manifest, sources)
        if schema_mode not in ("strict", "merge"):
            raise InvalidInputError(f"schema_mode must be 'strict' or 'merge', not {schema_mode!r}")
        if schema_mode == "strict":
            schema, update, batches = self.schema, None, self.conforming_batches(data)
        else:
            schema, update, batches = self._merging(data)
        first = next(batches, None)
        if first is None:
            raise EmptyWriteError("append was given no rows; nothing was committed")
        files = self._write(itertools.chain([first], batches), on_rows, schema)
        build = partial(_appended, files, sources=sources, written_with=schema)
        if update is not None:
            build = partial(_merged_append, self._manifest, update, build)
        return self._commit("append", commit_id, build, Access(), across_schema=True).version

    def _merging(self, data: Any) -> tuple[pa.Schema, SchemaUpdate | None, Iterator[pa.RecordBatch]]:
        """For ``schema_mode="merge"``: the schema with the columns the input's first piece adds,
        the update that adds them (``None`` if none), and the input conformed to that schema."""
        pieces = iter([pa.Table.from_pandas(data, preserve_index=False)] if is_dataframe(data) else arrow_pieces(data))
        head = next(pieces, None)
        update = None if head is None else merged(self.schema, head.schema)
        schema = self.schema
        if update is not None:
            schema = update.apply(schema, self._manifest.primary_key, self.version + 1)[0]
        rows = itertools.chain([] if head is None else [head], pieces)
        return schema, update, self.conforming_batches(rows, schema, fill=True)

    def _write(
        self,
        batches: Iterable[pa.RecordBatch],
        on_rows: Callable[[int], None] | None = None,
        schema: pa.Schema | None = None,
    ) -> list[DataFile]:
        """Rows of ``schema`` (default: the table's) as new data files of the target size (not yet committed)."""
        schema = self.schema if schema is None else schema
        return write_data_files(self.store, iter(batches), schema, self._props, on_rows=on_rows)

    def upsert(
        self,
        data: Any,
        *,
        op_column: str | None = None,
        delete_ops: Collection[str] = DELETE_OPS,
        last_wins: bool = False,
        commit_id: str | None = None,
        source_ids: Sequence[str] = (),
    ) -> int:
        """Insert ``data``'s rows, replacing every live row with one of their primary keys, in one
        commit; return the version.

        The replaced rows get a key-list tombstone (no data read), so the cost is that of the new
        rows. A key may appear once in ``data``, unless ``last_wins``: then the last row of each
        key counts (a change feed lists a key's changes in order). If another writer commits rows
        with one of these keys first, the upsert replaces those too: each key keeps exactly one
        live row, the later commit's. ``data`` is held in memory to check its keys before anything
        is written. ``source_ids`` are kept as in :meth:`append`.

        With ``op_column`` ``data`` is a change feed (Debezium style): that column, not part of the
        table, holds each row's operation; a row whose operation is one of ``delete_ops`` (case
        insensitive) deletes its key instead of inserting or replacing it.
        """
        commit_id = self._begin_write(commit_id)
        if commit_id in self._manifest.recent_commits:
            return self._manifest.recent_commits[commit_id]
        key = self._key_for("upsert")
        sources = tuple(source_ids)
        check_sources(self._manifest, sources)
        rest, ops = (data, None) if op_column is None else _split_column(data, op_column)
        rows = self._materialize(rest, "upsert")
        if last_wins:
            latest = _last_of_each(rows.column(key))
            rows, ops = rows.take(latest), None if ops is None else ops.take(latest)
        keys = _unique_keys(rows.column(key))
        if ops is not None:
            rows = rows.filter(pc.invert(pc.fill_null(pc.is_in(ops, pa.array([o.lower() for o in delete_ops])), False)))
        files = self._write(rows.to_batches())
        replaced = InList(key, keys)
        change = ReplaceChange(
            self.store, self._manifest, replaced, files, operation="upsert", exclusive=False, sources=sources
        )
        return self._commit("upsert", commit_id, change.build, Access(keys=(Rows(replaced, by="upsert"),))).version

    def _key_for(self, operation: str) -> str:
        if self.primary_key is None:
            raise InvalidInputError(f"{operation} replaces rows by primary key, and {self.uri} has none; use append")
        return self.primary_key

    def overwrite(
        self,
        data: Any,
        *,
        where: str | pc.Expression | Predicate | None = None,
        commit_id: str | None = None,
    ) -> int:
        """Replace every row of the table, or exactly the rows matching ``where``, with ``data`` in
        one commit; return the version.

        With ``where`` (replace-where), every new row must match it, and a concurrent commit that
        adds rows matching it makes the overwrite fail with ``CommitConflictError`` rather than
        drop them. The replaced rows get tombstones (files entirely inside the range are dropped
        from the manifest); ``data`` may be empty, which deletes the range.
        """
        commit_id = self._begin_write(commit_id)
        if commit_id in self._manifest.recent_commits:
            return self._manifest.recent_commits[commit_id]
        if where is None:
            replaced: Predicate = Constant(True)
            batches: Iterable[pa.RecordBatch] = self.conforming_batches(data)
        else:
            rows = self._materialize(data, "overwrite", allow_empty=True)
            replaced = parse_predicate(where, self.schema)
            self._check_inside(replaced, where, rows)
            batches = rows.to_batches()
        files = self._write(batches)
        change = ReplaceChange(self.store, self._manifest, replaced, files, operation="overwrite", exclusive=True)
        return self._commit(
            "overwrite", commit_id, change.build, Access(keys=(Rows(replaced, by="overwrite"),))
        ).version

    def update(
        self,
        set: Mapping[str, object],
        where: str | pc.Expression | Predicate | None = None,
        *,
        commit_id: str | None = None,
    ) -> int:
        """Set columns of the rows matching ``where`` (every row without it) in one commit; return
        the version.

        ``set`` maps column names to new values: SQL expressions of the row's old values
        (``"'closed'"``, ``"amount * 1.1"``, ``"CASE WHEN ... END"``, see
        :mod:`castable.expressions`), Arrow expressions or Python values. Only the matching rows
        are read; they get tombstones and their changed rows are appended. The primary key cannot
        be set. Nothing is committed (and the current version is returned) when no row matches.
        """
        assignments = Assignments.parse(set, self.schema, key=self.primary_key)
        selected: Predicate = Constant(True) if where is None else parse_predicate(where, self.schema)

        def derive(snapshot: Snapshot) -> Rewrite:
            rows = Scan(snapshot, None, selected).to_arrow()
            replaced = selected if rows.num_rows else Constant(False)  # no live row: nothing to tombstone
            return Rewrite(replaced, assignments.apply(rows, rows), summary={"rows_updated": rows.num_rows})

        access = Access(rows=(Rows(selected, by="update"),), reads=(Rows(selected, by="update"),))
        version = self.rewrite("update", derive, access, commit_id=commit_id)
        return self._manifest.version if version is None else version

    def merge(self, source: Any, *, source_alias: str = "s", target_alias: str = "t") -> MergeBuilder:
        """A merge of ``source`` into the table by primary key: add ``when_*`` clauses, then
        ``execute()`` (see :mod:`castable.merge`)."""
        return MergeBuilder(self, source, source_alias=source_alias, target_alias=target_alias)

    def rewrite(
        self, operation: str, derive: Callable[[Snapshot], Rewrite], access: Access, *, commit_id: str | None = None
    ) -> int | None:
        """Commit what ``derive`` makes of the latest version (rows replaced, rows written), made
        again on a newer version when a concurrent commit touched what it read; the version, or
        ``None`` when it changes nothing. The engine of :meth:`update` and merges; ``access`` is
        what a transaction validates for it."""
        commit_id = self._begin_write(commit_id)
        if commit_id in self._manifest.recent_commits:
            return self._manifest.recent_commits[commit_id]

        def write(rows: pa.Table) -> list[DataFile]:
            return self._write(self.conforming_batches(rows))

        change = RewriteChange(self.store, self._manifest, derive, write, operation=operation)
        if change.is_empty:
            for rows in access.reads:  # that nothing matched was read
                self._observe(rows)
            return None
        return self._commit(operation, commit_id, change.build, access).version

    @staticmethod
    def _check_inside(replaced: Predicate, where: object, rows: pa.Table) -> None:
        """Refuse an overwrite whose ``rows`` (the new rows, or their predicate columns) do not
        all match ``replaced``, the parsed ``where``."""
        outside = rows.num_rows - rows.filter(replaced.to_expression()).num_rows
        if outside:
            raise InvalidInputError(
                f"{outside} of the {rows.num_rows} rows do not match {where!r}; an overwrite with "
                "where writes only rows inside it"
            )

    def _materialize(self, data: Any, operation: str, *, allow_empty: bool = False) -> pa.Table:
        """``data`` as one table of the table's schema, for checks that need every row first."""
        rows = pa.Table.from_batches(list(self.conforming_batches(data)), schema=self.schema)
        if not rows.num_rows and not allow_empty:
            raise EmptyWriteError(f"{operation} was given no rows; nothing was committed")
        return rows

    def add_files(
        self,
        files: Sequence[str | DataFile],
        *,
        mode: AddMode = "append",
        where: str | pc.Expression | Predicate | None = None,
        commit_id: str | None = None,
    ) -> int:
        """Register Parquet files already written under the table's ``data/`` prefix; return the version.

        For writers that produce files themselves (Spark on EMR, other engines): each path must
        exist, lie under ``data/``, be valid Parquet with exactly the table's columns and types,
        and not already belong to the table; only footers are read. ``DataFile`` entries made by
        castable's writer in another process (Spark executors) keep their statistics and are
        checked by one HEAD each. With a ``commit_id`` a retried registration commits nothing twice.

        ``mode`` says what the files' rows do, as the write methods of the same names: ``append``
        (the default), ``upsert`` (replace the live rows with their primary keys: the key column
        is read to check each key appears once) or ``overwrite`` (replace the whole table, or the
        rows matching ``where``: the predicate's columns are read to check every row matches).
        """
        commit_id = self._begin_write(commit_id)
        if commit_id in self._manifest.recent_commits:
            return self._manifest.recent_commits[commit_id]
        predicate = self.check_add_mode(mode, where)
        if not files:
            raise EmptyWriteError("add_files was given no files; nothing was committed")
        checked = check_files(self.store, files, self.schema, self.primary_key)
        check_new_files(self._manifest.data_files, checked)
        if mode == "upsert":
            key = self._key_for("upsert")
            replaced: Predicate = InList(key, _unique_keys(self._read_files(checked, [key]).column(key)))
        elif predicate is not None:
            columns = predicate.columns()
            self._check_inside(
                predicate, where, self._read_files(checked, None if columns is None else sorted(columns))
            )
            replaced = predicate
        elif mode == "overwrite":
            replaced = Constant(True)
        else:
            build = partial(_appended, checked, registered=True)
            return self._commit("append", commit_id, build, Access(), across_schema=True).version
        change = ReplaceChange(
            self.store,
            self._manifest,
            replaced,
            checked,
            operation=mode,
            exclusive=mode == "overwrite",
            registered=True,
        )
        return self._commit(mode, commit_id, change.build, Access(keys=(Rows(replaced, by=mode),))).version

    def check_add_mode(self, mode: str, where: str | pc.Expression | Predicate | None = None) -> Predicate | None:
        """What :meth:`add_files` refuses in ``mode`` and ``where`` whatever the files hold (so an
        engine can ask before it writes them); the parsed ``where``."""
        if mode not in ADD_MODES:
            raise InvalidInputError(f"mode must be one of {', '.join(ADD_MODES)}, not {mode!r}")
        if where is not None and mode != "overwrite":
            raise InvalidInputError("where applies to mode='overwrite' only")
        if mode == "upsert":
            self._key_for("upsert")
        return None if where is None else parse_predicate(where, self.schema)

    def _read_files(self, files: Sequence[DataFile], columns: list[str] | None) -> pa.Table:
        """``columns`` of files not yet committed, read as a scan reads the table's own."""
        return Scan(Snapshot(self.store, self._manifest.restricted(files, tombstones=False)), columns).to_arrow()

    def batch_writer(
        self,
        *,
        max_rows: int = 1_000_000,
        max_bytes: int = 128 * 1024 * 1024,
        max_seconds: float = 10.0,
        commit_id_prefix: str | None = None,
    ) -> BatchWriter:
        """A writer that groups many small appends into few commits (see :class:`BatchWriter`)."""
        return BatchWriter(
            self, max_rows=max_rows, max_bytes=max_bytes, max_seconds=max_seconds, commit_id_prefix=commit_id_prefix
        )

    def conforming_batches(
        self, data: Any, schema: pa.Schema | None = None, *, fill: bool = False
    ) -> Iterator[pa.RecordBatch]:
        """``data`` as non-empty RecordBatches of ``schema`` (default: the table's); with
        ``fill``, nullable columns ``data`` lacks are NULL. ``SchemaMismatchError`` if it does not fit."""
        schema = self.schema if schema is None else schema
        source = [_from_pandas(data, schema)] if is_dataframe(data) else arrow_pieces(data)
        for item in source:
            conformed = conform(_with_missing(item, schema) if fill else item, schema)
            if self.primary_key is not None and conformed.column(self.primary_key).null_count:
                raise SchemaMismatchError(f"primary key column {self.primary_key!r} holds NULLs; a row needs a key")
            batches = conformed.to_batches() if isinstance(conformed, pa.Table) else [conformed]
            yield from (b for b in batches if b.num_rows)

    def delete(self, predicate: str | pc.Expression | Predicate, *, commit_id: str | None = None) -> int:
        """Soft-delete the rows matching ``predicate`` with one tombstone file; return the version.

        Nothing is committed (and the current version is returned) when no row matches.
        """
        commit_id = self._begin_write(commit_id)
        if commit_id in self._manifest.recent_commits:
            return self._manifest.recent_commits[commit_id]
        parsed = parse_predicate(predicate, self.schema)
        change = DeleteChange(self.store, parsed, self._manifest)
        deleted = Rows(parsed, by="delete")
        if change.plan.is_empty:
            self._observe(deleted)  # that no row matched was read
            return self._manifest.version
        return self._commit("delete", commit_id, change.build, Access(rows=(deleted,), reads=(deleted,))).version

    def erase(
        self,
        predicate: str | pc.Expression | Predicate,
        *,
        commit_id: str | None = None,
        mode: EraseMode = "auto",
        purge: bool = False,
        files: list[str] | None = None,
    ) -> EraseReport:
        """Physically remove the rows matching ``predicate`` and commit the rewritten files.

        ``mode="splice"`` rewrites only the affected row groups server-side (multipart upload
        with range copies), ``"rewrite"`` rewrites whole files, ``"auto"`` splices unless a file
        is small. Older versions still reference the old files until ``purge_erased`` (or
        ``purge=True``) expires them and deletes the old objects. ``files`` restricts the erase
        to those data files (one unit of work of a fan-out).
        """
        if mode not in ERASE_MODES:
            raise InvalidInputError(f"mode must be one of {ERASE_MODES}, not {mode!r}")
        commit_id = self._begin_write(commit_id)
        parsed = parse_predicate(predicate, self.schema)
        if commit_id in self._manifest.recent_commits:
            return EraseReport(self._manifest.recent_commits[commit_id], 0, [], parsed)
        only = None if files is None else frozenset(files)
        change = EraseChange(self.store, parsed, self._manifest, mode, self._props, only)
        version = self.version if change.is_empty else self._commit("erase", commit_id, change.build).version
        report = change.report(version)
        if purge:
            report.purge = self.purge_erased(report)
        return report

    def purge_erased(self, report: EraseReport) -> PurgeReport:
        """Complete an erasure: expire the versions that still reference the old objects,
        delete those objects (and their noncurrent versions), and verify that no retained
        object still holds a matching row."""
        if self._routed() is not None:  # it reads the table's own manifests only: finish them first
            self._maintained()
        self.store.check_conditional_writes()
        return purge_erased_objects(self.store, report)

    # --------------------------------------------------------------- maintenance

    def compact(
        self,
        *,
        min_file_size: int | None = None,
        delete_ratio: float | None = None,
        sort_by: str | None = None,
        coalesce_tombstones: bool = True,
        files: list[str] | None = None,
        commit_id: str | None = None,
    ) -> CompactReport:
        """Rewrite small and delete-heavy files into files of the target size and merge tombstones.

        Defaults come from the ``compaction.*`` table properties. Old files stay for time travel
        until ``expire`` and ``gc`` remove them. ``files`` restricts the compaction to one group
        of :meth:`plan_compaction` (tombstones are then left as they are).
        """
        options = self._compact_options(min_file_size, delete_ratio, sort_by, coalesce_tombstones, files)
        commit_id = self._begin_write(commit_id)
        if commit_id in self._manifest.recent_commits:
            return CompactReport(self._manifest.recent_commits[commit_id])
        change = CompactChange(self.store, self._manifest, self._props, options)
        if change.is_empty:
            return CompactReport(self.version)
        version = self._commit("compact", commit_id, change.build).version
        return change.report(version)

    def plan_compaction(
        self, *, min_file_size: int | None = None, delete_ratio: float | None = None
    ) -> list[list[str]]:
        """Groups of data files worth compacting, each about one target file in size: independent
        units of work that can be compacted in parallel (``compact(files=group)``)."""
        options = self._compact_options(min_file_size, delete_ratio, None, False, None)
        return plan_groups(self.snapshot(), options, self._props.target_file_size)

    def _compact_options(
        self,
        min_file_size: int | None,
        delete_ratio: float | None,
        sort_by: str | None,
        coalesce_tombstones: bool,
        files: list[str] | None,
    ) -> CompactOptions:
        props = self._props
        if sort_by is not None and sort_by not in self.schema.names:
            raise InvalidInputError(f"sort_by names unknown column {sort_by!r}")
        return CompactOptions(
            min_file_size=props.compact_min_file_size if min_file_size is None else min_file_size,
            delete_ratio=props.compact_delete_ratio if delete_ratio is None else delete_ratio,
            sort_by=sort_by,
            coalesce_tombstones=coalesce_tombstones and files is None,
            only=None if files is None else frozenset(files),
        )

    def restore(
        self, version: int | None = None, *, as_of: datetime | str | None = None, commit_id: str | None = None
    ) -> int:
        """Commit a new version whose data files and tombstones are those of ``version`` (or of the
        version current at ``as_of``); return it. No data is copied. Refused when that version has
        expired or any of its files is gone (removed outside castable: gc keeps a retained
        version's files). Commits made after it are not lost: they
        stay in the history, and a later restore can return to them.
        """
        if (version is None) == (as_of is None):
            raise InvalidInputError("restore needs a version or as_of (one of them)")
        commit_id = self._begin_write(commit_id)
        if commit_id in self._manifest.recent_commits:
            return self._manifest.recent_commits[commit_id]
        target = self.manifest_at(version, as_of)
        gone = _absent(self.store, [f.path for f in target.data_files] + [t.path for t in target.tombstones])
        if gone:
            raise InvalidInputError(
                f"cannot restore version {target.version}: {len(gone)} of its files are gone "
                f"(e.g. {gone[0]}); restore a newer version"
            )
        summary = {"restored_version": target.version, "files": len(target.data_files), "rows": target.total_rows}

        def build(base: Manifest) -> NextState:
            schema = restored(target.schema, base.schema)
            return NextState(
                target.data_files, target.tombstones, summary, schema=schema, primary_key=target.primary_key
            )

        return self._commit("restore", commit_id, build, across_schema=True).version

    def alter(self, *, commit_id: str | None = None) -> SchemaUpdate:
        """Changes to the schema, committed together as one version when the update's
        ``commit()`` is called (or its ``with`` block ends). No data is read or written:
        columns are found in data files by field id, so files of every schema generation
        read together. Lossy changes, and dropping or retyping the primary key, are refused."""
        return SchemaUpdate(partial(self._alter, commit_id=commit_id))

    def _alter(self, update: SchemaUpdate, *, commit_id: str | None) -> int:
        commit_id = self._begin_write(commit_id)
        if commit_id in self._manifest.recent_commits:
            return self._manifest.recent_commits[commit_id]
        if self._manifest.format_version < 2:
            raise InvalidInputError("schema changes need format version 2: upgrade the table first (castable upgrade)")
        update.apply(self.schema, self._manifest.primary_key, self.version + 1)  # refuse a bad change before committing

        def build(base: Manifest) -> NextState:
            schema, key = update.apply(base.schema, base.primary_key, base.version + 1)
            summary = {"changes": update.describe()}
            return NextState(base.data_files, base.tombstones, summary, schema=schema, primary_key=key)

        return self._commit("alter", commit_id, build, across_schema=True).version

    def upgrade(self, *, commit_id: str | None = None) -> int:
        """Rewrite the table in the latest format version, in one commit that copies no data:
        the files and tombstones are listed in segments; return that version (or the current
        one, with nothing committed, if the table is already in the latest format)."""
        commit_id = self._begin_write(commit_id)
        if commit_id in self._manifest.recent_commits:
            return self._manifest.recent_commits[commit_id]
        if self._manifest.format_version == LATEST_FORMAT_VERSION:
            return self.version

        def build(base: Manifest) -> NextState:
            summary = {"from_format_version": base.format_version, "format_version": LATEST_FORMAT_VERSION}
            return NextState(base.data_files, base.tombstones, summary, format_version=LATEST_FORMAT_VERSION)

        return self._commit("upgrade", commit_id, build).version

    def repair(self, *, commit_id: str | None = None) -> int:
        """Make a damaged table (see :attr:`damage`) writable again; return its newest version.

        When the newest versions cannot be read, their contents are lost: the newest readable
        version's files and tombstones are committed as a new version after them (no data is
        copied; the unreadable manifests stay, listed by ``history``). A malformed pointer is
        rewritten to name the newest version. An undamaged table is left as it is.
        """
        if self._routed() is not None:
            raise InvalidInputError(
                "a table of a database needs no repair: a version whose own manifest is damaged or missing "
                "is read from the database log, which holds it"
            )
        self.refresh()
        damage = self._damage
        if damage is None:
            return self.version
        commit_id = new_commit_id(commit_id)
        self.store.check_conditional_writes()
        newest = damage.newest
        versions = retained_versions(self.store)
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
                    commit_retention=self._props.commit_id_retention,
                )
                .written(self.store)
            )
            with contextlib.suppress(PreconditionFailedError):  # a concurrent repair (or write) took it
                self.store.put(manifest_key(repaired.version), repaired.to_json(), if_none_match=True)
            newest = repaired.version
        reset_pointer(self.store, newest, oldest=versions[0])
        return self.refresh()._readable().version

    def expire(self, *, retain_versions: int | None = None, retain_for: timedelta | None = None) -> ExpireReport:
        """Delete the manifests of old versions: kept are the newest ``retain_versions`` and those
        younger than ``retain_for`` (defaults: the ``history.*`` properties); the latest always."""
        if retain_versions is None and retain_for is None:
            props = self._props
            retain_versions, retain_for = props.retain_versions, timedelta(seconds=props.retain_seconds)
        if retain_versions is not None and retain_versions < 1:
            raise InvalidInputError("retain_versions must be at least 1")
        self.store.check_conditional_writes()
        latest = self._maintained()
        return expire_versions(self.store, latest, retain_versions=retain_versions, retain_for=retain_for, now=now())

    def gc(self, *, orphan_grace: timedelta | None = None, dry_run: bool = False) -> GcReport:
        """Delete data and tombstone files no retained version references, once older than
        ``orphan_grace`` (default: ``gc.orphan-grace-seconds``), and abort stale multipart uploads."""
        if self._routed() is not None:  # it reads the table's own manifests only: finish them first
            self._maintained()
        grace = timedelta(seconds=self._props.orphan_grace_seconds) if orphan_grace is None else orphan_grace
        if grace < timedelta(0):
            raise InvalidInputError("orphan_grace cannot be negative")
        return collect_garbage(self.store, orphan_grace=grace, dry_run=dry_run, now=now())

    def __repr__(self) -> str:
        return f"Table({self.uri!r}, version={self.version})"


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


def _assess(store: ObjectStore, cause: CorruptObjectError, table_uuid: str | None = None) -> Damage:
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


def _absent(store: ObjectStore, keys: list[str]) -> list[str]:
    """The keys of ``keys`` that no object holds (checked 16 at a time)."""
    with ThreadPoolExecutor(16) as pool:
        return [key for key, there in zip(keys, pool.map(store.exists, keys), strict=True) if not there]


def check_not_nested(store: ObjectStore) -> None:
    """Refuse a table inside another table's prefix or above one: maintenance of the outer
    table (gc of its ``data/``) would delete the inner table's files."""
    for parent in store.parents():
        if parent.exists(POINTER_KEY) or parent.exists(manifest_key(0)):
            raise InvalidInputError(
                f"cannot create a table at {store.uri}: it lies inside the table at {parent.uri}, whose "
                "maintenance would delete its files; choose a location outside that prefix"
            )
        if parent.exists(f"{LOG_PREFIX}/{POINTER_KEY}") or parent.exists(f"{LOG_PREFIX}/{manifest_key(0)}"):
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


def _missing_version(store: ObjectStore, version: int) -> str:
    """Why ``version`` cannot be read: not committed yet, or expired."""
    versions = retained_versions(store)
    if not versions or version > versions[-1]:
        newest = versions[-1] if versions else "unknown"
        return f"version {version} of {store.uri} does not exist (the newest is {newest})"
    return (
        f"version {version} of {store.uri} has expired (removed by expire or an erasure's purge); "
        f"retained versions run from {versions[0]} to {versions[-1]}"
    )


def _appended(
    files: Sequence[DataFile],
    base: Manifest,
    *,
    sources: tuple[str, ...] = (),
    registered: bool = False,
    written_with: pa.Schema | None = None,
) -> NextState:
    """The next version of ``base`` with ``files`` appended (``sources`` consumed). Files the
    table wrote have fresh names; registered ones are checked against the version's files.
    Files ``written_with`` an older schema keep their statistics, re-keyed to ``base``'s."""
    if registered:
        check_new_files(base.data_files, files)
    old = base.schema if written_with is None else written_with
    added = tuple(
        replace(f, added_version=base.version + 1, stats=translate_stats(f.stats, old, base.schema))
        if old is not base.schema
        else replace(f, added_version=base.version + 1)
        for f in files
    )
    summary: dict[str, Any] = {
        "rows_added": sum(f.rows for f in files),
        "files_added": len(files),
        "bytes_added": sum(f.size for f in files),
    }
    if registered:
        summary["registered"] = True
    return NextState(
        data_files=base.data_files + added, tombstones=base.tombstones, summary=summary, source_ids=sources
    )


def _merged_append(
    planned: Manifest, update: SchemaUpdate, append: Callable[[Manifest], NextState], base: Manifest
) -> NextState:
    """An append that adds columns (``schema_mode="merge"``): its files carry the new columns'
    ids, so a concurrent schema change makes it conflict rather than guess."""
    if not same_schema(base.schema, planned.schema):
        raise CommitConflictError(
            "append with schema_mode='merge' raced a schema change; nothing was committed: run it again"
        )
    schema, key = update.apply(base.schema, base.primary_key, base.version + 1)
    evolved = replace(
        base, schema=schema, data_files=base.data_files.evolved(schema), tombstones=base.tombstones.evolved(schema)
    )
    state = append(evolved)
    added = [args[0] for kind, args in update.changes if kind == "add"]
    return replace(state, schema=schema, primary_key=key, summary={**state.summary, "columns_added": added})


def _with_missing(data: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table | pa.RecordBatch:
    """``data`` with a NULL column for each nullable column of ``schema`` it lacks."""
    missing = [f for f in schema if f.name not in data.schema.names and f.nullable]
    for f in missing:
        data = data.append_column(f.name, pa.nulls(data.num_rows, f.type))
    return data


def _unique_keys(keys: pa.ChunkedArray) -> pa.Array:
    """The distinct keys of an upsert's rows; ``InvalidInputError`` if one appears twice."""
    distinct = pc.unique(keys)
    if len(distinct) != len(keys):
        counts = pc.value_counts(keys)
        twice = counts.filter(pc.greater(counts.field("counts"), 1))[0]["values"].as_py()
        raise InvalidInputError(
            f"the rows hold key {twice!r} more than once; an upsert gives each key one row "
            "(with last_wins=True the last row of each key counts)"
        )
    return distinct


def _last_of_each(keys: pa.ChunkedArray) -> pa.Array:
    """The positions of the last row of each key, in the order of the rows."""
    positions = pa.table({"k": keys, "i": pa.array(np.arange(len(keys)))})
    last = positions.group_by("k", use_threads=False).aggregate([("i", "max")]).column("i_max")
    return pc.take(last, pc.sort_indices(last)).combine_chunks()


def _split_column(data: Any, name: str) -> tuple[Any, pa.ChunkedArray]:
    """``data`` (a pyarrow Table, RecordBatch, reader, iterable of batches or DataFrame) without
    its column ``name``, and that column as lower-case text (a change feed's operations)."""
    if is_dataframe(data):
        if name not in data.columns:
            raise SchemaMismatchError(f"the change feed has no operation column {name!r}")
        rest: Any = data.drop(columns=[name])
        column = pa.chunked_array([pa.array(data[name], from_pandas=True)])
    else:
        rest, parts = [], []
        for batch in arrow_pieces(data):
            if name not in batch.schema.names:
                raise SchemaMismatchError(f"the change feed has no operation column {name!r}")
            parts.append(batch.column(name))
            rest.append(batch.drop_columns([name]))
        chunks = [c for p in parts for c in (p.chunks if isinstance(p, pa.ChunkedArray) else [p])]
        column = pa.chunked_array(chunks) if chunks else pa.chunked_array([], pa.string())
    try:
        return rest, pc.utf8_lower(column.cast(pa.string()))
    except pa.ArrowException as e:
        raise SchemaMismatchError(f"operation column {name!r} is not text: {e}") from None
