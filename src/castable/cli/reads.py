"""The read commands (scan, changes, history, info): a table's rows, changes and versions, to the
terminal or to files."""

from __future__ import annotations

import dataclasses
import sys
import uuid
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table as RichTable
from rich.text import Text

from castable.cli.common import (
    AsJson,
    StorageOption,
    commands,
    console,
    dumps,
    emit,
    err_console,
    open_table,
    progress_bar,
)
from castable.errors import InvalidInputError
from castable.inputs.names import parse_names

if TYPE_CHECKING:
    import pyarrow as pa

    from castable.read.changes import ChangeScan
    from castable.read.results import ArrowResult

reads_app = commands()

OUTPUT_FORMATS = {".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
"""What a file name ending says of its format: the names ``--format`` takes, as ``append``'s."""
FORMAT_NAMES = ("parquet", "csv", "jsonl")


@reads_app.command()
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
        str | None,
        typer.Option("--format", metavar="FORMAT", help="parquet, csv or jsonl [default: by extension; csv for '-']"),
    ] = None,
    count: Annotated[bool, typer.Option("--count", help="Print only the number of rows.")] = False,
    explain: Annotated[
        bool, typer.Option("--explain", help="Print how files are pruned (partitions, statistics), reading no data.")
    ] = False,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Read rows (latest version, or --version / --as-of)."""
    table = open_table(uri, storage_option)
    cols = parse_names(columns) if columns else None
    s = table.scan(cols, filter, version=version, as_of=as_of)
    if explain:
        plan = s.explain()
        emit(as_json, f"version {s.version}: {plan}", {"version": s.version, **dataclasses.asdict(plan)})
        return
    if count:
        n = s.count()
        emit(as_json, str(n), {"version": s.version, "count": n})
        return
    if output is not None:
        _write_output(s, output, fmt, f"version {s.version}", sum(f.rows for f in s.files()), quiet=as_json)
        return
    rows, more = _first_rows(s, limit)
    if as_json:
        console.print(dumps({"version": s.version, "columns": s.schema.names, "rows": rows, "truncated": more}))
        return
    _print_rows(s.schema.names, rows, more, f"{table.uri} @ version {s.version}")


class _JsonLinesWriter(AbstractContextManager["_JsonLinesWriter"]):
    """Rows as JSON Lines (:func:`castable.inputs.sources.to_json_lines`); a path is opened and closed here."""

    def __init__(self, sink: str | IO[bytes]) -> None:
        self.owned = isinstance(sink, str)
        self.sink: IO[bytes] = open(sink, "wb") if isinstance(sink, str) else sink  # noqa: SIM115

    def write_batch(self, batch: pa.RecordBatch) -> None:
        from castable.inputs.sources import to_json_lines

        self.sink.write(to_json_lines(batch))

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.sink.close() if self.owned else self.sink.flush()


def _writer(kind: str, sink: str | IO[bytes], schema: pa.Schema) -> Any:
    """A Parquet, CSV or JSON Lines writer with ``write_batch``, used as a context manager."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if kind == "parquet":
        return pq.ParquetWriter(sink, schema)
    if kind == "csv":
        return pacsv.CSVWriter(sink, schema)
    return _JsonLinesWriter(sink)


def _write_output(
    rows: ArrowResult, output: str, fmt: str | None, what: str, total: int | None = None, *, quiet: bool = False
) -> None:
    """Every row to a file (written under a hidden name and renamed when complete, so a failed
    or interrupted read never leaves a file that looks whole) or to stdout; ``what`` names the
    rows in the closing line, ``total`` (if known) sizes the progress bar."""
    import pyarrow as pa

    to_stdout = output == "-"
    if fmt is not None and fmt not in FORMAT_NAMES:
        raise InvalidInputError(f"--format must be one of {', '.join(FORMAT_NAMES)}, not {fmt!r}")
    kind = fmt or ("csv" if to_stdout else OUTPUT_FORMATS.get(Path(output).suffix.lower()))
    if kind is None:
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
        with progress_bar(quiet) as progress, _writer(kind, sink, rows.schema) as writer:
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


def _first_rows(rows: ArrowResult, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """The first ``limit`` rows as JSON-ready dicts, and whether more follow (one row more is
    read to know, no further)."""
    from castable.inputs.sources import json_rows

    out: list[dict[str, Any]] = []
    for batch in rows.to_batches():
        out += json_rows(batch.slice(0, limit + 1 - len(out)))
        if len(out) > limit:
            return out[:limit], True
    return out, False


def _print_rows(names: list[str], rows: list[dict[str, Any]], more: bool, title: str) -> None:
    """The rows as a table; when output was cut at ``--limit``, a caption that says so."""
    caption = f"the first {len(rows):,} rows; --limit N shows more, --output FILE writes them all" if more else None
    shown = RichTable(*names, title=title, caption=caption)
    for row in rows:
        shown.add_row(*(str(v) for v in row.values()))
    console.print(shown)


CHANGE_FORMATS = ("table", *FORMAT_NAMES)


@reads_app.command()
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
        str, typer.Option("--format", metavar="FORMAT", help="table, or parquet, csv or jsonl (as scan's).")
    ] = "table",
    count: Annotated[bool, typer.Option("--count", help="Print only the number of change rows.")] = False,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Row changes (insert, delete, update_preimage, update_postimage) committed in versions --from..--to."""
    table = open_table(uri, storage_option)
    cols = parse_names(columns) if columns else None
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
    if output is not None or fmt != "table":
        _write_output(s, output or "-", None if fmt == "table" else fmt, f"the changes of {versions}", quiet=as_json)
        return
    rows, more = _first_rows(s, limit)
    if as_json:
        doc = {"from": s.versions.start, "to": s.versions.stop - 1, "columns": s.schema.names, "rows": rows}
        console.print(dumps({**doc, "truncated": more}))
        return
    _print_rows(s.schema.names, rows, more, f"{where}: changes of {versions}")


@reads_app.command()
def history(
    uri: str,
    limit: Annotated[int | None, typer.Option(help="Most recent commits to show.")] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """List the retained commits, newest first (an unreadable version is listed with its error)."""
    table = open_table(uri, storage_option)
    entries = table.history(limit=limit)
    if as_json:
        docs = [
            {
                "version": h.version,
                "timestamp": h.timestamp,
                "operation": h.operation,
                "commit_id": h.commit_id,
                "summary": h.summary,
                "described": h.described(),
                "error": h.error,
            }
            for h in entries
        ]
        console.print(dumps(docs))
        return
    shown = RichTable("version", "time", "operation", "commit_id", "what it did", title=table.uri)
    for h in entries:
        when = h.timestamp.isoformat(timespec="seconds") if h.timestamp else "-"
        shown.add_row(str(h.version), when, h.operation, h.commit_id, h.described())
    console.print(shown)


@reads_app.command()
def info(
    uri: str,
    version: Annotated[int | None, typer.Option(help="Describe this version.")] = None,
    storage_option: StorageOption = None,
    as_json: AsJson = False,
) -> None:
    """Describe a table: version, schema, files, tombstones, and the settings in force (those
    its properties set, the rest their defaults)."""
    from castable.format.conversions import unit_note
    from castable.format.evolution import field_id
    from castable.format.partitioning import described
    from castable.format.properties import DEFAULTS
    from castable.format.sorting import sort_described

    table = open_table(uri, storage_option)
    m = table.manifest if version is None else table.manifest_at(version)
    size = m.data_files.total("size")
    settings = dict(sorted({**DEFAULTS, **m.properties}.items()))
    notes = [n for f in m.schema if (n := unit_note(f.name, f.type)) is not None]
    columns = [
        # a primary key column holds no NULL, whatever its field says: a write refuses one
        {"name": f.name, "type": str(f.type), "nullable": f.nullable and f.name not in m.primary_key, "id": field_id(f)}
        for f in m.schema
    ]
    if as_json:
        doc = {
            "uri": table.uri,
            "version": m.version,
            "format_version": m.format_version,
            "segments": len(m.data_files.parts) + len(m.tombstones.parts) if m.format_version >= 2 else None,
            "created_at": m.created_at,
            "table_uuid": m.table_uuid,
            "primary_key": list(m.primary_key),
            "schema": columns,
            "partitioning": m.partitioning.to_json(),
            "sorting": m.sorting.to_json(),
            "data_files": len(m.data_files),
            "bytes": size,
            "rows_before_deletes": m.total_rows,
            "tombstone_files": len(m.tombstones),
            "properties": m.properties,
            "settings": settings,
            "notes": notes,
            "damage": table.damage,
        }
        console.print(dumps(doc))
        return
    if table.damage:
        err_console.print(f"warning: {table.damage}")
    for note in notes:
        err_console.print(f"note: {note}")
    console.print(Text.assemble((table.uri, "bold"), f"  version {m.version}  created {m.created_at.isoformat()}"))
    console.print(
        f"primary key: {', '.join(m.primary_key) or '-'}    table uuid: {m.table_uuid}    "
        f"format version: {m.format_version}"
    )
    schema = RichTable("id", "column", "type", "nullable", title="schema")
    for c in columns:
        schema.add_row(str(c["id"] or "-"), str(c["name"]), str(c["type"]), "yes" if c["nullable"] else "no")
    console.print(schema)
    spec = m.partitioning.default
    fields = ", ".join(described(f, m.schema) for f in spec.fields) or "unpartitioned"
    older = len(m.partitioning.specs) - 1
    console.print(f"partitioning (spec {spec.spec_id}): {fields}" + (f"    older specs: {older}" if older else ""))
    order = m.sorting.default
    console.print(
        f"sort order ({order.order_id}): "
        + (", ".join(sort_described(f, m.schema) for f in order.fields) or "unsorted")
    )
    console.print(
        f"data files: {len(m.data_files)} ({size:,} bytes, {m.total_rows:,} rows before deletes)    "
        f"tombstone files: {len(m.tombstones)}"
    )
    shown = RichTable("setting", "value", "", title="settings in force")
    for name, value in settings.items():
        shown.add_row(name, value, "set" if name in m.properties else "default")
    console.print(shown)
