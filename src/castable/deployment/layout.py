"""The layout a deployment gives its bucket, and what it finds there: tables under ``tables/``,
databases under ``databases/``, files for either landing under ``landing/<name>/`` (and those it
cannot ingest moved under ``landing-failed/``).

A table of the deployment is known by its key: its name for ``tables/<name>``, ``<db>/<member>``
for the member of the database ``databases/<db>``. :func:`table_object` reads an object's key in
the bucket (as an S3 event gives it) as the table it belongs to and where in it; :func:`table_uri`
is where the table of a key lives. One place, so the functions that act on S3 events and those
that list the bucket agree on which table an object is of.

A deployment's tables are data, not infrastructure: its shared functions find them by listing
these prefixes, and read how to serve each (ingest mode, maintenance schedule, retention) from
the table's own properties. So a table created by any writer is served at once, and a dropped
one is skipped, with no deploy between.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from castable.commit.create import holds_database, holds_table
from castable.commit.dblog import LOG_PREFIX, NAME
from castable.database import Database
from castable.deployment.schedules import latest
from castable.errors import CastableError, InvalidInputError
from castable.format.properties import TableProperties
from castable.store import ObjectStore
from castable.table import Table
from castable.tables import load_table

TABLES = "tables"
DATABASES = "databases"
LANDING = "landing"
FAILED_LANDING_PREFIX = "landing-failed/"
"""Where the ingest function moves a landed file it can never append (``landing-failed/landing/<name>/...``),
a ``.reason.json`` beside it."""
MAINTENANCE_DUE_PREFIX = "maintenance-due/"
"""Where a deployment keeps its lists of tables due for maintenance (one a run of its schedule)."""
READERS = 32
"""Tables read at once while finding them: each is a pointer and a manifest GET, so 10,000 tables
take about 300 sequential round trips."""


@dataclass(frozen=True)
class TableObject:
    """An object of one of the deployment's tables, placed by its key in the bucket:
    ``tables/<name>/<path>``, or ``databases/<db>/<member>/<path>`` in a database."""

    bucket: str
    table: str
    """The table's key: its name, or ``<db>/<member>`` for a member of a database."""
    path: str
    """The object's key under the table's root: ``tombstone/2026/11/23/01/<uuid>.del``,
    ``manifest/v00000000000000000001.json``, ``_latest_manifest``."""

    @property
    def uri(self) -> str:
        """The table's ``s3://`` URI."""
        return table_uri(self.bucket, self.table)

    @property
    def folder(self) -> str:
        """The folder of the table the object is in, spelled as the table's layout spells its
        prefixes (``tombstone/``, ``manifest/``, ``data/``: ``castable.format.layout``); ``""``
        for an object at the table's root (its pointer)."""
        folder, slash, _ = self.path.partition("/")
        return f"{folder}/" if slash else ""

    @property
    def name(self) -> str:
        """The object's key under its folder: ``v00000000000000000001.json``, ``2026/11/23/01/<uuid>.del``."""
        return self.path.removeprefix(self.folder)


def _is_table_key(table: str) -> bool:
    """Whether ``table`` is a table's key: one path segment (a table under ``tables/``), or a
    database's and a member's name (``<db>/<member>``; a member's name never starts with ``_``,
    so the database's own log, ``_database``, is none). A segment is never empty, ``.`` nor ``..``."""
    parts = table.split("/")
    if len(parts) > 2 or any(p in ("", ".", "..") for p in parts):
        return False
    return len(parts) == 1 or (parts[1] != LOG_PREFIX and NAME.fullmatch(parts[1]) is not None)


def table_path(table: str) -> str:
    """Where the table of key ``table`` (a name, or ``<db>/<member>``) lives in the deployment's
    bucket: ``tables/<name>``, or ``databases/<db>/<member>``."""
    if not _is_table_key(table):
        raise InvalidInputError(f"{table!r} is not a deployment's table: give a name, or <database>/<member>")
    return f"{DATABASES if '/' in table else TABLES}/{table}"


def table_uri(bucket: str, table: str) -> str:
    """The ``s3://`` URI of the table of key ``table`` (a name, or ``<db>/<member>``) in ``bucket``."""
    return f"s3://{bucket}/{table_path(table)}"


def table_object(bucket: str, key: str) -> TableObject | None:
    """The table of the deployment's ``bucket`` that the object at ``key`` belongs to, and where
    in it; ``None`` for a key that is no table's object: one outside ``tables/<name>/`` and
    ``databases/<db>/<member>/``, one in a database's own log (``databases/<db>/_database/``) or
    under a folder no member can have, one whose table part has an empty segment (a doubled
    slash) or ``.`` or ``..``, and a table's folder itself (``tables/<name>/``). The key is taken
    byte for byte: nothing is URL-decoded (the keys of a table's objects, which castable names,
    hold no character an encoding changes)."""
    root, _, rest = key.partition("/")
    depth = {TABLES: 1, DATABASES: 2}.get(root)
    if depth is None:
        return None
    parts = rest.split("/", depth)
    if len(parts) <= depth or not parts[depth]:
        return None
    table = "/".join(parts[:depth])
    return TableObject(bucket, table, parts[depth]) if _is_table_key(table) else None


@dataclass(frozen=True)
class Served:
    """A table of the deployment: ``key`` is its name, or ``<db>/<member>`` in a database."""

    key: str
    uri: str
    properties: TableProperties

    def due(self, start: datetime, end: datetime) -> datetime | None:
        """When in ``(start, end]`` the table's maintenance schedule last fell due, if it did."""
        schedule = self.properties.maintenance_schedule
        return None if schedule is None else latest(schedule, self.key, start, end)


@dataclass(frozen=True)
class Landing:
    """What ``landing/<name>/`` feeds: the table ``tables/<name>``, or the database ``databases/<name>``."""

    name: str
    table: Table | None
    database: Database | None


def served_tables(bucket: ObjectStore) -> Iterator[Served]:
    """Every table under ``bucket``'s ``tables/`` and every member of each database under its
    ``databases/``, with its properties; folders that hold no table (a create that has not
    committed, a table dropped meanwhile) are skipped. Listed a level at a time (1,000 names a
    request) and read ``READERS`` at once."""
    tables, databases = bucket.child(TABLES), bucket.child(DATABASES)
    with ThreadPoolExecutor(READERS) as pool:
        found = pool.map(lambda name: _table(tables, name), tables.folders())
        yield from (served for served in found if served is not None)
        for members in pool.map(lambda name: _members(databases, name), databases.folders()):
            yield from (Served(key, table.uri, table.settings) for key, table in members)


def _table(tables: ObjectStore, name: str) -> Served | None:
    store = tables.child(name)
    try:
        table = load_table(store)
    except CastableError:
        return None
    return Served(name, table.uri, table.settings)


def _members(databases: ObjectStore, name: str) -> list[tuple[str, Table]]:
    try:
        database = Database.load(databases.child(name))
        return [(f"{name}/{member}", database.table(member)) for member in database.tables()]
    except CastableError:
        return []


def landing(bucket: ObjectStore, name: str) -> Landing | None:
    """What files landing under ``landing/<name>/`` of ``bucket`` go into, or ``None`` if neither
    a table nor a database has that name. A table wins over a database of the same name."""
    table_store, database_store = bucket.child(TABLES).child(name), bucket.child(DATABASES).child(name)
    if holds_table(table_store):
        return Landing(name, load_table(table_store), None)
    if holds_database(database_store):
        return Landing(name, None, Database.load(database_store))
    return None


def landing_name(key: str) -> str | None:
    """The table or database a key under ``landing/<name>/`` lands for, or ``None`` for any other
    key (one outside ``landing/``, or whose name is not a castable name, such as ``..``)."""
    parts = key.split("/")
    if len(parts) < 3 or parts[0] != LANDING or not NAME.fullmatch(parts[1]) or ".." in parts:
        return None
    return parts[1]
