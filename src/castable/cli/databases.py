"""``castable db``: databases on the command line; a member table is also a plain table (<db>/<name>) to the rest."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table as RichTable

import castable
from castable.cli.common import (
    AsJson,
    CommitId,
    PrimaryKey,
    Properties,
    StorageOption,
    commands,
    console,
    dumps,
    emit,
    parse_options,
)
from castable.cli.reads import show_changes
from castable.inputs.names import parse_names

db_app = commands(help="Databases: several tables, one commit point, one snapshot.", no_args_is_help=True)


def _open_db(uri: str, options: list[str] | None) -> castable.Database:
    return castable.open_database(uri, storage_options=parse_options(options))


@db_app.command("create")
def create(uri: str, storage_option: StorageOption = None, as_json: AsJson = False) -> None:
    """Create an empty database (a prefix that holds tables and their one log)."""
    db = castable.create_database(uri, storage_options=parse_options(storage_option))
    emit(as_json, f"created database {db.uri} (version {db.version})", {"uri": db.uri, "version": db.version})


@db_app.command("create-table")
def create_table(
    uri: str,
    name: str,
    schema: Annotated[str, typer.Option(help="NAME:TYPE,... e.g. 'id:int64, amount:decimal128(10, 2)'.")],
    primary_key: PrimaryKey = None,
    prop: Properties = None,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Add an empty table to the database (read and write it as <uri>/<name>)."""
    from castable.inputs.types import parse_schema

    db = _open_db(uri, storage_option)
    table = db.create_table(
        name, parse_schema(schema), primary_key=primary_key, properties=parse_options(prop), commit_id=commit_id
    )
    doc = {"uri": table.uri, "database_version": db.version, "version": table.version}
    emit(as_json, f"created table {table.uri} in database version {db.version}", doc)


@db_app.command("drop-table")
def drop_table(
    uri: str,
    name: str,
    yes: Annotated[bool, typer.Option("--yes", help="Drop without asking: its files are deleted.")] = False,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Remove a table from the database in one database version and delete its files (older
    database versions no longer read it)."""
    db = _open_db(uri, storage_option)
    if not yes:
        typer.confirm(f"Drop table {name} of {db.uri} and delete its files?", abort=True)
    version = db.drop_table(name, commit_id=commit_id)
    emit(as_json, f"dropped table {name} in database version {version}", {"table": name, "database_version": version})


@db_app.command("tables")
def tables(uri: str, storage_option: StorageOption = None, as_json: AsJson = False) -> None:
    """List the tables with their versions at the newest database version."""
    snap = _open_db(uri, storage_option).snapshot()
    if as_json:
        console.print(dumps({"version": snap.version, "tables": snap.tables}))
        return
    shown = RichTable("table", "version", title=f"{snap.database.uri} at database version {snap.version}")
    for name, version in snap.tables.items():
        shown.add_row(name, str(version))
    console.print(shown)


@db_app.command("history")
def history(
    uri: str,
    limit: Annotated[int | None, typer.Option(help="Most recent commits to show.")] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """List the database's commits, newest first, with what each did to each table."""
    db = _open_db(uri, storage_option)
    entries = db.history(limit=limit)
    if as_json:
        docs = [
            {
                "version": h.version,
                "timestamp": h.timestamp,
                "operation": h.operation,
                "commit_id": h.commit_id,
                "tables": h.tables,
            }
            for h in entries
        ]
        console.print(dumps(docs))
        return
    shown = RichTable("version", "time", "operation", "commit_id", "tables", title=db.uri)
    for h in entries:
        shown.add_row(str(h.version), h.timestamp.isoformat(), h.operation, h.commit_id, dumps(h.tables))
    console.print(shown)


@db_app.command("snapshot")
def snapshot(
    uri: str,
    version: Annotated[int | None, typer.Option(help="Database version to describe.")] = None,
    as_of: Annotated[str | None, typer.Option(help="Describe the version current at this ISO 8601 time.")] = None,
    count: Annotated[bool, typer.Option("--count", help="Also count each table's live rows.")] = False,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Every table's version at one database version (the newest, --version or --as-of)."""
    snap = _open_db(uri, storage_option).snapshot(version, as_of)
    rows = {name: snap.table(name).count() for name in snap.tables} if count else {}
    if as_json:
        doc = {"version": snap.version, "created_at": snap.created_at, "tables": snap.tables}
        if count:
            doc["rows"] = rows
        console.print(dumps(doc))
        return
    title = f"{snap.database.uri} at database version {snap.version} ({snap.created_at.isoformat()})"
    shown = RichTable("table", "version", *(["rows"] if count else []), title=title)
    for name, table_version in snap.tables.items():
        shown.add_row(name, str(table_version), *([f"{rows[name]:,}"] if count else []))
    console.print(shown)


@db_app.command("changes")
def changes(
    uri: str,
    table: str,
    start: Annotated[int, typer.Option("--from", help="First database version whose changes to read.")],
    end: Annotated[int | None, typer.Option("--to", help="Last database version (default: the newest).")] = None,
    columns: Annotated[str | None, typer.Option(help="Comma-separated columns.")] = None,
    filter: Annotated[str | None, typer.Option("--filter", "-f", help="SQL predicate.")] = None,
    limit: Annotated[int, typer.Option(help="Rows to print as a table or --json (ignored otherwise).")] = 20,
    output: Annotated[str | None, typer.Option(help="Write every change to a file, or to stdout with '-'.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json (JSON Lines), csv or parquet.")] = "table",
    count: Annotated[bool, typer.Option("--count", help="Print only the number of change rows.")] = False,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Row changes of one table committed in database versions --from..--to, numbered by database version."""
    db = _open_db(uri, storage_option)
    cols = parse_names(columns) if columns else None
    s = db.changes(table, start, end, columns=cols, filter=filter)
    show_changes(s, f"{db.uri}/{table}", count=count, output=output, fmt=fmt, limit=limit, as_json=as_json)
