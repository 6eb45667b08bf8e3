"""Files as pyarrow writes them with every codec and encoding it offers (dictionary and plain,
byte_stream_split, delta encodings, data page v1 and v2, page indexes, bloom filters,
statistics off): registered with add_files, scanned and filtered exactly as pyarrow reads them,
erased from by rewrite with a verified purge and (over 10 MiB) by splice with every surviving value
unchanged as pyarrow, DuckDB and DataFusion read it, and deleted from (issue: files the world
writes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers.engines import engines

import castable

ROWS = 3_000
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("n", pa.int32()),
        pa.field("x", pa.float64()),
        pa.field("s", pa.string()),
        pa.field("b", pa.binary()),
        pa.field("ts", pa.timestamp("us", "UTC")),
    ]
)

VARIANTS: dict[str, dict[str, Any]] = {
    **{codec: {"compression": codec} for codec in ("none", "snappy", "gzip", "brotli", "lz4", "zstd")},
    "plain": {"use_dictionary": False},
    "page v2": {"data_page_version": "2.0"},
    "byte_stream_split": {"use_dictionary": False, "column_encoding": {"x": "BYTE_STREAM_SPLIT"}},
    "delta": {
        "use_dictionary": False,
        "column_encoding": {"n": "DELTA_BINARY_PACKED", "s": "DELTA_LENGTH_BYTE_ARRAY", "b": "DELTA_BYTE_ARRAY"},
    },
    "page index and bloom filter": {"write_page_index": True, "bloom_filter_options": {"id": {"ndv": ROWS}}},
    "no statistics": {"write_statistics": False},
    "small pages": {"data_page_size": 512, "row_group_size": 700},
}


def rows() -> pa.Table:
    return rows_of(ROWS)


def rows_of(count: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(count), pa.int64()),
            "n": pa.array([None if i % 17 == 0 else i % 100 for i in range(count)], pa.int32()),
            "x": pa.array([i / 7 for i in range(count)], pa.float64()),
            "s": pa.array([None if i % 13 == 0 else f"text-{i % 211}" for i in range(count)]),
            "b": pa.array([bytes([i % 256]) * (i % 5) for i in range(count)], pa.binary()),
            "ts": pa.array([1_700_000_000_000_000 + i * 1_000 for i in range(count)], pa.timestamp("us", "UTC")),
        },
        schema=SCHEMA,
    )


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_variant_registers_reads_filters_erases_and_deletes(tmp_path: Path, variant: str) -> None:
    t = castable.create_table(str(tmp_path), SCHEMA, primary_key="id")
    (tmp_path / "data").mkdir()
    expected = rows()
    pq.write_table(expected, tmp_path / "data" / "f.parquet", **VARIANTS[variant])
    t.add_files(["data/f.parquet"])
    assert t.to_arrow().sort_by("id").equals(expected)
    found = t.scan(filter="n = 42 AND s >= 'text-1'").to_arrow().sort_by("id")
    assert found.equals(expected.filter((pc.field("n") == 42) & (pc.field("s") >= "text-1")))
    erased = pc.or_(
        pc.is_in(expected.column("id"), pa.array([0, 1499, 2999])),
        pc.fill_null(pc.equal(expected.column("s"), "text-5"), False),
    )
    gone = expected.column("id").filter(erased).to_pylist()
    before = engines([tmp_path / "data" / "f.parquet"], gone)
    report = t.erase("id IN (0, 1499, 2999) OR s = 'text-5'", mode="rewrite", purge=True)
    assert report.rows_erased == len(gone) and report.purge is not None and report.purge.verified
    assert not (tmp_path / "data" / "f.parquet").exists(), "the purge deleted the original"
    survivors = expected.filter(pc.invert(erased))
    assert t.to_arrow().sort_by("id").equals(survivors)
    after = engines([tmp_path / f.path for f in t.manifest.data_files], [])
    for engine, rows_read in after.items():
        assert rows_read.equals(before[engine]), f"{engine} reads the rewrite as it read the original"
    t.delete("n = 42")
    assert t.to_arrow().sort_by("id").equals(survivors.filter(pc.fill_null(pc.not_equal(survivors["n"], 42), True)))
