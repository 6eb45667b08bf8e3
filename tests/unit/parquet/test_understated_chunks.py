"""A file whose footer records each row group's last column chunk 15 bytes short, as an old
parquet-mr did (readers pad their reads for it): castable scans and filters it, erases from it by
splice and by rewrite with a verified purge, every surviving row intact as pyarrow and DuckDB read
the new file (DataFusion reads the original no better), and deletes from it (issue: files the world
writes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from helpers.engines import engines

import castable
from castable.parquet.footer import CC_META_DATA, CMD_TOTAL_COMPRESSED_SIZE, RG_COLUMNS, Footer
from castable.parquet.thrift import BINARY, I64

ROWS = 240_000
FILE_CREATED_BY = 6


def understated(path: Path) -> pa.Table:
    """Write the file at ``path`` (four row groups, over 5 MiB) and return its rows."""
    rng = np.random.default_rng(3)
    rows = pa.table(
        {
            "id": pa.array(np.arange(ROWS), pa.int64()),
            "s": pa.array(rng.integers(0, 2**62, ROWS).astype(str)),
            "v": pa.array([f"v{i % 1000}" for i in range(ROWS)]),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, row_group_size=ROWS // 4)
    data = sink.getvalue().to_pybytes()
    footer = Footer.from_tail(data, len(data))
    for rg in footer.row_groups:
        meta = rg.get(RG_COLUMNS).items[-1].get(CC_META_DATA)
        meta.set(CMD_TOTAL_COMPRESSED_SIZE, I64, meta.get(CMD_TOTAL_COMPRESSED_SIZE) - 15)
    footer.metadata.set(FILE_CREATED_BY, BINARY, b"parquet-mr version 1.2.8 (build 1)")
    path.write_bytes(data[: footer.offset] + footer.serialize())
    assert pq.read_table(path).equals(rows), "pyarrow pads its reads for this writer"
    return rows


@pytest.mark.parametrize("mode", ["splice", "rewrite"])
def test_erase_reads_chunks_whole_when_the_footer_understates_them(tmp_path: Path, mode: str) -> None:
    t = castable.create_table(str(tmp_path), pa.schema([("id", pa.int64()), ("s", pa.string()), ("v", pa.string())]))
    (tmp_path / "data").mkdir()
    rows = understated(tmp_path / "data" / "old.parquet")
    t.add_files(["data/old.parquet"])
    assert t.to_arrow().sort_by("id").equals(rows)
    with pytest.raises(Exception, match="Invalid page header"):  # parquet-rs does not pad: it cannot read the original
        engines([tmp_path / "data" / "old.parquet"], [], skip={"pyarrow", "duckdb"})
    found = t.scan(filter="v = 'v7' AND id >= 200000").to_arrow().sort_by("id")
    assert found.equals(rows.filter((pc.field("v") == "v7") & (pc.field("id") >= 200_000)))
    report = t.erase("id IN (10, 120000, 239999)", mode=mode, purge=True)
    assert report.rows_erased == 3 and [e.method for e in report.files] == [mode]
    assert report.purge is not None and report.purge.verified
    assert not (tmp_path / "data" / "old.parquet").exists(), "the purge deleted the original"
    survivors = rows.filter(pc.invert(pc.is_in(rows.column("id"), pa.array([10, 120000, 239999]))))
    assert t.to_arrow().sort_by("id").equals(survivors)
    (new,) = t.manifest.data_files
    after = engines([tmp_path / new.path], [], skip={"datafusion"} if mode == "splice" else ())
    for engine, rows_read in after.items():
        assert rows_read.equals(survivors), engine
    t.delete("v = 'v7'")
    assert t.to_arrow().sort_by("id").equals(survivors.filter(pc.not_equal(survivors["v"], "v7")))
