"""Files users bring, read as record batches: Parquet, CSV and JSON Lines (optionally gzipped).

``castable append``, ``castable create --like`` and the ingest function all read through here,
so a file means the same thing wherever it lands. Given a table schema, CSV and JSON are parsed
with the table's types, never inferred: ``1`` is a valid double, in CSV ``123`` is a valid
string, and a timestamp written by ``castable scan --output x.csv`` reads back. In JSON Lines,
the values JSON has no type for are text, as ``castable scan --output x.jsonl`` writes them:
dates, times and timestamps in ISO 8601, decimals as numbers or text, binary in base64; a
duration is an integer count of its unit. A header that names other columns than the table's,
or a value that does not convert, is refused with the file, the row and the column (a JSON value
pyarrow's JSON reader itself refuses, such as a number in a text column, with the rows before
it). CSV and JSON are parsed a block at a time, and Parquet is streamed a row group at a time,
so memory stays about one block or row group whatever the size of the file.
"""

from __future__ import annotations

import base64
import csv as pycsv
import gzip
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, Literal, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from castable.errors import InvalidInputError, SchemaMismatchError
from castable.format.conversions import inferred_type
from castable.format.stats import file_rows

Format = Literal["parquet", "csv", "jsonl"]
FORMATS: tuple[Format, ...] = ("parquet", "csv", "jsonl")
EXTENSIONS: dict[str, Format] = {
    ".parquet": "parquet",
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}
"""File name endings and the format they imply (each also gzipped, with ``.gz`` after it)."""
_BLOCK_SIZE = 4 * 1024 * 1024
"""Bytes of CSV or JSON parsed at a time (one read each, a ranged GET on S3)."""

DATA_SUFFIXES = tuple(ext + gz for ext, fmt in EXTENSIONS.items() for gz in ("", ".gz") if fmt != "parquet" or not gz)
"""Names that are data files (matched case-insensitively): not Spark's ``_SUCCESS`` markers,
``.crc`` checksums or anything else landing beside them."""


def is_data_file(name: str) -> bool:
    """Whether ``name`` ends like a data file of a format castable reads, in any letter case."""
    return name.lower().endswith(DATA_SUFFIXES)


MANIFEST_SUFFIX = ".manifest.json"
"""A landed object whose name ends so is a batch manifest: it names files landed beside it and
the table of a database each goes to (the ingest function appends them in one transaction)."""


@dataclass(frozen=True)
class CsvOptions:
    """How a CSV file is written: its delimiter, whether it has a header, its NULL markers."""

    delimiter: str | None = None
    """Default: tab for ``.tsv`` files, comma otherwise."""
    header: bool = True
    """Without a header, the columns are the table's, in order."""
    null_values: tuple[str, ...] = ("", "NULL", "null")


@dataclass
class Source:
    """An opened file: its schema, its rows as batches, and its row count when known up front."""

    schema: pa.Schema
    batches: Iterator[pa.RecordBatch]
    rows: int | None


def format_of(name: str, fmt: str | None = None) -> Format:
    """The format named (``parquet``, ``csv``, ``jsonl``), else the one the extension implies
    (``.csv``, ``.tsv``, ``.jsonl``, ``.ndjson``, ``.json``, with or without ``.gz``), else Parquet."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise InvalidInputError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        return fmt
    stem = name.lower().removesuffix(".gz")
    return next((f for ext, f in EXTENSIONS.items() if stem.endswith(ext)), "parquet")


def open_source(
    source: pa.NativeFile | str,
    name: str,
    *,
    fmt: str | None = None,
    schema: pa.Schema | None = None,
    csv: CsvOptions | None = None,
) -> Source:
    """Open ``source`` (a path or an open file; ``name`` is its name, for the format and for
    messages). With ``schema``, text formats are parsed with its types and must have its
    columns; without, their types are inferred."""
    kind = format_of(name, fmt)
    try:
        if kind == "parquet":
            pf = pq.ParquetFile(source, page_checksum_verification=True)
            return Source(pf.schema_arrow, _located(file_batches(pf), name), file_rows(pf.metadata))
        stream = _text_stream(source, name)
        if kind == "csv":
            return _open_csv(stream, name, schema, csv or CsvOptions(), source if isinstance(source, str) else None)
        return _open_json(stream, name, schema)
    except (pa.ArrowInvalid, OSError) as e:
        raise InvalidInputError(f"cannot read {name} as {kind}: {e}") from None


def to_json_lines(batch: pa.RecordBatch | pa.Table) -> bytes:
    """Rows as JSON Lines, each value as :func:`open_source` reads it back with the table's
    types (what ``castable scan --output x.jsonl`` writes; see :func:`json_rows`)."""
    return "".join(json.dumps(row, default=json_value) + "\n" for row in json_rows(batch)).encode()


def json_rows(batch: pa.RecordBatch | pa.Table) -> list[dict[str, Any]]:
    """Rows as dicts for ``json.dumps(..., default=json_value)``: durations as counts of their unit."""
    columns = [c.cast(pa.int64()) if pa.types.is_duration(c.type) else c for c in batch.columns]
    return cast(list[dict[str, Any]], pa.table(columns, names=batch.schema.names).to_pylist())


def json_value(value: object) -> object:
    """A value JSON has no type for, as text: ISO 8601 dates, times and timestamps, decimals as
    text, binary in base64."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def file_batches(file: pq.ParquetFile, *, batch_size: int = 64 * 1024) -> Iterator[pa.RecordBatch]:
    """The rows of an open Parquet file as batches of at most ``batch_size`` rows, read one row
    group at a time, so memory stays about one row group whatever the size of the file.

    ``file.iter_batches()`` over the whole file does not: pyarrow pre-buffers the row groups it
    is asked for into one read cache that lives as long as the iterator, so every row group's
    bytes stay in memory until the last batch (a 2 GiB file needs 2 GiB). Asked for one row group
    at a time, it replaces that cache at each row group, and still fetches each row group's
    column chunks in coalesced reads.
    """
    for index in range(file.num_row_groups):
        yield from file.iter_batches(batch_size=batch_size, row_groups=[index])


def _text_stream(source: pa.NativeFile | str, name: str) -> pa.NativeFile:
    """A path is opened with its compression detected from the extension; an open file named
    ``*.gz`` is decompressed here."""
    if isinstance(source, str):
        return pa.input_stream(source)
    return pa.CompressedInputStream(source, "gzip") if name.lower().endswith(".gz") else source


class _BadRow:
    """Keeps the first CSV row with too few or too many fields (pyarrow's error names it only by
    its text), so that the error can give its row number (read from the file at ``path`` again,
    on that error only)."""

    def __init__(self, name: str, path: str | None, delimiter: str, header: bool) -> None:
        self.name, self.path, self.delimiter, self.header = name, path, delimiter, header
        self.row: pacsv.InvalidRow | None = None

    def __call__(self, row: pacsv.InvalidRow) -> Literal["error"]:
        self.row = self.row or row
        return "error"

    def error(self, e: Exception, rows_before: int | None = None) -> InvalidInputError:
        if self.row is None:
            after = "" if rows_before is None else f" after row {rows_before}"
            return InvalidInputError(f"cannot read {self.name}{after}: {e}")
        number = self._number()
        where = f"row {number}" if number is not None else f"a row after row {rows_before or 0}"
        return InvalidInputError(
            f"{self.name}, {where}: expected {self.row.expected_columns} fields, got {self.row.actual_columns}: "
            f"{self.row.text!r}"
        )

    def _number(self) -> int | None:
        """The row number (1 for the first row after the header) of the first row of another width."""
        if self.path is None or self.row is None:
            return None
        opener = gzip.open if self.path.lower().endswith(".gz") else open
        with opener(self.path, "rt", newline="") as text:
            records = (r for r in pycsv.reader(text, delimiter=self.delimiter) if r)
            for number, record in enumerate(records, start=0 if self.header else 1):
                if number and len(record) != self.row.expected_columns:
                    return number
        return None


def _open_csv(
    stream: pa.NativeFile, name: str, schema: pa.Schema | None, options: CsvOptions, path: str | None
) -> Source:
    """With a schema, every column is read as text and converted here, so a bad value is
    reported with its row (pyarrow's own converter names only the column); so is a row with
    too few or too many fields."""
    delimiter = options.delimiter or ("\t" if name.lower().removesuffix(".gz").endswith(".tsv") else ",")
    if not options.header and schema is None:
        raise InvalidInputError(f"{name}: a CSV file without a header needs the table's schema")
    bad = _BadRow(name, path, delimiter, options.header)
    try:
        reader = _csv_reader(stream, schema, options, delimiter, bad)
    except pa.ArrowInvalid as e:
        raise bad.error(e) from None
    if schema is None:
        return _inferred(reader, name, bad)
    missing = [n for n in schema.names if n not in reader.schema.names]
    extra = [n for n in reader.schema.names if n not in schema.names]
    if missing or extra:
        problems = [f"missing column(s) {missing}"] if missing else []
        problems += [f"unknown column(s) {extra}"] if extra else []
        raise SchemaMismatchError(f"{name} does not match the table schema: " + "; ".join(problems))
    return Source(schema, _converted(reader, schema, name, bad=bad), None)


def _csv_reader(
    stream: pa.NativeFile, schema: pa.Schema | None, options: CsvOptions, delimiter: str, bad: _BadRow
) -> pacsv.CSVStreamingReader:
    return pacsv.open_csv(
        stream,
        read_options=pacsv.ReadOptions(
            block_size=_BLOCK_SIZE,
            column_names=None if options.header else schema.names,  # type: ignore[union-attr]
        ),
        parse_options=pacsv.ParseOptions(delimiter=delimiter, invalid_row_handler=bad),
        convert_options=pacsv.ConvertOptions(
            null_values=list(options.null_values),
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            column_types=None if schema is None else {n: pa.string() for n in schema.names},
        ),
    )


def _open_json(stream: pa.NativeFile, name: str, schema: pa.Schema | None) -> Source:
    """With a schema, a column whose JSON form pyarrow's JSON reader does not parse as its type
    is read as :func:`_json_type` says and converted here, so a bad value is reported with its
    row and column."""
    read_as = None if schema is None else pa.schema([f.with_type(_json_type(f.type)) for f in schema])
    reader = pajson.open_json(
        stream,
        read_options=pajson.ReadOptions(block_size=_BLOCK_SIZE),
        parse_options=pajson.ParseOptions(
            explicit_schema=read_as, unexpected_field_behavior="infer" if schema is None else "error"
        ),
    )
    if schema is None:
        return _inferred(reader, name)
    return Source(schema, _converted(reader, schema, name, _from_json), None)


def _inferred(reader: pa.RecordBatchReader, name: str, bad: _BadRow | None = None) -> Source:
    """A text file read with the types pyarrow infers, but timestamps in microseconds, the unit
    Iceberg, Delta and Spark hold (pyarrow infers seconds for ``2013-01-01 05:00:00``, which no
    Parquet file can hold, so a table created so would refuse every Parquet file, its own
    exports included)."""
    schema = pa.schema([f.with_type(inferred_type(f.type)) for f in reader.schema])
    return Source(schema, _converted(reader, schema, name, bad=bad), None)


def _json_type(to: pa.DataType) -> pa.DataType:
    """What pyarrow's JSON reader parses a column of type ``to`` as: dates, times and binary as
    text (ISO 8601, ISO 8601, base64: the reader takes dates and times only as numbers, and
    binary text as its raw bytes); a duration as an integer count of its unit (the reader has
    no duration, nor any cast from text); a second or millisecond timestamp as a microsecond
    one (the reader refuses more fraction digits than the unit has, even zeros, and Python's
    ``isoformat`` writes six). Anything else as itself: numbers, text, booleans, decimals
    (number or text), timestamps (ISO 8601 with ``Z`` or an offset, or without, read as UTC)."""
    if pa.types.is_date(to) or pa.types.is_time(to) or _is_binary(to):
        return pa.string()
    if pa.types.is_duration(to):
        return pa.int64()
    if pa.types.is_timestamp(to) and to.unit in ("s", "ms"):
        return pa.timestamp("us", to.tz)
    return to


def _from_json(column: pa.Array, to: pa.DataType) -> pa.Array:
    """A column read as :func:`_json_type` says, as type ``to``; a lossy conversion (a fraction
    of a second finer than the column's unit) is refused."""
    if column.type == to:
        return column
    if pa.types.is_time(to):
        return _time_of_day(column, to)
    if _is_binary(to):
        return _from_base64(column, to)
    return pc.cast(column, to)


def _is_binary(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_binary_view(t)
    )


def _time_of_day(text: pa.Array, to: pa.DataType) -> pa.Array:
    """ISO 8601 times of day (``HH:MM[:SS[.fraction]]``, no offset) as ``to``. pyarrow casts no
    text to a time, so they are parsed as nanosecond timestamps on 1970-01-01 and cast."""
    try:
        stamps = pc.cast(pc.binary_join_element_wise("1970-01-01T", text, ""), pa.timestamp("ns"))
    except pa.ArrowInvalid:
        raise pa.ArrowInvalid("not an ISO 8601 time of day, HH:MM[:SS[.fraction]]") from None
    return pc.cast(stamps, to)


def _from_base64(text: pa.Array, to: pa.DataType) -> pa.Array:
    """Base64 text decoded to ``to`` (pyarrow has no base64 kernel: one value at a time)."""
    try:
        values = [None if v is None else base64.b64decode(v, validate=True) for v in text.to_pylist()]
    except ValueError as e:
        raise pa.ArrowInvalid(f"not base64: {e}") from None
    return pa.array(values, type=to)


Convert = Callable[[pa.Array, pa.DataType], pa.Array]
"""Converts a column as read to its table type; raises ``pa.ArrowInvalid`` for a bad value."""
_CONVERT_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError)


def _cast(column: pa.Array, to: pa.DataType) -> pa.Array:
    return pc.cast(column, to)


def _converted(
    reader: pa.RecordBatchReader, schema: pa.Schema, name: str, convert: Convert = _cast, bad: _BadRow | None = None
) -> Iterator[pa.RecordBatch]:
    """Batches as read converted to ``schema``'s types; the first bad value named by row and column."""
    rows = 0
    for batch in _located(reader, name, bad):
        columns = []
        for field in schema:
            column = batch.column(field.name)
            try:
                columns.append(convert(column, field.type))
            except _CONVERT_ERRORS as e:
                row = _first_bad(column, field.type, convert)
                value = repr(column[row].as_py()) if pa.types.is_string(column.type) else str(column[row])
                raise SchemaMismatchError(
                    f"{name}, row {rows + row + 1}, column {field.name!r}: {value} is not {field.type} ({e})"
                ) from None
        rows += batch.num_rows
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _first_bad(column: pa.Array, to: pa.DataType, convert: Convert = _cast) -> int:
    """Index of the first value of ``column`` that ``convert`` refuses (bisecting conversions)."""
    lo, hi = 0, len(column)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            convert(column.slice(lo, mid - lo), to)
            lo = mid
        except _CONVERT_ERRORS:
            hi = mid
    return lo


def _located(batches: Iterable[pa.RecordBatch], name: str, bad: _BadRow | None = None) -> Iterator[pa.RecordBatch]:
    """The batches; one that does not parse or decode is reported with the file and the rows
    read before it (a CSV row of another width by ``bad``, with its own number)."""
    rows = 0
    it = iter(batches)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except (pa.ArrowInvalid, OSError) as e:
            raise (
                bad.error(e, rows)
                if bad is not None
                else InvalidInputError(f"cannot read {name} after row {rows}: {e}")
            ) from None
        rows += batch.num_rows
        yield batch
