"""The one rule for types at every entry: a conversion where no value changes is applied with
exact values, anything else is refused with the column, the types and how to convert, and the
table is left exactly as it was, whichever way the rows came (Arrow tables, batches, readers,
iterables, Arrow streams, polars, pandas, Parquet files read as the CLI reads them)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.tables import snapshot_of

import castable
from castable.errors import SchemaMismatchError
from castable.format.conversions import widens
from castable.inputs.sources import open_source

UTC = dt.UTC
T0 = dt.datetime(2013, 1, 1, 5, 0, 0)

LOSSLESS: list[tuple[pa.Array, pa.DataType]] = [
    (pa.array([1, -2, None], pa.int32()), pa.int64()),
    (pa.array([-128, 127], pa.int8()), pa.int16()),
    (pa.array([0, 2**32 - 1], pa.uint32()), pa.int64()),
    (pa.array([1.5, None], pa.float32()), pa.float64()),
    (pa.array([T0, None], pa.timestamp("s")), pa.timestamp("us")),
    (pa.array([T0], pa.timestamp("ms", "UTC")), pa.timestamp("us", "UTC")),
    (pa.array([dt.time(5, 1, 2)], pa.time32("s")), pa.time64("us")),
    (pa.array(["a", None]), pa.large_string()),
    (pa.array(["a", "b"], pa.large_string()), pa.string()),
    (pa.array(["a"], pa.string_view()), pa.string()),
    (pa.array([b"\x00"], pa.large_binary()), pa.binary()),
    (pa.array(["x", "y", "x"]).dictionary_encode(), pa.string()),
    (pa.array(["x", "y"]), pa.dictionary(pa.int32(), pa.string())),
    (pa.array([Decimal("1.25")], pa.decimal128(5, 2)), pa.decimal128(10, 2)),
    (pa.array([Decimal("1.25")], pa.decimal128(5, 2)), pa.decimal256(40, 2)),
    (pa.array([dt.date(2024, 2, 29)], pa.date32()), pa.timestamp("us")),
    (pa.array([None, None], pa.null()), pa.int64()),
    # each value checked: it arrives exactly
    (pa.array([1, -(2**31)], pa.int64()), pa.int32()),
    (pa.array([2**53, -7], pa.int64()), pa.float64()),
    (pa.array([5], pa.uint64()), pa.int8()),
    (pa.array([1_000, 2_000_000], pa.timestamp("ns")), pa.timestamp("us")),
    (pa.array([T0], pa.timestamp("ms", "UTC")), pa.timestamp("s", "UTC")),
    (pa.array([T0], pa.timestamp("us", "UTC")), pa.timestamp("us", "Europe/Paris")),
    (pa.array([Decimal("1.20")], pa.decimal128(10, 2)), pa.decimal128(4, 1)),
]

REFUSED: list[tuple[pa.Array, pa.DataType, str]] = [
    (pa.array(["2"]), pa.int64(), "does not parse text"),
    (pa.array(["2024-01-01"]), pa.date32(), "does not parse text"),
    (pa.array([1.0]), pa.int64(), "does not round floats"),
    (pa.array([1.5]), pa.float32(), "float cannot hold every double"),
    (pa.array([T0], pa.timestamp("us")), pa.timestamp("us", "UTC"), "not an instant"),
    (pa.array([T0], pa.timestamp("us", "UTC")), pa.timestamp("us"), "drop the zone"),
    (pa.array([1]), pa.string(), "cast it to string"),
    (pa.array([True]), pa.int64(), "cast it to int64"),
    (pa.array([b"a"]), pa.string(), "cast it to string"),
    # each value checked: the first that would change is named
    (pa.array([2**31], pa.int64()), pa.int32(), "2147483648 not in range"),
    (pa.array([2**53 + 1], pa.int64()), pa.float64(), "not in range"),
    (pa.array([-1], pa.int32()), pa.uint32(), "not in range"),
    (pa.array([1_001], pa.timestamp("ns")), pa.timestamp("us"), "would lose data"),
    (pa.array([T0.replace(microsecond=1000)], pa.timestamp("ms", "UTC")), pa.timestamp("s", "UTC"), "--widen"),
    (pa.array([Decimal("1.25")], pa.decimal128(10, 2)), pa.decimal128(4, 1), "data loss"),
]


def _entries(tmp_path: Path) -> dict[str, Callable[[pa.Table], Any]]:
    """Each way rows reach a write, from the same Arrow table."""

    def parquet(rows: pa.Table) -> Any:
        path = tmp_path / f"in-{len(list(tmp_path.iterdir()))}.parquet"
        pq.write_table(rows, path, store_schema=True)
        return open_source(str(path), path.name).batches

    return {
        "table": lambda rows: rows,
        "batch": lambda rows: rows.combine_chunks().to_batches()[0],
        "reader": lambda rows: pa.RecordBatchReader.from_batches(rows.schema, rows.to_batches()),
        "iterable": lambda rows: iter(rows.to_batches()),
        "arrow-stream": lambda rows: _Stream(rows),
        "parquet": parquet,
    }


def _parquet_keeps(values: pa.Array) -> bool:
    """Whether a Parquet file holds the type as itself (it has no seconds, and pyarrow reads
    other types back as their nearest Parquet type unless the Arrow schema is stored)."""
    return not (pa.types.is_timestamp(values.type) and values.type.unit == "s") and not pa.types.is_null(values.type)


class _Stream:
    """An object that is only an Arrow stream (as polars' and DuckDB's results are)."""

    def __init__(self, rows: pa.Table) -> None:
        self.rows = rows

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.rows.__arrow_c_stream__(requested_schema)


ENTRIES = ["table", "batch", "reader", "iterable", "arrow-stream", "parquet"]


def _table(tmp_path: Path, column: pa.DataType) -> castable.Table:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("x", column)])
    return castable.create_table(str(tmp_path / "t"), schema)


def _rows(values: pa.Array) -> pa.Table:
    return pa.table({"id": pa.array(range(len(values)), pa.int64()), "x": values})


@pytest.mark.parametrize(
    ("entry", "values", "to"),
    [(e, v, t) for v, t in LOSSLESS for e in ENTRIES if e != "parquet" or _parquet_keeps(v)],
    ids=[f"{e}-{v.type}->{t}" for v, t in LOSSLESS for e in ENTRIES if e != "parquet" or _parquet_keeps(v)],
)
def test_a_lossless_conversion_is_applied_with_exact_values(
    tmp_path: Path, entry: str, values: pa.Array, to: pa.DataType
) -> None:
    t = _table(tmp_path, to)
    result = t.append(_entries(tmp_path)[entry](_rows(values)))
    assert result.rows_added == len(values)
    got = t.scan().to_arrow().sort_by("id").column("x")
    assert got.type.equals(to)
    assert got.to_pylist() == values.cast(to).to_pylist()


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(
    ("values", "to", "why"), REFUSED, ids=[f"{v.type}->{t}-{i}" for i, (v, t, _) in enumerate(REFUSED)]
)
def test_anything_else_is_refused_and_the_table_unchanged(
    tmp_path: Path, entry: str, values: pa.Array, to: pa.DataType, why: str
) -> None:
    t = _table(tmp_path, to)
    t.append(pa.table({"id": pa.array([100], pa.int64()), "x": pa.nulls(1, to)}))
    before = snapshot_of(t.store)
    with pytest.raises(SchemaMismatchError, match="column 'x'") as refused:
        t.append(_entries(tmp_path)[entry](_rows(values)))
    assert why in str(refused.value)
    assert snapshot_of(t.store) == before


def test_what_is_always_applied_is_what_alter_may_widen(tmp_path: Path) -> None:
    """``alter`` takes exactly the conversions that need no look at the values."""
    for values, to in LOSSLESS[:17]:
        given = values.type.value_type if pa.types.is_dictionary(values.type) else values.type
        target = to.value_type if pa.types.is_dictionary(to) else to
        assert widens(given, target), (given, target)
    assert not widens(pa.timestamp("us"), pa.timestamp("ns")), "nanoseconds overflow in 2262"
    assert not widens(pa.int64(), pa.int32())


def test_alter_widens_seconds_to_microseconds_and_old_files_read_exactly(tmp_path: Path) -> None:
    t = _table(tmp_path, pa.timestamp("s", "UTC"))
    t.append(_rows(pa.array([T0.replace(tzinfo=UTC)], pa.timestamp("s", "UTC"))))
    t.alter().widen_column("x", pa.timestamp("us", "UTC")).commit()
    finer = dt.datetime(2013, 1, 1, 5, 0, 0, 123456, tzinfo=UTC)
    t.append(pa.table({"id": pa.array([1], pa.int64()), "x": pa.array([finer], pa.timestamp("us", "UTC"))}))
    assert t.scan().to_arrow().sort_by("id").column("x").to_pylist() == [T0.replace(tzinfo=UTC), finer]


def test_a_table_of_seconds_takes_its_own_parquet_export(tmp_path: Path) -> None:
    """Parquet has no seconds: the export holds milliseconds or microseconds, whole seconds each."""
    t = _table(tmp_path, pa.timestamp("s", "UTC"))
    t.append(_rows(pa.array([T0.replace(tzinfo=UTC), None], pa.timestamp("s", "UTC"))))
    export = tmp_path / "export.parquet"
    pq.write_table(t.scan().to_arrow(), export)
    assert pq.read_schema(export).field("x").type != pa.timestamp("s", "UTC")
    t.append(open_source(str(export), export.name).batches)
    assert t.scan().count() == 4


PANDAS: list[tuple[pd.DataFrame, pa.DataType, list[Any] | str]] = [
    (pd.DataFrame({"x": [1, 2]}), pa.int32(), [1, 2]),
    (pd.DataFrame({"x": pd.array([1, None], "Int64")}), pa.int64(), [1, None]),
    (pd.DataFrame({"x": pd.Categorical(["a", "b", "a"])}), pa.string(), ["a", "b", "a"]),
    (pd.DataFrame({"x": pd.to_datetime(["2013-01-01 05:00:00"])}), pa.timestamp("us"), [T0]),
    (pd.DataFrame({"x": [1.0, None]}), pa.float64(), [1.0, None]),
    (pd.DataFrame({"x": [None, None]}), pa.string(), [None, None]),
    (pd.DataFrame({"x": [2**40]}), pa.int32(), "not in range"),
    (pd.DataFrame({"x": ["2", "3"]}), pa.int64(), "does not parse text"),
    (pd.DataFrame({"x": [1.0, None]}), pa.int64(), "astype('Int64')"),
    (pd.DataFrame({"x": pd.to_datetime(["2013-01-01 05:00:00.000000001"])}), pa.timestamp("us"), "would lose data"),
    (pd.DataFrame({"x": [1, "a"]}), pa.int64(), "give each column values of one type"),
    (pd.DataFrame({"y": [1]}), pa.int64(), "missing column 'x'"),
    (pd.DataFrame({"x": [1], "z": [2]}), pa.int64(), "unknown columns"),
]


@pytest.mark.parametrize(("frame", "to", "expected"), PANDAS, ids=[f"pandas-{i}" for i in range(len(PANDAS))])
def test_pandas_is_held_to_the_same_rule(tmp_path: Path, frame: pd.DataFrame, to: pa.DataType, expected: Any) -> None:
    schema = pa.schema([pa.field("x", to)])
    t = castable.create_table(str(tmp_path / "t"), schema)
    if isinstance(expected, list):
        t.append(frame)
        assert t.scan().to_arrow().column("x").to_pylist() == expected
        return
    before = snapshot_of(t.store)
    with pytest.raises(SchemaMismatchError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        t.append(frame)
    assert snapshot_of(t.store) == before


def test_polars_frames_are_arrow_streams(tmp_path: Path) -> None:
    t = _table(tmp_path, pa.string())
    t.append(pl.DataFrame({"id": [1, 2], "x": ["a", None]}))
    assert t.scan().to_arrow().sort_by("id").column("x").to_pylist() == ["a", None]
    with pytest.raises(SchemaMismatchError, match="column 'x' is int64, expected string"):
        t.append(pl.DataFrame({"id": [3], "x": [1]}))
