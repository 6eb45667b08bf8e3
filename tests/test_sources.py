"""Files users bring (Parquet, CSV, JSON Lines, gzipped or not) read as the table's types."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from castable.errors import InvalidInputError, SchemaMismatchError
from castable.sources import CsvOptions, file_batches, format_of, open_source

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
