"""The ``castable`` command line: a thin layer over the library (typer for parsing, rich for output)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable
from rich.text import Text

import castable
from castable.errors import CastableError, InvalidInputError
from castable.sources import CsvOptions, Source, open_source

app = typer.Typer(
    help="ACID tables on S3 or a local directory: create, append, delete, scan, time travel.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
# Printed values (types such as ``timestamp[us, tz=UTC]``, predicates, paths) are never read as
# rich markup, and lines are never hard-wrapped, so piped JSON stays one parseable line.
console = Console(markup=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)


def _version(show: bool) -> None:
    if show:
        console.print(f"castable {castable.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """ACID tables on S3 or a local directory: create, append, delete, scan, time travel."""


StorageOption = Annotated[
    list[str] | None,
    typer.Option("--storage-option", "-o", help="KEY=VALUE for S3 (endpoint_url, region, ...)."),
]
CommitId = Annotated[str | None, typer.Option(help="Idempotency key: a repeated id commits nothing twice.")]


def _options(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise InvalidInputError(f"storage option {pair!r} is not KEY=VALUE")
        out[key] = value
    return out


def _open(uri: str, options: list[str] | None) -> castable.Table:
    return castable.open_table(uri, storage_options=_options(options))


def _parse_schema(spec: str) -> pa.Schema:
    fields = []
    for part in spec.split(","):
        name, sep, type_name = part.strip().partition(":")
        if not sep or not name:
            raise InvalidInputError(f"schema field {part!r} is not NAME:TYPE")
        try:
            fields.append(pa.field(name.strip(), pa.type_for_alias(type_name.strip())))
        except ValueError:
            raise InvalidInputError(
                f"unknown type {type_name!r} (try int64, double, string, timestamp[us], date32)"
            ) from None
    return pa.schema(fields)


def _read_source(path: Path, fmt: str | None, schema: pa.Schema | None = None, csv: CsvOptions | None = None) -> Source:
    """One input file (Parquet, CSV or JSON Lines), parsed with ``schema``'s types when given."""
    if not path.exists():
        raise InvalidInputError(f"{path} does not exist")
    return open_source(str(path), path.name, fmt=fmt, schema=schema, csv=csv)


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )


@app.command()
def create(
    uri: str,
    schema: Annotated[str | None, typer.Option(help="NAME:TYPE,... e.g. 'id:int64,name:string'.")] = None,
    like: Annotated[Path | None, typer.Option(help="Take the schema of this Parquet or CSV file.")] = None,
    primary_key: Annotated[str | None, typer.Option("--primary-key", "-k")] = None,
    prop: Annotated[list[str] | None, typer.Option("--property", "-p", help="KEY=VALUE table property.")] = None,
    storage_option: StorageOption = None,
) -> None:
    """Create an empty table."""
    if (schema is None) == (like is None):
        raise InvalidInputError("give exactly one of --schema and --like")
    arrow_schema = _parse_schema(schema) if schema else _read_source(like, None).schema  # type: ignore[arg-type]
    table = castable.create_table(
        uri, arrow_schema, primary_key=primary_key, properties=_options(prop), storage_options=_options(storage_option)
    )
    console.print(f"created {table.uri} (version {table.version})")


@app.command()
def append(
    uri: str,
    files: Annotated[list[Path], typer.Argument(help="Parquet, CSV or JSON Lines files (.gz too), in one commit.")],
    fmt: Annotated[str | None, typer.Option("--format", help="parquet, csv or jsonl (default: by extension).")] = None,
    delimiter: Annotated[str | None, typer.Option(help="CSV delimiter (default: tab for .tsv, else comma).")] = None,
    header: Annotated[bool, typer.Option(help="CSV files start with a header naming the columns.")] = True,
    null_value: Annotated[
        list[str] | None, typer.Option(help="A CSV value read as NULL (repeatable; default: empty, NULL, null).")
    ] = None,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
) -> None:
    """Append the rows of local files in one commit; CSV and JSON are read as the table's types."""
    table = _open(uri, storage_option)
    csv = CsvOptions(delimiter, header, tuple(null_value) if null_value else CsvOptions.null_values)
    opened = [_read_source(p, fmt, table.schema, csv) for p in files]
    counts = [s.rows for s in opened]
    total = None if None in counts else sum(c for c in counts if c is not None)

    def batches() -> Iterator[pa.RecordBatch]:
        for source in opened:
            yield from source.batches

    with _progress() as progress:
        task = progress.add_task("appending rows", total=total)
        version = table.append(batches(), commit_id=commit_id, on_rows=lambda n: progress.advance(task, n))
    summary = table.manifest_at(version).commit.summary
    console.print(f"committed version {version}: {json.dumps(summary)}")


@app.command("add-files")
def add_files(
    uri: str,
    paths: Annotated[list[str], typer.Argument(help="Parquet files already under the table's data/ prefix.")],
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
) -> None:
    """Register Parquet files written by another engine as one append (footers only are read)."""
    table = _open(uri, storage_option)
    version = table.add_files(paths, commit_id=commit_id)
    console.print(f"committed version {version}: {json.dumps(table.manifest_at(version).commit.summary)}")


@app.command()
def delete(
    uri: str,
    predicate: Annotated[str, typer.Argument(help='SQL predicate, e.g. "id BETWEEN 10 AND 20".')],
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
) -> None:
    """Soft-delete the rows matching a SQL predicate (one tombstone file)."""
    table = _open(uri, storage_option)
    before = table.version
    version = table.delete(predicate, commit_id=commit_id)
    if version == before:
        console.print(f"no row matched; table stays at version {version}")
    else:
        console.print(f"committed version {version}: {json.dumps(table.manifest_at(version).commit.summary)}")


@app.command()
def erase(
    uri: str,
    predicate: Annotated[str, typer.Argument(help="SQL predicate of the rows to remove physically.")],
    mode: Annotated[str, typer.Option(help="auto, splice (server-side row-group splice) or rewrite.")] = "auto",
    purge: Annotated[bool, typer.Option(help="Also expire old versions, delete old objects and verify.")] = False,
    commit_id: CommitId = None,
    storage_option: StorageOption = None,
) -> None:
    """Physically remove rows (hard delete) and print the erasure report."""
    table = _open(uri, storage_option)
    with err_console.status("erasing"):
        report = table.erase(predicate, commit_id=commit_id, mode=mode, purge=purge)  # type: ignore[arg-type]
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
    console.print_json(json.dumps(report.summary(), default=str))


def _print_summary(title: str, summary: dict[str, object]) -> None:
    shown = RichTable("", "", title=title, show_header=False)
    for key, value in summary.items():
        shown.add_row(key, str(value))
    console.print(shown)


@app.command()
def compact(
    uri: str,
    sort_by: Annotated[str | None, typer.Option(help="Sort rows by this column within each new file.")] = None,
    min_file_size: Annotated[int | None, typer.Option(help="Rewrite files smaller than this many bytes.")] = None,
    delete_ratio: Annotated[
        float | None, typer.Option(help="Rewrite files with at least this deleted fraction.")
    ] = None,
    storage_option: StorageOption = None,
) -> None:
    """Bin-pack small files, rewrite delete-heavy ones and merge tombstones."""
    table = _open(uri, storage_option)
    with err_console.status("compacting"):
        report = table.compact(sort_by=sort_by, min_file_size=min_file_size, delete_ratio=delete_ratio)
    _print_summary("compaction", report.summary())


@app.command()
def expire(
    uri: str,
    retain_versions: Annotated[int | None, typer.Option(help="Keep at least the newest N versions.")] = None,
    retain_hours: Annotated[float | None, typer.Option(help="Keep versions younger than this.")] = None,
    storage_option: StorageOption = None,
) -> None:
    """Delete the manifests of versions outside the retention window."""
    table = _open(uri, storage_option)
    retain_for = None if retain_hours is None else timedelta(hours=retain_hours)
    report = table.expire(retain_versions=retain_versions, retain_for=retain_for)
    _print_summary(
        "expire", {"versions_expired": len(report.versions_expired), "versions_retained": report.versions_retained}
    )


@app.command()
def gc(
    uri: str,
    grace_hours: Annotated[float | None, typer.Option(help="Only remove orphans older than this.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed.")] = False,
    storage_option: StorageOption = None,
) -> None:
    """Remove files no retained version references, and stale multipart uploads."""
    table = _open(uri, storage_option)
    grace = None if grace_hours is None else timedelta(hours=grace_hours)
    with err_console.status("collecting garbage"):
        report = table.gc(orphan_grace=grace, dry_run=dry_run)
    if dry_run:
        for key in report.objects:
            console.print(key)
    _print_summary("gc (dry run)" if dry_run else "gc", report.summary())


@app.command()
def scan(
    uri: str,
    columns: Annotated[str | None, typer.Option(help="Comma-separated columns.")] = None,
    filter: Annotated[str | None, typer.Option("--filter", "-f", help="SQL predicate.")] = None,
    version: Annotated[int | None, typer.Option(help="Read this version.")] = None,
    as_of: Annotated[datetime | None, typer.Option(help="Read the version current at this time.")] = None,
    limit: Annotated[int, typer.Option(help="Rows to print (ignored with --output).")] = 20,
    output: Annotated[Path | None, typer.Option(help="Write all rows to a .parquet or .csv file.")] = None,
    count: Annotated[bool, typer.Option("--count", help="Print only the number of rows.")] = False,
    storage_option: StorageOption = None,
) -> None:
    """Read rows (latest version, or --version / --as-of)."""
    table = _open(uri, storage_option)
    cols = [c.strip() for c in columns.split(",")] if columns else None
    s = table.scan(cols, filter, version=version, as_of=as_of)
    if count:
        console.print(s.count())
        return
    if output is not None:
        _write_output(s, output)
        return
    shown = RichTable(*s.schema.names, title=f"{table.uri} @ version {s.version}")
    printed = 0
    for batch in s.to_batches():
        for row in batch.slice(0, limit - printed).to_pylist():
            shown.add_row(*(str(v) for v in row.values()))
            printed += 1
        if printed >= limit:
            break
    console.print(shown)


def _write_output(s: castable.Scan, output: Path) -> None:
    writers: dict[str, Any] = {".parquet": pq.ParquetWriter, ".csv": pacsv.CSVWriter}
    make = writers.get(output.suffix.lower())
    if make is None:
        raise InvalidInputError("--output must end in .parquet or .csv")
    rows = 0
    partial = output.with_name(f".{output.name}.{uuid.uuid4().hex}.tmp")
    try:
        with _progress() as progress, make(partial, s.schema) as writer:
            task = progress.add_task("reading rows", total=None)
            for batch in s.to_batches():
                writer.write_batch(batch)
                rows += batch.num_rows
                progress.advance(task, batch.num_rows)
        partial.replace(output)  # a failed or interrupted scan never leaves a file that looks complete
    finally:
        partial.unlink(missing_ok=True)
    console.print(f"wrote {rows} rows of version {s.version} to {output}")


@app.command()
def history(
    uri: str,
    limit: Annotated[int | None, typer.Option(help="Most recent commits to show.")] = None,
    storage_option: StorageOption = None,
) -> None:
    """List commits, newest first."""
    table = _open(uri, storage_option)
    shown = RichTable("version", "time", "operation", "commit_id", "summary", title=table.uri)
    for h in table.history(limit=limit):
        shown.add_row(str(h.version), h.timestamp.isoformat(), h.operation, h.commit_id, json.dumps(h.summary))
    console.print(shown)


@app.command()
def info(
    uri: str,
    version: Annotated[int | None, typer.Option(help="Describe this version.")] = None,
    storage_option: StorageOption = None,
) -> None:
    """Describe a table: version, schema, files, tombstones, properties."""
    table = _open(uri, storage_option)
    m = table.manifest_at(version)
    console.print(Text.assemble((table.uri, "bold"), f"  version {m.version}  created {m.created_at.isoformat()}"))
    console.print(f"primary key: {', '.join(m.primary_key) or '-'}    table uuid: {m.table_uuid}")
    schema = RichTable("column", "type", "nullable", title="schema")
    for f in m.schema:
        schema.add_row(f.name, str(f.type), str(f.nullable))
    console.print(schema)
    size = sum(f.size for f in m.data_files)
    console.print(
        f"data files: {len(m.data_files)} ({size:,} bytes, {m.total_rows:,} rows before deletes)    "
        f"tombstone files: {len(m.tombstones)}"
    )
    console.print(f"properties: {json.dumps(m.properties)}")


def main() -> None:
    """Entry point that turns castable errors into one red line and exit status 1."""
    try:
        app()
    except CastableError as e:
        err_console.print(Text.assemble(("error:", "red"), f" {e}"))
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        err_console.print(
            "interrupted: a commit in flight either landed whole or not at all "
            "(re-run with the same --commit-id to be sure)"
        )
        raise SystemExit(130) from None
