"""The table commands (create, append, scan, erase, ...): thin layers over ``castable.Table`` and local files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import castable
from castable.cli.common import (
    AsJson,
    CommitId,
    Count,
    PartitionBy,
    PrimaryKey,
    Properties,
    SortBy,
    StorageOption,
    commands,
    committed,
    emit,
    open_table,
    parse_options,
    progress_bar,
    report_commit,
    spinner,
    start_commit,
)
from castable.errors import InvalidInputError
from castable.inputs.names import parse_names, parse_path, split_pair

if TYPE_CHECKING:
    import pyarrow as pa

    from castable.inputs.sources import CsvOptions, Source

# The commands import the library where they use it, so that --help and --version import none
# of it (pyarrow, the store, the commit protocol): they answer at once.
tables_app = commands()


def _read_source(path: Path, fmt: str | None, schema: pa.Schema | None = None, csv: CsvOptions | None = None) -> Source:
    """One input file (Parquet, CSV or JSON Lines), parsed with ``schema``'s types when given."""
    from castable.inputs.sources import format_of, open_source

    format_of(path.name, fmt)  # an unknown --format is named before a missing file
    if not path.exists():
        raise InvalidInputError(f"{path} does not exist")
    return open_source(str(path), path.name, fmt=fmt, schema=schema, csv=csv)


@tables_app.command()
def create(
    uri: str,
    schema: Annotated[
        str | None,
        typer.Option(help="NAME:TYPE,... e.g. 'id:int64, at:timestamp[us, tz=UTC], amount:decimal128(10, 2)'."),
    ] = None,
    like: Annotated[Path | None, typer.Option(help="Take the schema of this Parquet or CSV file.")] = None,
    primary_key: PrimaryKey = None,
    partition_by: PartitionBy = None,
    sort_by: SortBy = None,
    prop: Properties = None,
    format_version: Annotated[
        int | None,
        typer.Option(
            help="2 (segmented manifests), or 1 for readers older than castable 0.2 [default: the latest]",
            show_default=False,
        ),
    ] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Create an empty table (not inside another table's location, nor above one)."""
    from castable.format.manifest import LATEST_FORMAT_VERSION
    from castable.inputs.types import parse_schema

    if (schema is None) == (like is None):
        raise InvalidInputError("give exactly one of --schema and --like")
    arrow_schema = parse_schema(schema) if schema else _read_source(like, None).schema  # type: ignore[arg-type]
    table = castable.create_table(
        uri,
        arrow_schema,
        primary_key=primary_key,
        partition_by=partition_by,
        sort_by=sort_by,
        properties=parse_options(prop),
        storage_options=parse_options(storage_option),
        format_version=LATEST_FORMAT_VERSION if format_version is None else format_version,
    )
    emit(as_json, f"created {table.uri} (version {table.version})", {"uri": table.uri, "version": table.version})


InputFiles = Annotated[list[Path], typer.Argument(help="Parquet, CSV or JSON Lines files (.gz too), in one commit.")]
InputFormat = Annotated[
    str | None,
    typer.Option("--format", metavar="FORMAT", help="parquet, csv or jsonl [default: by extension]"),
]
Delimiter = Annotated[str | None, typer.Option(help="CSV delimiter (default: tab for .tsv, else comma).")]
Header = Annotated[bool, typer.Option(help="CSV files start with a header naming the columns.")]
NullValue = Annotated[
    list[str] | None, typer.Option(help="A CSV value read as NULL (repeatable; default: empty, NULL, null).")
]


def _inputs(
    table: castable.Table,
    files: list[Path],
    fmt: str | None,
    delimiter: str | None,
    header: bool,
    nulls: list[str] | None,
    extra: list[pa.Field] | None = None,
) -> tuple[Iterator[pa.RecordBatch], int | None]:
    """The rows of local files, read as the table's types and ``extra`` columns (every file is
    opened, so checked, first), and their count when the formats tell it up front."""
    import pyarrow as pa

    from castable.inputs.sources import CsvOptions

    csv = CsvOptions(delimiter, header, tuple(nulls) if nulls else CsvOptions.null_values)
    schema = pa.schema([*table.schema, *(extra or [])])
    opened = [_read_source(p, fmt, schema, csv) for p in files]
    counts = [s.rows for s in opened]
    total = None if None in counts else sum(c for c in counts if c is not None)
    return (batch for source in opened for batch in source.batches), total


@tables_app.command()
def append(
    uri: str,
    files: InputFiles,
    fmt: InputFormat = None,
    delimiter: Delimiter = None,
    header: Header = True,
    null_value: NullValue = None,
    schema_mode: Annotated[
        str, typer.Option(help="strict: columns must match; merge: add the files' new columns (Parquet).")
    ] = "strict",
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Append the rows of local files in one commit; CSV and JSON are read as the table's types."""
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    if schema_mode not in ("strict", "merge"):
        raise InvalidInputError(f"--schema-mode must be strict or merge, not {schema_mode!r}")
    batches, total = _inputs(table, files, fmt, delimiter, header, null_value)
    with progress_bar(as_json) as progress:
        task = progress.add_task("appending rows", total=total)
        result = table.append(
            batches,
            commit_id=commit_id,
            on_rows=lambda n: progress.advance(task, n),
            schema_mode="merge" if schema_mode == "merge" else "strict",
        )
    report_commit(result, as_json)


@tables_app.command()
def upsert(
    uri: str,
    files: InputFiles,
    fmt: InputFormat = None,
    delimiter: Delimiter = None,
    header: Header = True,
    null_value: NullValue = None,
    op_column: Annotated[
        str | None,
        typer.Option(
            help="The files are a change feed: this column holds each row's operation (d or delete: delete the key)."
        ),
    ] = None,
    last_wins: Annotated[
        bool, typer.Option(help="A key may appear more than once: its last row counts (files in the order given).")
    ] = False,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    count: Count = False,
    as_json: AsJson = False,
) -> None:
    """Insert the rows of local files, replacing the rows with their primary keys, in one commit."""
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    import pyarrow as pa

    extra = None if op_column is None else [pa.field(op_column, pa.string())]
    batches, _ = _inputs(table, files, fmt, delimiter, header, null_value, extra)
    report_commit(
        table.upsert(batches, op_column=op_column, last_wins=last_wins, commit_id=commit_id, count=count), as_json
    )


@tables_app.command()
def overwrite(
    uri: str,
    files: InputFiles,
    where: Annotated[
        str | None, typer.Option(help="Replace only the rows matching this SQL predicate (the new rows must match).")
    ] = None,
    fmt: InputFormat = None,
    delimiter: Delimiter = None,
    header: Header = True,
    null_value: NullValue = None,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    count: Count = False,
    as_json: AsJson = False,
) -> None:
    """Replace the whole table, or the rows matching --where, with the rows of local files, in one commit."""
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    batches, _ = _inputs(table, files, fmt, delimiter, header, null_value)
    report_commit(table.overwrite(batches, where=where, commit_id=commit_id, count=count), as_json)


@tables_app.command()
def update(
    uri: str,
    assignments: Annotated[
        list[str],
        typer.Argument(
            help='column=SQL expression, e.g. "status=\'closed\'" or "amount=amount * 1.1".', show_default=False
        ),
    ],
    where: Annotated[str | None, typer.Option(help="Change only the rows matching this SQL predicate.")] = None,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Set columns of the rows matching --where (every row without it) to SQL expressions of their old values."""
    values = {}
    for item in assignments:
        try:
            column, expression = split_pair(item, "=", "column=expression")
        except InvalidInputError as e:
            raise InvalidInputError(f"write each change as column=expression: {e}") from None
        values[column] = expression
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    report_commit(table.update(values, where=where, commit_id=commit_id), as_json)


@tables_app.command("add-files")
def add_files(
    uri: str,
    paths: Annotated[
        list[str],
        typer.Argument(help="Parquet files already written under the table's data/ prefix: data/... or full URIs."),
    ],
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Register Parquet files another engine wrote under the table's data/ prefix, as one append.

    Only footers are read; nothing is copied. To load files from elsewhere, use append.
    """
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    report_commit(table.add_files(paths, commit_id=commit_id), as_json)


@tables_app.command()
def delete(
    uri: str,
    predicate: Annotated[str, typer.Argument(help='SQL predicate, e.g. "id BETWEEN 10 AND 20".')],
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    count: Count = False,
    as_json: AsJson = False,
) -> None:
    """Soft-delete the rows matching a SQL predicate (one tombstone file)."""
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    report_commit(table.delete(predicate, commit_id=commit_id, count=count), as_json)


@tables_app.command()
def erase(
    uri: str,
    predicate: Annotated[str, typer.Argument(help="SQL predicate of the rows to remove physically.")],
    mode: Annotated[str, typer.Option(help="auto, splice (server-side row-group splice) or rewrite.")] = "auto",
    purge: Annotated[
        bool,
        typer.Option(help="Also expire every earlier version, delete the old objects and verify (asks first)."),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Purge without asking.")] = False,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Physically remove rows (hard delete) and say what was erased, expired and deleted
    (--json: the report, every object named)."""
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    if purge and not yes:
        _confirm_purge(table, predicate)
    with spinner("erasing", as_json):
        report = table.erase(predicate, commit_id=commit_id, mode=mode, purge=purge)  # type: ignore[arg-type]
    committed(report.version)
    emit(as_json, report.described(), report.summary())


def _confirm_purge(table: castable.Table, predicate: str) -> None:
    """Ask before an erase's purge expires history: when it erases anything, the purge expires
    every retained version before the erase (each lists a file the erase replaces)."""
    from castable.maintenance.gc import retained_versions

    if table.scan(filter=predicate).count() == 0:
        return
    first, last = retained_versions(table.store)[0], table.version
    span = f"version {first}" if first == last else f"versions {first}-{last}"
    typer.confirm(
        f"--purge expires {span} of {table.uri}: time travel and the change feed will start at the "
        "erase's own version. Erase and purge?",
        abort=True,
    )


@tables_app.command()
def restore(
    uri: str,
    version: Annotated[int | None, typer.Argument(help="The version to restore.")] = None,
    as_of: Annotated[str | None, typer.Option(help="Restore the version current at this ISO 8601 time.")] = None,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Commit a new version with an older version's files (no data copied; later versions stay in history)."""
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    report_commit(table.restore(version, as_of=as_of, commit_id=commit_id), as_json)


def _pairs(items: list[str] | None, sep: str, what: str) -> list[tuple[str, str]]:
    shape = "NAME" + sep + ("TYPE" if sep == ":" else "NEW") + ' (a name with "quotes" if it holds ' + sep + ")"
    out = []
    for item in items or []:
        try:
            out.append(split_pair(item, sep, shape))
        except InvalidInputError as e:
            raise InvalidInputError(f"{what} {e}") from None
    return out


def _path(text: str, what: str) -> str | tuple[str, ...]:
    """A column, or a field inside one (``payload.user``), as ``--drop`` and the like name it."""
    path, end = parse_path(text)
    if text[end:].strip():
        raise InvalidInputError(f"{what} {text!r} is not a column or field name (quote a name that holds a '.')")
    return path


def _paths(items: list[str] | None, sep: str, what: str, shape: str) -> list[tuple[str | tuple[str, ...], str]]:
    """``PATH<sep>REST`` items: a column or a field inside one (``payload.user``), then the rest."""
    out = []
    for item in items or []:
        path, end = parse_path(item, sep)
        rest = item[end:].lstrip()
        if not rest.startswith(sep) or not rest[len(sep) :].strip():
            raise InvalidInputError(f"{what} {item!r} is not {shape} (quote a name that holds {sep!r} or '.')")
        out.append((path, rest[len(sep) :].strip()))
    return out


@tables_app.command()
def alter(
    uri: str,
    add: Annotated[list[str] | None, typer.Option(help="NAME:TYPE: add a nullable column (repeatable).")] = None,
    default: Annotated[
        list[str] | None, typer.Option(help="NAME=VALUE: what rows written before an added column read as.")
    ] = None,
    rename: Annotated[list[str] | None, typer.Option(help="OLD=NEW: rename a column (repeatable).")] = None,
    widen: Annotated[list[str] | None, typer.Option(help="NAME:TYPE: widen a column's type (repeatable).")] = None,
    nullable: Annotated[list[str] | None, typer.Option(help="NAME: let a column hold NULLs (repeatable).")] = None,
    drop: Annotated[list[str] | None, typer.Option(help="NAME: drop a column (repeatable).")] = None,
    order: Annotated[str | None, typer.Option(help="A,B,...: put these columns first, in this order.")] = None,
    primary_key: PrimaryKey = None,
    drop_primary_key: Annotated[
        bool, typer.Option("--drop-primary-key", help="The table has no primary key any more.")
    ] = False,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Change the schema in one commit, writing no data (a new primary key reads its column).

    Changes apply in this order: add, rename, widen, nullable, drop, order, primary key.
    """
    import pyarrow as pa

    from castable.inputs.types import parse_type

    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    defaults = dict(_pairs(default, "=", "--default"))
    update = table.alter(commit_id=commit_id)
    for name, spec in _paths(add, ":", "--add", "NAME:TYPE"):
        t = parse_type(spec)
        value = defaults.pop(name, None) if isinstance(name, str) else None
        update.add_column(name, t, default=None if value is None else pa.array([value]).cast(t)[0].as_py())
    if defaults:
        raise InvalidInputError(f"--default names columns that --add does not add: {sorted(defaults)}")
    for old, new in _paths(rename, "=", "--rename", "OLD=NEW"):
        update.rename_column(old, new)
    for name, spec in _paths(widen, ":", "--widen", "NAME:TYPE"):
        update.widen_column(name, parse_type(spec))
    for name in nullable or []:
        update.make_nullable(_path(name, "--nullable"))
    for name in drop or []:
        update.drop_column(_path(name, "--drop"))
    if order:
        update.reorder(parse_names(order))
    if primary_key is not None and drop_primary_key:
        raise InvalidInputError("--primary-key and --drop-primary-key: give one of them")
    if primary_key is not None:
        update.set_primary_key(primary_key)
    if drop_primary_key:
        update.drop_primary_key()
    report_commit(update.commit(), as_json)


@tables_app.command()
def upgrade(
    uri: str,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Rewrite a format-version-1 table in the latest format, in one commit (no data copied)."""
    from castable.format.manifest import LATEST_FORMAT_VERSION

    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    if table.manifest.format_version == LATEST_FORMAT_VERSION:
        doc: dict[str, Any] = {"version": table.version, "committed": False, "format_version": LATEST_FORMAT_VERSION}
        emit(as_json, f"{table.uri} is already in format version {LATEST_FORMAT_VERSION}; nothing to do", doc)
        return
    report_commit(table.upgrade(commit_id=commit_id), as_json)


@tables_app.command("partition-by")
def partition_by(
    uri: str,
    field: Annotated[
        list[str] | None,
        typer.Argument(
            help="Partition fields: day(ts), bucket(16, id), truncate(4, name), region, ...", show_default=False
        ),
    ] = None,
    unpartitioned: Annotated[bool, typer.Option(help="Write new files unpartitioned.")] = False,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Partition the files written from now on by new fields, in one commit; no data is rewritten
    (older files keep their partitioning, and scans prune each by its own)."""
    if bool(field) == unpartitioned:
        raise InvalidInputError("give partition fields, or --unpartitioned (one of them)")
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    report_commit(table.partition_by(field or [], commit_id=commit_id), as_json)


@tables_app.command("sort-by")
def sort_by(
    uri: str,
    field: Annotated[
        list[str] | None,
        typer.Argument(
            help="Sort fields: ts, 'id DESC', 'name ASC NULLS LAST', 'day(ts) DESC', ...", show_default=False
        ),
    ] = None,
    unsorted: Annotated[bool, typer.Option(help="Write new files unsorted.")] = False,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Sort the rows of the files written from now on (compaction included), in one commit; no
    data is rewritten."""
    if bool(field) == unsorted:
        raise InvalidInputError("give sort fields, or --unsorted (one of them)")
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    report_commit(table.sort_by(field or [], commit_id=commit_id), as_json)


@tables_app.command("set-properties")
def set_properties(
    uri: str,
    setting: Annotated[
        list[str], typer.Argument(help="NAME=VALUE (publish.iceberg=true, write.inline.max-bytes=0, ...).")
    ],
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Set table properties in one commit (the others keep their values); no data is touched."""
    table = open_table(uri, storage_option)
    commit_id = start_commit(table, commit_id, as_json)
    if commit_id is None:
        return
    report_commit(table.set_properties(dict(_pairs(setting, "=", "NAME=VALUE")), commit_id=commit_id), as_json)
