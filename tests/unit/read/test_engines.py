"""Scans handed to other engines: the Arrow PyCapsule stream interface (DuckDB, Polars,
pyarrow), ``to_polars`` and ``to_duckdb``, with deletes applied, on both stores."""

from __future__ import annotations

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from helpers.tables import events, keyed_events

import castable


@pytest.fixture
def table(table_uri: tuple[str, dict | None]) -> castable.Table:
    t = keyed_events(table_uri, 1000)
    t.delete("id BETWEEN 100 AND 199")
    t.delete("id IN (5, 7, 900)")
    return t


def expected() -> pa.Table:
    """The live rows: ``events(0, 1000)`` less the deleted ids."""
    live = [i for i in range(1000) if not (100 <= i <= 199) and i not in (5, 7, 900)]
    return events(0, 1000).take(live)


def test_duckdb_reads_a_scan_through_the_stream_interface(table: castable.Table) -> None:
    scan = table.scan(["id", "value"], "category = 'a'")  # noqa: F841 - DuckDB finds it by its name
    got = duckdb.sql("select count(*), sum(id) from scan").fetchall()
    want = [r for r in expected().to_pylist() if r["category"] == "a"]
    assert got == [(len(want), sum(r["id"] for r in want))]


def test_polars_and_pyarrow_read_the_stream(table: castable.Table) -> None:
    frame = pl.from_arrow(pa.RecordBatchReader.from_stream(table.scan()))
    assert isinstance(frame, pl.DataFrame) and frame.height == 897
    assert pa.table(table.scan()).sort_by("id").equals(expected())
    reader = pa.RecordBatchReader.from_stream(table.scan(["id"]), schema=pa.schema([("id", pa.int64())]))
    assert sum(b.num_rows for b in reader) == 897


def test_to_polars_and_to_duckdb(table: castable.Table) -> None:
    frame = table.scan(filter="id < 50").to_polars()
    assert frame.columns == ["id", "category", "value"] and frame["id"].to_list() == [
        i for i in range(50) if i not in (5, 7)
    ]
    con = table.scan(["id", "category"]).to_duckdb("events")
    assert con.sql("select category, count(*) from events group by 1 order by 1 nulls last").fetchall() == [
        ("a", 224),
        ("b", 224),
        ("c", 225),
        (None, 224),
    ]
    mine = duckdb.connect()
    assert table.scan().to_duckdb("t", connection=mine) is mine
    assert mine.sql("select count(*) from t").fetchall() == [(897,)]
