"""The table commands (create, append, scan, erase, ...): thin layers over ``castable.Table`` and local files."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, Annotated, Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import typer
from rich.table import Table as RichTable
from rich.text import Text

import castable
from castable.cli.common import (
    AsJson,
    CommitId,
    StorageOption,
    console,
    dumps,
    emit,
    err_console,
    parse_options,
    progress_bar,
    spinner,
)
from castable.errors import InvalidInputError
from castable.format.evolution import field_id
from castable.format.manifest import LATEST_FORMAT_VERSION
from castable.inputs.sources import CsvOptions, Source, format_of, json_rows, open_source, to_json_lines
from castable.inputs.types import parse_schema, parse_type
from castable.read.changes import ChangeScan
from castable.read.results import ArrowResult

tables_app = typer.Typer()


def _already(table: castable.Table, commit_id: str | None, as_json: bool) -> bool:
    """Report and return True when ``commit_id`` was committed before: the write would commit nothing."""
    done = None if commit_id is None else table.committed_version(commit_id)
    if done is None:
        return False
    text = f"commit id {commit_id!r} was already committed as version {done}; nothing was written"
    emit(as_json, text, {"version": done, "committed": False, "already_committed": True, "commit_id": commit_id})
    return True


def _committed(table: castable.Table, version: int, as_json: bool) -> None:
    summary = table.manifest_at(version).commit.summary
    doc = {"version": version, "committed": True, "already_committed": False, "summary": summary}
    emit(as_json, f"committed version {version}: {dumps(summary)}", doc)


def _open(uri: str, options: list[str] | None) -> castable.Table:
    return castable.open_table(uri, storage_options=parse_options(options))


def _read_source(path: Path, fmt: str | None, schema: pa.Schema | None = None, csv: CsvOptions | None = None) -> Source:
    """One input file (Parquet, CSV or JSON Lines), parsed with ``schema``'s types when given."""
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
    primary_key: Annotated[str | None, typer.Option("--primary-key", "-k")] = None,
    prop: Annotated[list[str] | None, typer.Option("--property", "-p", help="KEY=VALUE table property.")] = None,
    format_version: Annotated[
        int, typer.Option(help="2 (segmented manifests), or 1 for readers older than castable 0.2.")
    ] = LATEST_FORMAT_VERSION,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Create an empty table (not inside another table's location, nor above one)."""
    if (schema is None) == (like is None):
        raise InvalidInputError("give exactly one of --schema and --like")
    arrow_schema = parse_schema(schema) if schema else _read_source(like, None).schema  # type: ignore[arg-type]
    table = castable.create_table(
        uri,
        arrow_schema,
        primary_key=primary_key,
        properties=parse_options(prop),
        storage_options=parse_options(storage_option),
        format_version=format_version,
    )
    emit(as_json, f"created {table.uri} (version {table.version})", {"uri": table.uri, "version": table.version})


InputFiles = Annotated[list[Path], typer.Argument(help="Parquet, CSV or JSON Lines files (.gz too), in one commit.")]
InputFormat = Annotated[str | None, typer.Option("--format", help="parquet, csv or jsonl (default: by extension).")]
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
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    if schema_mode not in ("strict", "merge"):
        raise InvalidInputError(f"--schema-mode must be strict or merge, not {schema_mode!r}")
    batches, total = _inputs(table, files, fmt, delimiter, header, null_value)
    with progress_bar() as progress:
        task = progress.add_task("appending rows", total=total)
        version = table.append(
            batches,
            commit_id=commit_id,
            on_rows=lambda n: progress.advance(task, n),
            schema_mode="merge" if schema_mode == "merge" else "strict",
        )
    _committed(table, version, as_json)


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
    as_json: AsJson = False,
) -> None:
    """Insert the rows of local files, replacing the rows with their primary keys, in one commit."""
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    extra = None if op_column is None else [pa.field(op_column, pa.string())]
    batches, _ = _inputs(table, files, fmt, delimiter, header, null_value, extra)
    version = table.upsert(batches, op_column=op_column, last_wins=last_wins, commit_id=commit_id)
    _committed(table, version, as_json)


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
    as_json: AsJson = False,
) -> None:
    """Replace the whole table, or the rows matching --where, with the rows of local files, in one commit."""
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    batches, _ = _inputs(table, files, fmt, delimiter, header, null_value)
    _committed(table, table.overwrite(batches, where=where, commit_id=commit_id), as_json)


def _committed_if_matched(table: castable.Table, before: int, version: int, counter: str, as_json: bool) -> None:
    """Report a write that commits nothing when no row matches (a delete, an update)."""
    if version != before:
        _committed(table, version, as_json)
        return
    doc = {"version": version, "committed": False, "already_committed": False, "summary": {counter: 0}}
    emit(as_json, f"no row matched; table stays at version {version}", doc)


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
        column, sep, expression = item.partition("=")
        if not sep or not column.strip():
            raise castable.InvalidInputError(f"write each change as column=expression, not {item!r}")
        values[column.strip()] = expression
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    before = table.version
    _committed_if_matched(
        table, before, table.update(values, where=where, commit_id=commit_id), "rows_updated", as_json
    )


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
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    _committed(table, table.add_files(paths, commit_id=commit_id), as_json)


@tables_app.command()
def delete(
    uri: str,
    predicate: Annotated[str, typer.Argument(help='SQL predicate, e.g. "id BETWEEN 10 AND 20".')],
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Soft-delete the rows matching a SQL predicate (one tombstone file)."""
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    before = table.version
    _committed_if_matched(table, before, table.delete(predicate, commit_id=commit_id), "rows_deleted", as_json)


@tables_app.command()
def erase(
    uri: str,
    predicate: Annotated[str, typer.Argument(help="SQL predicate of the rows to remove physically.")],
    mode: Annotated[str, typer.Option(help="auto, splice (server-side row-group splice) or rewrite.")] = "auto",
    purge: Annotated[bool, typer.Option(help="Also expire old versions, delete old objects and verify.")] = False,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Physically remove rows (hard delete) and print the erasure report."""
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    with spinner("erasing"):
        report = table.erase(predicate, commit_id=commit_id, mode=mode, purge=purge)  # type: ignore[arg-type]
    if as_json:
        console.print(dumps(report.summary()))
        return
    shown = RichTable("old object", "new objects", "method", "row groups edited", "rows", title="erasure")
    for e in report.files:
        shown.add_row(
            e.old.path,
            "\n".join(n.path for n in e.new) or "-",
            e.method,
            ",".join(map(str, e.row_groups_edited)),
            str(e.rows_removed),
        )
    console.print(shown)
    console.print_json(dumps(report.summary()))


def _print_summary(title: str, summary: Mapping[str, object], as_json: bool) -> None:
    if as_json:
        console.print(dumps(summary))
        return
    shown = RichTable("", "", title=title, show_header=False)
    for key, value in summary.items():
        shown.add_row(key, str(value))
    console.print(shown)


@tables_app.command()
def compact(
    uri: str,
    sort_by: Annotated[str | None, typer.Option(help="Sort rows by this column within each new file.")] = None,
    min_file_size: Annotated[int | None, typer.Option(help="Rewrite files smaller than this many bytes.")] = None,
    delete_ratio: Annotated[
        float | None, typer.Option(help="Rewrite files with at least this deleted fraction.")
    ] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Bin-pack small files, rewrite delete-heavy ones and merge tombstones."""
    table = _open(uri, storage_option)
    with spinner("compacting"):
        report = table.compact(sort_by=sort_by, min_file_size=min_file_size, delete_ratio=delete_ratio)
    _print_summary("compaction", report.summary(), as_json)


@tables_app.command()
def expire(
    uri: str,
    retain_versions: Annotated[int | None, typer.Option(help="Keep at least the newest N versions.")] = None,
    retain_hours: Annotated[float | None, typer.Option(help="Keep versions younger than this.")] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Delete the manifests of versions outside the retention window."""
    table = _open(uri, storage_option)
    retain_for = None if retain_hours is None else timedelta(hours=retain_hours)
    report = table.expire(retain_versions=retain_versions, retain_for=retain_for)
    summary = {"versions_expired": len(report.versions_expired), "versions_retained": report.versions_retained}
    _print_summary("expire", summary, as_json)


@tables_app.command()
def gc(
    uri: str,
    grace_hours: Annotated[float | None, typer.Option(help="Only remove orphans older than this.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed.")] = False,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Remove files no retained version references, and stale multipart uploads."""
    table = _open(uri, storage_option)
    grace = None if grace_hours is None else timedelta(hours=grace_hours)
    with spinner("collecting garbage"):
        report = table.gc(orphan_grace=grace, dry_run=dry_run)
    if as_json:
        console.print(dumps({**report.summary(), "objects": report.objects}))
        return
    if dry_run:
        for key in report.objects:
            console.print(key)
    _print_summary("gc (dry run: nothing removed)" if dry_run else "gc", report.summary(), as_json)


OUTPUT_FORMATS = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


@tables_app.command()
def scan(
    uri: str,
    columns: Annotated[str | None, typer.Option(help="Comma-separated columns.")] = None,
    filter: Annotated[str | None, typer.Option("--filter", "-f", help="SQL predicate.")] = None,
    version: Annotated[int | None, typer.Option(help="Read this version.")] = None,
    as_of: Annotated[
        str | None, typer.Option(help="Read the version current at this ISO 8601 time (default zone: local).")
    ] = None,
    limit: Annotated[int, typer.Option(help="Rows to print (ignored with --output).")] = 20,
    output: Annotated[
        str | None, typer.Option(help="Write every row to a .parquet, .csv or .jsonl file, or to stdout with '-'.")
    ] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help="parquet, csv or jsonl (default: by extension; csv for '-').")
    ] = None,
    count: Annotated[bool, typer.Option("--count", help="Print only the number of rows.")] = False,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Read rows (latest version, or --version / --as-of)."""
    table = _open(uri, storage_option)
    cols = [c.strip() for c in columns.split(",")] if columns else None
    s = table.scan(cols, filter, version=version, as_of=as_of)
    if count:
        n = s.count()
        emit(as_json, str(n), {"version": s.version, "count": n})
        return
    if output is not None:
        _write_output(s, output, fmt, f"version {s.version}", sum(f.rows for f in s.files()))
        return
    rows = _first_rows(s, limit)
    if as_json:
        console.print(dumps({"version": s.version, "columns": s.schema.names, "rows": rows}))
        return
    _print_rows(s.schema.names, rows, f"{table.uri} @ version {s.version}")


class _JsonLinesWriter(AbstractContextManager["_JsonLinesWriter"]):
    """Rows as JSON Lines (:func:`castable.inputs.sources.to_json_lines`); a path is opened and closed here."""

    def __init__(self, sink: str | IO[bytes]) -> None:
        self.owned = isinstance(sink, str)
        self.sink: IO[bytes] = open(sink, "wb") if isinstance(sink, str) else sink  # noqa: SIM115

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self.sink.write(to_json_lines(batch))

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.sink.close() if self.owned else self.sink.flush()


def _writer(kind: str, sink: str | IO[bytes], schema: pa.Schema) -> Any:
    """A Parquet, CSV or JSON Lines writer with ``write_batch``, used as a context manager."""
    if kind == "parquet":
        return pq.ParquetWriter(sink, schema)
    if kind == "csv":
        return pacsv.CSVWriter(sink, schema)
    return _JsonLinesWriter(sink)


def _write_output(rows: ArrowResult, output: str, fmt: str | None, what: str, total: int | None = None) -> None:
    """Every row to a file (written under a hidden name and renamed when complete, so a failed
    or interrupted read never leaves a file that looks whole) or to stdout; ``what`` names the
    rows in the closing line, ``total`` (if known) sizes the progress bar."""
    to_stdout = output == "-"
    kind = fmt or ("csv" if to_stdout else OUTPUT_FORMATS.get(Path(output).suffix.lower()))
    if kind not in ("parquet", "csv", "jsonl"):
        raise InvalidInputError(
            f"cannot tell the output format of {output!r}: name a .parquet, .csv or .jsonl file, or give --format"
        )
    if kind == "parquet" and to_stdout:
        raise InvalidInputError("Parquet is not written to stdout; give a file name, or --format csv or jsonl")
    target = Path(output)
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    sink: str | IO[bytes] = sys.stdout.buffer if to_stdout else str(partial)
    written = 0
    try:
        with progress_bar() as progress, _writer(kind, sink, rows.schema) as writer:
            task = progress.add_task("reading rows", total=total)
            for batch in rows.to_batches():
                try:
                    writer.write_batch(batch)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise InvalidInputError(f"these rows cannot be written as {kind}: {e}; try Parquet") from None
                written += batch.num_rows
                progress.advance(task, batch.num_rows)
        if not to_stdout:
            partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    (err_console if to_stdout else console).print(f"wrote {written} rows of {what} to {output}")


def _first_rows(rows: ArrowResult, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` rows as JSON-ready dicts, reading no further."""
    out: list[dict[str, Any]] = []
    for batch in rows.to_batches():
        out += json_rows(batch.slice(0, limit - len(out)))
        if len(out) >= limit:
            break
    return out


def _print_rows(names: list[str], rows: list[dict[str, Any]], title: str) -> None:
    shown = RichTable(*names, title=title)
    for row in rows:
        shown.add_row(*(str(v) for v in row.values()))
    console.print(shown)


CHANGE_FORMATS = ("table", "json", "jsonl", "csv", "parquet")


@tables_app.command()
def changes(
    uri: str,
    start: Annotated[int | None, typer.Option("--from", help="First version whose changes to read.")] = None,
    end: Annotated[int | None, typer.Option("--to", help="Last version (default: the newest).")] = None,
    since: Annotated[
        str | None, typer.Option(help="Instead of --from: changes committed at or after this ISO 8601 time.")
    ] = None,
    until: Annotated[str | None, typer.Option(help="Instead of --to: changes committed up to this time.")] = None,
    columns: Annotated[str | None, typer.Option(help="Comma-separated columns.")] = None,
    filter: Annotated[
        str | None, typer.Option("--filter", "-f", help="SQL predicate (may name _change_type, _commit_version).")
    ] = None,
    limit: Annotated[int, typer.Option(help="Rows to print as a table or --json (ignored otherwise).")] = 20,
    output: Annotated[
        str | None, typer.Option(help="Write every change to a .parquet, .csv or .jsonl file, or to stdout with '-'.")
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="table, json (JSON Lines), csv or parquet (with --output).")
    ] = "table",
    count: Annotated[bool, typer.Option("--count", help="Print only the number of change rows.")] = False,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Row changes (insert, delete, update_preimage, update_postimage) committed in versions --from..--to."""
    table = _open(uri, storage_option)
    cols = [c.strip() for c in columns.split(",")] if columns else None
    show_changes(
        table.changes(start, end, start_time=since, end_time=until, columns=cols, filter=filter),
        table.uri,
        count=count,
        output=output,
        fmt=fmt,
        limit=limit,
        as_json=as_json,
    )


def show_changes(
    s: ChangeScan, where: str, *, count: bool, output: str | None, fmt: str, limit: int, as_json: bool
) -> None:
    """Print a change scan as ``castable changes`` does: a count, a table, JSON, or every row to
    ``output`` (or stdout) as JSON Lines, CSV or Parquet."""
    if fmt not in CHANGE_FORMATS:
        raise InvalidInputError(f"--format must be one of {', '.join(CHANGE_FORMATS)}, not {fmt!r}")
    versions = f"versions {s.versions.start}..{s.versions.stop - 1}" if s.versions else "no version"
    if count:
        n = s.count()
        emit(as_json, str(n), {"from": s.versions.start, "to": s.versions.stop - 1, "count": n})
        return
    kind = {"json": "jsonl"}.get(fmt, fmt)
    if output is not None or kind != "table":
        _write_output(s, output or "-", None if kind == "table" else kind, f"the changes of {versions}")
        return
    rows = _first_rows(s, limit)
    if as_json:
        doc = {"from": s.versions.start, "to": s.versions.stop - 1, "columns": s.schema.names, "rows": rows}
        console.print(dumps(doc))
        return
    _print_rows(s.schema.names, rows, f"{where}: changes of {versions}")


@tables_app.command()
def history(
    uri: str,
    limit: Annotated[int | None, typer.Option(help="Most recent commits to show.")] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """List the retained commits, newest first (an unreadable version is listed with its error)."""
    table = _open(uri, storage_option)
    entries = table.history(limit=limit)
    if as_json:
        docs = [
            {
                "version": h.version,
                "timestamp": h.timestamp,
                "operation": h.operation,
                "commit_id": h.commit_id,
                "summary": h.summary,
                "error": h.error,
            }
            for h in entries
        ]
        console.print(dumps(docs))
        return
    shown = RichTable("version", "time", "operation", "commit_id", "summary", title=table.uri)
    for h in entries:
        when = h.timestamp.isoformat() if h.timestamp else "-"
        shown.add_row(str(h.version), when, h.operation, h.commit_id, h.error or dumps(h.summary))
    console.print(shown)


@tables_app.command()
def info(
    uri: str,
    version: Annotated[int | None, typer.Option(help="Describe this version.")] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Describe a table: version, schema, files, tombstones, properties."""
    table = _open(uri, storage_option)
    m = table.manifest if version is None else table.manifest_at(version)
    size = m.data_files.total("size")
    if as_json:
        doc = {
            "uri": table.uri,
            "version": m.version,
            "format_version": m.format_version,
            "segments": len(m.data_files.parts) + len(m.tombstones.parts) if m.format_version >= 2 else None,
            "created_at": m.created_at,
            "table_uuid": m.table_uuid,
            "primary_key": list(m.primary_key),
            "schema": [
                {"name": f.name, "type": str(f.type), "nullable": f.nullable, "id": field_id(f)} for f in m.schema
            ],
            "data_files": len(m.data_files),
            "bytes": size,
            "rows_before_deletes": m.total_rows,
            "tombstone_files": len(m.tombstones),
            "properties": m.properties,
            "damage": table.damage,
        }
        console.print(dumps(doc))
        return
    if table.damage:
        err_console.print(f"warning: {table.damage}")
    console.print(Text.assemble((table.uri, "bold"), f"  version {m.version}  created {m.created_at.isoformat()}"))
    console.print(
        f"primary key: {', '.join(m.primary_key) or '-'}    table uuid: {m.table_uuid}    "
        f"format version: {m.format_version}"
    )
    schema = RichTable("id", "column", "type", "nullable", title="schema")
    for f in m.schema:
        schema.add_row(str(field_id(f) or "-"), f.name, str(f.type), str(f.nullable))
    console.print(schema)
    console.print(
        f"data files: {len(m.data_files)} ({size:,} bytes, {m.total_rows:,} rows before deletes)    "
        f"tombstone files: {len(m.tombstones)}"
    )
    console.print(f"properties: {dumps(m.properties)}")


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
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    _committed(table, table.restore(version, as_of=as_of, commit_id=commit_id), as_json)


def _pairs(items: list[str] | None, sep: str, what: str) -> list[tuple[str, str]]:
    out = []
    for item in items or []:
        left, found, right = item.partition(sep)
        if not found or not left.strip() or not right.strip():
            raise InvalidInputError(f"{what} {item!r} is not {'NAME' + sep + ('TYPE' if sep == ':' else 'NEW')}")
        out.append((left.strip(), right.strip()))
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
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Change the schema in one commit, reading and writing no data.

    Changes apply in this order: add, rename, widen, nullable, drop, order.
    """
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    defaults = dict(_pairs(default, "=", "--default"))
    update = table.alter(commit_id=commit_id)
    for name, spec in _pairs(add, ":", "--add"):
        t = parse_type(spec)
        value = defaults.pop(name, None)
        update.add_column(name, t, default=None if value is None else pa.array([value]).cast(t)[0].as_py())
    if defaults:
        raise InvalidInputError(f"--default names columns that --add does not add: {sorted(defaults)}")
    for old, new in _pairs(rename, "=", "--rename"):
        update.rename_column(old, new)
    for name, spec in _pairs(widen, ":", "--widen"):
        update.widen_column(name, parse_type(spec))
    for name in nullable or []:
        update.make_nullable(name)
    for name in drop or []:
        update.drop_column(name)
    if order:
        update.reorder([n.strip() for n in order.split(",")])
    _committed(table, update.commit(), as_json)


@tables_app.command()
def upgrade(
    uri: str,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Rewrite a format-version-1 table in the latest format, in one commit (no data copied)."""
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    if table.manifest.format_version == LATEST_FORMAT_VERSION:
        doc: dict[str, Any] = {"version": table.version, "committed": False, "format_version": LATEST_FORMAT_VERSION}
        emit(as_json, f"{table.uri} is already in format version {LATEST_FORMAT_VERSION}; nothing to do", doc)
        return
    _committed(table, table.upgrade(commit_id=commit_id), as_json)


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
    table = _open(uri, storage_option)
    if _already(table, commit_id, as_json):
        return
    _committed(table, table.set_properties(dict(_pairs(setting, "=", "NAME=VALUE")), commit_id=commit_id), as_json)


@tables_app.command()
def repair(
    uri: str,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Make a damaged table writable again (a malformed pointer, unreadable newest versions).

    The newest readable version's files are committed as a new version; what the unreadable
    versions committed is lost. A table that is not damaged is left as it is.
    """
    table = _open(uri, storage_option)
    damage = table.damage
    if damage is None:
        doc: dict[str, Any] = {"version": table.version, "repaired": False}
        emit(as_json, f"{table.uri} is not damaged (version {table.version}); nothing to repair", doc)
        return
    version = table.repair(commit_id=commit_id)
    doc = {"version": version, "repaired": True, "damage": damage, "summary": table.manifest.commit.summary}
    emit(as_json, f"repaired {table.uri}: version {version} ({dumps(doc['summary'])})", doc)
