"""Files as pyarrow writes them with every codec and encoding it offers (dictionary and plain,
byte_stream_split, delta encodings, data page v1 and v2, page indexes, bloom filters,
statistics off): registered with add_files, scanned and filtered exactly as pyarrow reads them,
erased from by rewrite with a verified purge and (over 10 MiB) by splice with every surviving value
unchanged as pyarrow, DuckDB and DataFusion read it, and deleted from (issue: files the world
writes).

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/parquet/test_parquet_variants.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.engines import engines
from unit.parquet.test_parquet_variants import SCHEMA, VARIANTS, rows_of

import castable


def big_rows(rows: int = 400_000) -> pa.Table:
    """The same columns over 10 MiB in any codec (``b`` holds incompressible bytes), so a splice copies."""
    rng = np.random.default_rng(3)
    base = rows_of(rows)
    raw = pa.py_buffer(rng.integers(0, 256, (rows, 24), dtype=np.uint8).tobytes())
    noise = pa.FixedSizeBinaryArray.from_buffers(pa.binary(24), rows, [None, raw]).cast(pa.binary())
    return base.set_column(base.schema.get_field_index("b"), "b", noise)


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_variant_splices_with_every_surviving_value_unchanged(tmp_path: Path, variant: str) -> None:
    t = castable.create_table(str(tmp_path), SCHEMA, primary_key="id")
    (tmp_path / "data").mkdir()
    expected = big_rows()
    options = {"row_group_size": 100_000, **VARIANTS[variant]}
    pq.write_table(expected, tmp_path / "data" / "f.parquet", **options)
    t.add_files(["data/f.parquet"])
    report = t.erase("id IN (150000, 150001)", mode="splice")
    assert [e.method for e in report.files] == ["splice"] and report.transfer.copied > 0
    (new,) = t.manifest.data_files
    before, after = engines([tmp_path / "data" / "f.parquet"], [150_000, 150_001]), engines([tmp_path / new.path], [])
    for engine, rows in after.items():
        assert rows.equals(before[engine]), engine
