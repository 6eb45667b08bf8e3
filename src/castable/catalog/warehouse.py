"""The tables under one warehouse folder, as an Iceberg catalog sees them: a namespace is a
folder (``a.b`` is ``a/b/``), a table a castable table in it, and a namespace that is a castable
database holds its member tables, which commit through the database's log. No catalog database:
the folders and the tables' own pointers are the catalog."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from castable.catalog.errors import (
    AlreadyExistsError,
    BadRequestError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    UnsupportedError,
)
from castable.catalog.models import MAX_LEVELS
from castable.catalog.names import folder_path, name_of
from castable.commit.create import holds_database, holds_table
from castable.commit.dbcommitters import DatabaseLog
from castable.commit.dblog import LOG_PREFIX
from castable.database import Database
from castable.errors import DatabaseNotFoundError, TableNotFoundError
from castable.format.layout import DATA_PREFIX, ICEBERG_PREFIX, POINTER_KEY, manifest_key
from castable.format.properties import DROPPED
from castable.inputs.orders import SortBy
from castable.inputs.partitions import PartitionBy
from castable.store import (
    ObjectNotFoundError,
    ObjectStore,
    PreconditionFailedError,
    canonical_location,
    store_from_uri,
)
from castable.store.threads import shared_pool
from castable.table import Table, handle_of
from castable.tables import create_table_at, is_dropped, load_table, mark_dropped, unmark_dropped

Namespace = tuple[str, ...]
MARKER = "_namespace.json"
"""The object that makes an empty folder a namespace and holds its properties."""
DATABASE = "castable.database"
"""The namespace property that, set to ``true`` at creation, makes the namespace a castable database."""
ENGINES = (DATA_PREFIX.rstrip("/"), ICEBERG_PREFIX.rstrip("/"))
"""The folders an Iceberg engine writes into before the commit that creates its table (a staged create)."""
_HEADS = 16


def _own_table(store: ObjectStore, dropped: bool = False) -> Table | None:
    """The table in folder ``store``, if one is there (with ``dropped``, one dropped too)."""
    try:
        return load_table(store, dropped=dropped)
    except TableNotFoundError:
        return None


def _named_folders(store: ObjectStore) -> dict[str, str]:
    """The folders directly in ``store`` that hold a name (:mod:`castable.catalog.names`),
    each with the name it holds."""
    return {f: name for f in store.folders() if (name := name_of(f)) is not None}


def _listed(store: ObjectStore) -> bool:
    """Whether folder ``store`` holds a table a listing shows: one that is not dropped."""
    return holds_table(store) and not is_dropped(store)


class Warehouse:
    """The namespaces and tables under ``root``; with ``tops``, only the top-level namespaces
    named there, which always exist (a deployment's ``tables`` and ``databases`` folders: its
    roles may read nothing else of the bucket)."""

    def __init__(self, root: ObjectStore, tops: Sequence[str] | None = None) -> None:
        self.root = root
        self.tops = None if tops is None else tuple(tops)

    @classmethod
    def at(
        cls, uri: str, storage_options: Mapping[str, Any] | None = None, tops: Sequence[str] | None = None
    ) -> Warehouse:
        """The warehouse at ``uri`` (a directory, ``file://`` or ``s3://bucket/prefix`` URI)."""
        return cls(store_from_uri(uri, storage_options), tops)

    # ---------------------------------------------------------------- namespaces

    def folder(self, namespace: Namespace) -> ObjectStore:
        """The store of ``namespace``'s folder (whether or not it exists)."""
        if not namespace:
            raise BadRequestError("a namespace has at least one level")
        if len(namespace) > MAX_LEVELS:
            raise BadRequestError(
                f"a namespace has at most {MAX_LEVELS} levels, and {'.'.join(namespace)[:200]} has {len(namespace)}"
            )
        if self.tops is not None and namespace[0] not in self.tops:
            raise NoSuchNamespaceError(
                f"namespace {'.'.join(namespace)} does not exist: this catalog's namespaces are "
                f"{', '.join(self.tops)} and those under them"
            )
        store = self.root
        for folder in folder_path(namespace):
            store = store.child(folder)
        return store

    def namespaces(self, parent: Namespace = ()) -> list[Namespace]:
        """The namespaces directly under ``parent`` (the top level for ``()``)."""
        if not parent and self.tops is not None:
            return [(top,) for top in self.tops]
        if parent:
            self.properties(parent)  # 404 for a parent that is not a namespace
            if self.database(parent) is not None:
                return []
        store = self.folder(parent) if parent else self.root
        named = _named_folders(store)
        with ThreadPoolExecutor(_HEADS) as pool:
            tables = list(pool.map(lambda f: holds_table(store.child(f)), named))
        return [(*parent, n) for n, table in zip(named.values(), tables, strict=True) if not table]

    def properties(self, namespace: Namespace) -> dict[str, str]:
        """``namespace``'s properties; ``NoSuchNamespaceError`` if it is not one."""
        store = self.folder(namespace)
        try:
            doc = json.loads(store.get(MARKER).data)
            return {str(k): str(v) for k, v in doc.get("properties", {}).items()}
        except ObjectNotFoundError:
            pass
        if len(namespace) == 1 and self.tops is not None:
            return {}
        if len(namespace) > 1:
            self.properties(namespace[:-1])  # a folder is a namespace only inside one (not in a table)
        parent = self.folder(namespace[:-1]) if len(namespace) > 1 else self.root
        if namespace[-1] not in parent.folders() or holds_table(store):
            raise NoSuchNamespaceError(f"namespace {'.'.join(namespace)} does not exist")
        return {DATABASE: "true"} if self.database(namespace) is not None else {}

    def create_namespace(self, namespace: Namespace, properties: Mapping[str, str]) -> dict[str, str]:
        """Make ``namespace``, a castable database when ``castable.database`` is ``true``."""
        store = self.folder(namespace)
        if len(namespace) == 1 and self.tops is not None:
            raise AlreadyExistsError(f"namespace {namespace[0]} already exists")
        if namespace[:-1]:
            self.properties(namespace[:-1])
            if self.database(namespace[:-1]) is not None:
                raise BadRequestError(f"namespace {'.'.join(namespace[:-1])} is a database: it holds tables only")
        if holds_table(store):
            raise AlreadyExistsError(f"{'.'.join(namespace)} is a table")
        wanted = {str(k): str(v) for k, v in properties.items()}
        database = wanted.get(DATABASE, "false").lower()
        if database not in ("true", "false"):
            raise BadRequestError(f"{DATABASE} is true or false, not {wanted[DATABASE]!r}")
        try:
            store.put(MARKER, json.dumps({"properties": wanted}).encode(), if_none_match=True)
        except PreconditionFailedError:
            raise AlreadyExistsError(f"namespace {'.'.join(namespace)} already exists") from None
        if database == "true":
            Database.create(store)
        return wanted

    def update_properties(
        self, namespace: Namespace, removals: list[str], updates: Mapping[str, str]
    ) -> tuple[list[str], list[str], list[str]]:
        """Set and remove properties of ``namespace``; the keys updated, removed and missing."""
        current = self.properties(namespace)
        if DATABASE in updates or DATABASE in removals:
            raise BadRequestError(f"{DATABASE} is set when a namespace is created, never after")
        missing = [k for k in removals if k not in current]
        merged = {k: v for k, v in current.items() if k not in removals} | {str(k): str(v) for k, v in updates.items()}
        self.folder(namespace).put(MARKER, json.dumps({"properties": merged}).encode())
        return sorted(updates), [k for k in removals if k in current], missing

    def drop_namespace(self, namespace: Namespace) -> None:
        """Remove an empty namespace (its marker, and its log if it is a database)."""
        self.properties(namespace)
        if len(namespace) == 1 and self.tops is not None:
            raise UnsupportedError(f"namespace {namespace[0]} is one of this catalog's own: it is not dropped")
        if self.tables(namespace) or self.namespaces(namespace):
            raise NamespaceNotEmptyError(f"namespace {'.'.join(namespace)} is not empty")
        store = self.folder(namespace)
        store.delete_many([info.key for info in store.list(f"{LOG_PREFIX}/")])
        store.delete(MARKER)

    def database(self, namespace: Namespace) -> Database | None:
        """The castable database ``namespace`` is, if it is one."""
        store = self.folder(namespace)
        if not holds_database(store):
            return None
        try:
            return Database.load(store)
        except DatabaseNotFoundError:
            return None

    # ---------------------------------------------------------------- tables

    def tables(self, namespace: Namespace) -> list[str]:
        """The names of the tables of ``namespace``."""
        self.properties(namespace)
        database = self.database(namespace)
        if database is not None:
            return database.tables()
        store = self.folder(namespace)
        named = _named_folders(store)
        with ThreadPoolExecutor(_HEADS) as pool:
            found = list(pool.map(lambda f: _listed(store.child(f)), named))
        return [n for n, table in zip(named.values(), found, strict=True) if table]

    def table(self, namespace: Namespace, name: str, *, dropped: bool = False) -> Table:
        """Table ``name`` of ``namespace`` at its newest version (with ``dropped``, also one
        dropped with its files kept). Whether the namespace is a database and the table in its
        folder are looked up at once (each is a round trip or two to an object store, and most
        requests start here); a table found is in a namespace, so the namespace is looked up
        only to tell which of the two is missing."""
        store = self.folder((*namespace, name))
        pool = shared_pool("catalog-lookups", 32)  # its tasks open a table or a database, never wait on it
        try:
            database = pool.submit(self.database, namespace)
            own = pool.submit(_own_table, store, dropped)  # not awaited for a database's table, read through it
            holder = database.result()
            found = holder.table(name) if holder is not None else own.result()
        except TableNotFoundError as e:
            self.properties(namespace)
            raise NoSuchTableError(str(e)) from e
        if found is None:
            self.properties(namespace)
            raise NoSuchTableError(f"no table {name!r} in namespace {'.'.join(namespace)}")
        return found

    def location(self, table: Namespace) -> str:
        """Where table ``table`` (its namespace, then its name) is, or would be."""
        return self.folder(table).uri.rstrip("/")

    def exists(self, namespace: Namespace, name: str) -> bool:
        try:
            self.table(namespace, name)
        except NoSuchTableError:
            return False
        return True

    def check_absent(self, namespace: Namespace, name: str) -> None:
        """``AlreadyExistsError`` unless a table ``name`` can be created in ``namespace``."""
        if self.exists(namespace, name):
            raise AlreadyExistsError(f"table {'.'.join((*namespace, name))} already exists")
        if is_dropped(self.folder((*namespace, name))):
            raise AlreadyExistsError(_dropped_there((*namespace, name)))

    def register(self, namespace: Namespace, name: str, metadata_location: str) -> Table:
        """Bring back table ``name`` of ``namespace``, dropped with its files kept, from the
        metadata a client kept of it (which must be under its own folder)."""
        location = self.location((*namespace, name))
        if not canonical_location(metadata_location).startswith(f"{location}/"):
            raise BadRequestError(
                f"{metadata_location} is not under {location}: castable registers its own dropped tables "
                "only (create a table and append, or castable add-files, for others)"
            )
        self.properties(namespace)
        store = self.folder((*namespace, name))
        table = _own_table(store, dropped=True)
        if table is None:
            raise BadRequestError(f"no castable table was dropped at {location}")
        if DROPPED not in table.properties and not is_dropped(store):
            raise AlreadyExistsError(f"table {'.'.join((*namespace, name))} already exists")
        return unmark_dropped(store)

    def create_table(
        self,
        namespace: Namespace,
        name: str,
        schema: pa.Schema,
        *,
        primary_key: list[str] | None,
        properties: Mapping[str, str],
        table_uuid: str | None = None,
        partition_by: PartitionBy | None = None,
        sort_by: SortBy | None = None,
    ) -> Table:
        """A new empty table ``name`` in ``namespace`` (in its database, if it is one), with
        the uuid a staged create announced, if any, partitioned by ``partition_by`` and sorted by ``sort_by``."""
        self.properties(namespace)
        key = None if not primary_key else primary_key[0] if len(primary_key) == 1 else primary_key
        database = self.database(namespace)
        if database is not None:
            return database.create_table(
                name,
                schema,
                primary_key=key,
                properties=properties,
                table_uuid=table_uuid,
                partition_by=partition_by,
                sort_by=sort_by,
            )
        store = self.folder((*namespace, name))
        if holds_table(store):
            dropped = is_dropped(store)
            raise AlreadyExistsError(
                _dropped_there((*namespace, name))
                if dropped
                else f"table {'.'.join((*namespace, name))} already exists"
            )
        if set(store.folders()) - set(ENGINES) or store.exists(MARKER):
            raise AlreadyExistsError(f"{'.'.join((*namespace, name))} is a namespace")
        return create_table_at(
            store,
            schema,
            primary_key=key,
            partition_by=partition_by,
            sort_by=sort_by,
            properties=properties,
            table_uuid=table_uuid,
            within=self.root,
        )

    def drop_table(self, namespace: Namespace, name: str, *, purge: bool) -> None:
        """Drop table ``name``. With ``purge``, delete every object of it (a database's table
        leaves the database in one database version first), dropped before or not; without,
        keep its files and mark it dropped (``castable.tables.mark_dropped``), so that it is
        no table until ``register`` brings it back. A database's table is dropped with purge only."""
        table = self.table(namespace, name, dropped=purge)
        if not purge:
            if isinstance(handle_of(table).committer, DatabaseLog):
                raise BadRequestError(
                    "a table of a castable database leaves it with its files: ask for a purge "
                    "(DROP TABLE ... PURGE, catalog.purge_table)"
                )
            mark_dropped(table)
            return
        committer = handle_of(table).committer
        if isinstance(committer, DatabaseLog):  # the table was read through its database
            Database(committer).drop_table(name)
            return
        store = table.store
        store.delete_many([POINTER_KEY, manifest_key(0)])  # no longer a table before its files go
        store.delete_many([info.key for info in store.list()])


def _dropped_there(table: Namespace) -> str:
    return (
        f"table {'.'.join(table)} was dropped with its files kept: register it to bring it back, "
        "or drop it with a purge before creating another"
    )
