"""Erase on files Spark writes by default (INT96 timestamps): a surviving value is never
changed. In range (1677 to 2262), splice keeps the INT96 column as it was and rewrite writes
INT96 too; a file holding a value outside that range is refused by any erase that would
re-encode it, before anything is written, and add_files (which decodes) refuses such a file
(issue: files the world writes)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.tables import snapshot_of

import castable
import castable.ops.register
from castable.errors import UnsupportedFileError

ROWS = 200_000
ROW_GROUP = 50_000
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ns")), ("payload", pa.string())])


def spark_like(root: Path, last: dt.datetime, older: pytest.MonkeyPatch | None = None) -> castable.Table:
    """A table holding one INT96 file of four row groups (over 5 MiB, so it can be spliced);
    the last row's timestamp is ``last``. With ``older``, the file is registered as castable
    did before registration read INT96 columns, so a table can hold a value out of range."""
    if older is not None:
        older.setattr(castable.ops.register, "check_int96_file", lambda *args: None)
    rng = np.random.default_rng(7)
    start = np.datetime64("2020-01-01T00:00:00", "us")
    ts = (start + rng.integers(0, 10**12, ROWS - 1).astype("timedelta64[us]")).astype("datetime64[us]")
    rows = pa.table(
        {
            "id": pa.array(np.arange(ROWS), pa.int64()),
            "ts": pa.concat_arrays([pa.array(ts, pa.timestamp("us")), pa.array([last], pa.timestamp("us"))]),
            "payload": pa.array([f"p{i:012d}" * 2 for i in range(ROWS)]),
        }
    )
    t = castable.create_table(str(root), SCHEMA, primary_key="id")
    (root / "data").mkdir()
    pq.write_table(
        rows, root / "data" / "spark.parquet", use_deprecated_int96_timestamps=True, row_group_size=ROW_GROUP
    )
    t.add_files(["data/spark.parquet"], verify="footer")  # as the Spark job registers what it wrote
    return t


def duckdb_rows(root: Path, t: castable.Table) -> list[tuple[int, dt.datetime]]:
    """(id, ts) of every row of the table's files as DuckDB reads them (INT96 without overflow)."""
    paths = [str(root / f.path) for f in t.manifest.data_files]
    return duckdb.sql(f"SELECT id, ts FROM read_parquet({paths}) ORDER BY id").fetchall()


@pytest.mark.parametrize("mode", ["splice", "rewrite"])
def test_erase_keeps_every_surviving_int96_value(tmp_path: Path, mode: str) -> None:
    t = spark_like(tmp_path, dt.datetime(2200, 1, 1, 12, 30))
    before = duckdb_rows(tmp_path, t)
    report = t.erase("id = 60000", mode=mode)
    assert [e.method for e in report.files] == [mode]
    assert duckdb_rows(tmp_path, t) == [row for row in before if row[0] != 60000]
    (new,) = t.manifest.data_files
    physical = pq.ParquetFile(tmp_path / new.path).schema.column(1).physical_type
    assert physical == "INT96", "as Spark wrote it, so Spark reads the new file as it read the old"


@pytest.mark.parametrize(("mode", "erased"), [("rewrite", 5), ("splice", ROWS - 5)])
def test_erase_refuses_int96_values_it_would_change(
    tmp_path: Path, mode: str, erased: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = spark_like(tmp_path, dt.datetime(9999, 12, 31, 3), older=monkeypatch)
    before = snapshot_of(t.store)
    with pytest.raises(UnsupportedFileError, match="outside 1677-09-21 to 2262-04-11"):
        t.erase(f"id = {erased}", mode=mode)
    assert snapshot_of(t.store) == before


def test_a_splice_away_from_out_of_range_values_copies_them_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = spark_like(tmp_path, dt.datetime(9999, 12, 31, 3), older=monkeypatch)
    before = duckdb_rows(tmp_path, t)
    t.erase("id = 5", mode="splice")
    assert duckdb_rows(tmp_path, t) == [row for row in before if row[0] != 5]


@pytest.mark.parametrize("verify", ["decode", "footer"])
def test_add_files_refuses_int96_values_castable_would_misread(tmp_path: Path, verify: str) -> None:
    """However it is verified: registered, a 9999-12-31 sentinel would scan as 1816-03-29."""
    with pytest.raises(UnsupportedFileError, match="outside 1677-09-21 to 2262-04-11"):
        spark_like(tmp_path, dt.datetime(9999, 12, 31, 3))
    t = castable.open_table(str(tmp_path))
    before = snapshot_of(t.store)
    with pytest.raises(UnsupportedFileError, match="outside 1677-09-21 to 2262-04-11"):
        t.add_files(["data/spark.parquet"], verify=verify)  # type: ignore[arg-type]
    assert snapshot_of(t.store) == before and t.count() == 0


def test_a_nested_int96_value_out_of_range_is_refused_as_clearly(tmp_path: Path) -> None:
    """Spark writes INT96 inside structs, lists and maps too: the range check reaches them."""
    inner = pa.struct([("at", pa.timestamp("us")), ("many", pa.list_(pa.timestamp("us")))])
    far = dt.datetime(9999, 12, 31, 3)
    rows = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "event": pa.array([{"at": dt.datetime(2020, 1, 1), "many": []}, {"at": None, "many": [far]}], inner),
        }
    )
    schema = pa.schema(
        [("id", pa.int64()), ("event", pa.struct([("at", pa.timestamp("ns")), ("many", pa.list_(pa.timestamp("ns")))]))]
    )
    t = castable.create_table(str(tmp_path), schema)
    (tmp_path / "data").mkdir()
    pq.write_table(rows, tmp_path / "data" / "nested.parquet", use_deprecated_int96_timestamps=True)
    for verify in ("footer", "decode"):
        with pytest.raises(UnsupportedFileError, match="outside 1677-09-21 to 2262-04-11"):
            t.add_files(["data/nested.parquet"], verify=verify)  # type: ignore[arg-type]
    assert t.count() == 0
