"""Files users bring (Parquet, CSV, JSON Lines, gzipped or not) read as the table's types."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import castable.inputs.sources
from castable.errors import InvalidInputError, SchemaMismatchError
from castable.inputs.sources import CsvOptions, file_batches, format_of, json_rows, json_value, open_source

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("price", pa.decimal128(10, 2)),
    ]
)


def read(path: Path, **kwargs: object) -> pa.Table:
    source = open_source(str(path), path.name, schema=SCHEMA, **kwargs)  # type: ignore[arg-type]
    return pa.Table.from_batches(list(source.batches), schema=source.schema)


FORMATS_BY_NAME = [
    ("a.csv", "csv"),
    ("a.TSV", "csv"),
    ("a.csv.gz", "csv"),
    ("a.jsonl", "jsonl"),
    ("a.ndjson.gz", "jsonl"),
    ("a.json", "jsonl"),
    ("a.parquet", "parquet"),
    ("part-0000", "parquet"),
]


@pytest.mark.parametrize(("name", "fmt"), FORMATS_BY_NAME)
def test_format_from_the_extension(name: str, fmt: str) -> None:
    assert format_of(name) == fmt


def test_unknown_format_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="format must be one of"):
        format_of("a.csv", "xlsx")


def test_csv_is_parsed_with_the_table_types(tmp_path: Path) -> None:
    """`1` is a double, `123` a string, timestamps in castable's own CSV output read back,
    unquoted empty and NULL are NULL, a quoted empty string stays a string, columns in any order."""
    path = tmp_path / "a.csv"
    path.write_text(
        "name,id,amount,ts,price\n"
        "123,1,1,2026-01-01 00:00:00.000000Z,10.50\n"
        ',2,NULL,2026-01-01T01:00:00Z,\n"",3,2.5,,0.01\n'
    )
    got = read(path)
    assert got.schema == SCHEMA
    assert got.column("name").to_pylist() == ["123", None, ""]
    assert got.column("amount").to_pylist() == [1.0, None, 2.5]
    assert got.column("ts").null_count == 1 and str(got.column("price")[0]) == "10.50"


def test_a_bad_csv_value_names_file_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("id,name,amount,ts,price\n" + "".join(f"{i},n,1,,1\n" for i in range(1000)) + "7,n,abc,,1\n")
    with pytest.raises(SchemaMismatchError, match=r"bad.csv, row 1001, column 'amount': 'abc' is not double"):
        read(path)


def test_csv_with_other_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("id,nom,amount,ts,price\n1,x,1,,1\n")
    with pytest.raises(SchemaMismatchError, match=r"missing column\(s\) \['name'\]; unknown column\(s\) \['nom'\]"):
        read(path)


def test_headerless_gzipped_tsv_and_other_delimiters(tmp_path: Path) -> None:
    path = tmp_path / "a.tsv.gz"
    with gzip.open(path, "wt") as f:
        f.write("1\tx\t2\t\t3.00\n")
    assert read(path, csv=CsvOptions(header=False)).column("name").to_pylist() == ["x"]
    semi = tmp_path / "b.csv"
    semi.write_text("id;name;amount;ts;price\n1;x;2;;3\n")
    assert read(semi, csv=CsvOptions(delimiter=";")).column("amount").to_pylist() == [2.0]
    with pytest.raises(InvalidInputError, match="without a header needs the table's schema"):
        open_source(str(path), path.name, csv=CsvOptions(header=False))


def test_json_lines_with_the_table_types(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": 1, "name": "a", "amount": 1, "ts": "2026-01-01T00:00:00Z", "price": "1.25"}\n{"id": 2}\n')
    got = read(path)
    assert got.column("id").to_pylist() == [1, 2] and got.column("amount").to_pylist() == [1.0, None]
    unexpected = tmp_path / "b.jsonl"
    unexpected.write_text('{"id": 1, "surprise": true}\n')
    with pytest.raises(InvalidInputError, match=r"cannot read b\.jsonl as jsonl: .*unexpected field"):
        read(unexpected)


EVERY_TYPE = pa.table(
    {
        "d32": pa.array([date(2026, 1, 1), None, date(1900, 2, 28)], pa.date32()),
        "d64": pa.array([date(2026, 1, 1), date(1970, 1, 1), None], pa.date64()),
        "t32s": pa.array([time(4), None, time(23, 59, 59)], pa.time32("s")),
        "t32ms": pa.array([time(4, 0, 0, 123000), time(0), None], pa.time32("ms")),
        "t64us": pa.array([time(4, 0, 0, 123456), None, time(12, 30)], pa.time64("us")),
        "t64ns": pa.array([None, time(0, 0, 0, 1), time(23, 59, 59, 999999)], pa.time64("ns")),
        "ts_s": pa.array(
            [datetime(2026, 1, 1, tzinfo=UTC), None, datetime(1, 1, 1, tzinfo=UTC)], pa.timestamp("s", "UTC")
        ),
        "ts_ms": pa.array([datetime(2026, 1, 1, 0, 0, 0, 123000, tzinfo=UTC), None, None], pa.timestamp("ms", "UTC")),
        "ts_us": pa.array([datetime(2026, 1, 1, 4, 0, 0, 5), datetime(9999, 12, 31), None], pa.timestamp("us")),
        "ts_ns": pa.array(
            [datetime(2026, 6, 1, 12, 0, 0, 1, tzinfo=ZoneInfo("Europe/Paris")), None, None],
            pa.timestamp("ns", "Europe/Paris"),
        ),
        "dec": pa.array([Decimal("10.50"), Decimal("-0.01"), None], pa.decimal128(10, 2)),
        "dec256": pa.array([Decimal("123456789012345678901234567890.12345"), None, Decimal(0)], pa.decimal256(40, 5)),
        "bin": pa.array([b"\x00\xff", b"", None], pa.binary()),
        "lbin": pa.array([b"abc", None, b"\n"], pa.large_binary()),
        "fbin": pa.array([b"abc", None, b"\x00\x01\x02"], pa.binary(3)),
        "vbin": pa.array([b"x" * 20, None, b"y"], pa.binary_view()),
        "dur": pa.array([timedelta(seconds=1.5), None, timedelta(days=-1)], pa.duration("ms")),
        "s": pa.array(["a", None, "2026-01-01"], pa.string()),
        "i": pa.array([1, None, 3], pa.int64()),
    }
)


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    text = "".join(json.dumps(row, default=json_value) + "\n" for row in rows)
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


def read_as(path: Path, schema: pa.Schema) -> pa.Table:
    source = open_source(str(path), path.name, schema=schema)
    return pa.Table.from_batches(list(source.batches), schema=source.schema)


@pytest.mark.parametrize("name", ["a.jsonl", "a.ndjson.gz"])
def test_json_lines_reads_back_every_type_as_scan_writes_it(tmp_path: Path, name: str) -> None:
    """Dates, times and timestamps as ISO 8601, decimals as text, binary as base64, durations as counts."""
    path = tmp_path / name
    write_jsonl(path, json_rows(EVERY_TYPE))
    got = read_as(path, EVERY_TYPE.schema)
    assert got.schema == EVERY_TYPE.schema
    assert got.equals(EVERY_TYPE), got.to_pylist()


def test_json_lines_timestamps_with_z_or_an_offset(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("ts", pa.timestamp("ms", "UTC")), pa.field("dec", pa.decimal128(5, 2))])
    path = tmp_path / "a.jsonl"
    path.write_text(
        '{"ts": "2026-01-01T00:00:00.123000+00:00", "dec": 1.25}\n'
        '{"ts": "2026-01-01T00:00:00.123Z", "dec": "1.25"}\n'
        '{"ts": "2026-01-01T01:00:00.123+01:00", "dec": 1}\n'
    )
    got = read_as(path, schema)
    want = datetime(2026, 1, 1, 0, 0, 0, 123000, tzinfo=UTC)
    assert got.column("ts").to_pylist() == [want] * 3
    assert got.column("dec").to_pylist() == [Decimal("1.25"), Decimal("1.25"), Decimal("1.00")]


BAD_JSON_VALUES = [
    ("d32", '"2026-02-30"', r"'2026-02-30' is not date32\[day\]"),
    ("t32s", '"04:00:00.5"', r"'04:00:00.5' is not time32\[s\] \(.*lose data"),
    ("t64us", '"4 pm"', r"'4 pm' is not time64\[us\] \(not an ISO 8601 time of day"),
    ("ts_ms", '"2026-01-01T00:00:00.123456Z"', r"2026-01-01 00:00:00.123456\+00:00 is not timestamp\[ms, tz=UTC\]"),
    ("bin", '"not base64!"', r"'not base64!' is not binary \(not base64: "),
    ("fbin", '"YWI="', r"'YWI=' is not fixed_size_binary\[3\] \(.*length 3"),
]


@pytest.mark.parametrize(("column", "value", "message"), BAD_JSON_VALUES)
def test_a_bad_json_value_names_file_row_and_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, column: str, value: str, message: str
) -> None:
    """Rows are counted across blocks (a small block size makes many)."""
    monkeypatch.setattr(castable.inputs.sources, "_BLOCK_SIZE", 1024)
    path = tmp_path / "bad.jsonl.gz"
    good = json_rows(EVERY_TYPE.slice(0, 1))[0]
    write_jsonl(path, [good] * 1000)
    with gzip.open(path, "at") as f:
        others = {k: v for k, v in good.items() if k != column}
        f.write(json.dumps(others, default=json_value)[:-1] + f', "{column}": {value}}}\n')
    source = open_source(str(path), path.name, schema=EVERY_TYPE.schema)
    with pytest.raises(SchemaMismatchError, match=rf"bad\.jsonl\.gz, row 1001, column '{column}': {message}"):
        list(source.batches)


def test_not_the_format_it_claims(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    path.write_bytes(b"id,name\n1,x\n")
    with pytest.raises(InvalidInputError, match=r"cannot read a\.parquet as parquet"):
        read(path)


def test_parquet_is_streamed_a_row_group_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": list(range(1000))}), path, row_group_size=300)
    batches = list(file_batches(pq.ParquetFile(path), batch_size=200))
    assert [b.num_rows for b in batches] == [200, 100, 200, 100, 200, 100, 100]


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("header", [True, False])
def test_a_csv_row_of_another_width_is_named_by_its_row_number(tmp_path: Path, gz: bool, header: bool) -> None:
    """pyarrow names such a row by its text only, and only in the block it parses: the row number
    is found in the file itself (quoted fields spanning lines counted as one row)."""
    rows = [f'{i},"x\n{"y" * 60}",3' for i in range(1, 70_000)] + ["70000,short"] + ["70001,a,3"]  # past a block
    text = ("a,b,c\n" if header else "") + "\n".join(rows) + "\n"
    path = tmp_path / ("f.csv.gz" if gz else "f.csv")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.int64())])
    with pytest.raises(InvalidInputError, match=r"row 70000: expected 3 fields, got 2: '70000,short'"):
        list(open_source(str(path), path.name, schema=schema, csv=CsvOptions(header=header)).batches)
