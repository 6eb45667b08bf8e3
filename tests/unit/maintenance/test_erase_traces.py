"""Erasure leaves no trace: page indexes and bloom filters of a spliced file are rebuilt for its
new layout, and the purge searches the new objects' bytes for the erased rows' values."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import datafusion
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import castable
from castable.maintenance.erase import purge_objects
from castable.maintenance.traces import find_traces, needles
from castable.parquet.footer import CC_META_DATA, CMD_PATH, INDEX_KINDS, RG_COLUMNS, Footer, index_extent
from castable.parquet.thrift import Struct, ThriftError, decode_struct
from castable.table import Table

ROWS = 600_000
GROUP = 100_000
SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()), pa.field("score", pa.float64())]
)
WRITER = {
    "row_group_size": GROUP,
    "write_page_index": True,
    "data_page_size": 64 * 1024,
    "use_dictionary": ["score"],
    "bloom_filter_options": {"id": {"ndv": GROUP}, "name": True},
    "compression": "snappy",
}


def name(i: int) -> str:
    return f"name-{i:09d}"


def rows(ids: np.ndarray) -> pa.Table:
    return pa.table({"id": ids, "name": [name(int(i)) for i in ids], "score": ids * 0.5}, schema=SCHEMA)


def registered(uri: str, options: dict | None, tmp_path: Path) -> Table:
    """A table holding one 6-row-group file written by pyarrow with page indexes and bloom filters."""
    table = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options)
    local = tmp_path / "a.parquet"
    pq.write_table(rows(np.arange(ROWS)), local, **WRITER)
    table.store.put("data/ext/a.parquet", local.read_bytes())
    table.add_files(["data/ext/a.parquet"])
    return table


def offset_index_problems(data: bytes) -> list[str]:
    """Every page location of every offset index must point at a page header whose page is
    exactly as long as the location says, and the pages must tile each column chunk."""
    footer = Footer.from_tail(data, len(data))
    problems = []
    for r, rg in enumerate(footer.row_groups):
        for chunk in rg.get(RG_COLUMNS).items:
            extent = index_extent(chunk, "offset_index")
            if extent is None:
                problems.append(f"row group {r} has a chunk without an offset index")
                continue
            index, _ = decode_struct(data[extent[0] : extent[1]])
            for location in index.get(1).items:
                offset, size = location.get(1), location.get(2)
                try:
                    header, used = decode_struct(data, offset)
                except ThriftError:
                    header, used = Struct(), 0
                if header.get(1) not in (0, 3) or used + header.get(3, -1) != size:
                    problems.append(f"row group {r}: no data page of {size} bytes at {offset}")
    return problems


def datafusion_agrees(path: Path, victim: int) -> None:
    """DataFusion reads the file with page-index and bloom-filter pruning; pyarrow reads it whole."""
    ctx = datafusion.SessionContext()
    ctx.register_parquet("t", str(path))
    whole = pq.read_table(path)
    ids = whole.column("id").to_numpy()
    for lo, hi in [(victim - 50, victim + 50), (ROWS - 3000, ROWS - 2000), (GROUP + 10, GROUP + 20)]:
        got = ctx.sql(f"select count(*), sum(id) from t where id >= {lo} and id < {hi}").to_pylist()[0]
        want = ids[(ids >= lo) & (ids < hi)]
        assert list(got.values()) == [len(want), int(want.sum()) if len(want) else None]
    for i in [victim + 1 if victim + 1 < ROWS else victim - 1, 5 * GROUP + 7, 3]:
        found = ctx.sql(f"select id from t where name = '{name(i)}'").to_pylist()
        assert found == [{"id": i}]
    plan = ctx.sql(f"explain analyze select * from t where id >= {ROWS - 3000} and id < {ROWS - 2000}").to_pylist()
    metrics = str(plan)
    pruned = re.search(r"page_index_pages_pruned=(\d+) total → (\d+) matched", metrics)
    assert pruned and int(pruned.group(2)) < int(pruned.group(1)), "DataFusion pruned pages by the page index"


@pytest.mark.parametrize("victim", [0, 2 * GROUP, ROWS - 1, 2 * GROUP + 12_345])
def test_spliced_file_keeps_right_page_indexes_and_no_trace(
    table_uri: tuple[str, dict | None], tmp_path: Path, victim: int
) -> None:
    """The first row of the file, of a row group (a page minimum, as in the report), the last
    row, and a row inside a page: after erase and purge no byte of the row is left."""
    table = registered(*table_uri, tmp_path)
    report = table.erase(f"id = {victim}", mode="splice", purge=True)

    assert report.rows_erased == 1 and report.summary()["files_spliced"] == 1
    assert report.purge is not None and report.purge.verified and report.purge.traces == {}
    (f,) = table.manifest.data_files
    data = table.store.get(f.path).data
    assert name(victim).encode() not in data
    assert offset_index_problems(data) == []
    footer = Footer.from_tail(data, len(data))
    for rg in footer.row_groups:
        for chunk in rg.get(RG_COLUMNS).items:
            column = chunk.get(CC_META_DATA).get(CMD_PATH).items[0].decode()
            kinds = {k for k in INDEX_KINDS if index_extent(chunk, k)}
            expected = {"column_index", "offset_index"} | ({"bloom_filter"} if column != "score" else set())
            assert kinds == expected, f"{column} lost its indexes or bloom filter"
    local = tmp_path / "spliced.parquet"
    local.write_bytes(data)
    datafusion_agrees(local, victim)
    assert pq.read_table(local).column("id").to_pylist() == [i for i in range(ROWS) if i != victim]


def test_find_traces_sees_values_in_statistics_indexes_pages_and_stray_bytes(tmp_path: Path) -> None:
    """The search itself: the untouched original still holds row 0 (page and footer statistics,
    column index, data pages); a clean copy holds nothing; stray bytes before the footer are found."""
    original = tmp_path / "original.parquet"
    pq.write_table(rows(np.arange(3 * GROUP)), original, **WRITER)
    erased = rows(np.array([0]))
    kept = rows(np.arange(1, 3 * GROUP))
    clean = tmp_path / "clean.parquet"
    pq.write_table(kept, clean, **WRITER)
    wanted = needles(erased, pq.ParquetFile(clean))
    assert wanted.encoded["name"] == {name(0).encode()} and wanted.strings["name"] == {name(0).encode()}
    assert wanted.encoded["id"] == {struct.pack("<q", 0)} and wanted.encoded["score"] == {
        struct.pack("<d", x) for x in (0.0, -0.0)
    }

    def traces(path: Path) -> list[str]:
        with pa.OSFile(str(path)) as source:
            return find_traces(source, path.stat().st_size, wanted)

    assert traces(clean) == []
    found = traces(original)
    for where in ("id: statistics", "id: column index", "name: page 0 holds an erased string", "the footer"):
        assert any(where in t for t in found), f"{where}: {found}"
    data = clean.read_bytes()
    footer = Footer.from_tail(data, len(data))
    stray = data[: footer.offset] + b"left over: " + name(0).encode() + data[footer.offset :]
    (tmp_path / "stray.parquet").write_bytes(stray)
    assert pq.read_table(tmp_path / "stray.parquet").num_rows == kept.num_rows
    assert traces(tmp_path / "stray.parquet") == [
        f"bytes {footer.offset}-{footer.offset + 25} belong to no row group, index or footer"
    ]


def test_purge_reports_traces_left_by_a_bad_splice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A splice that kept the edited row group's old column index (the bug this replaced) is
    caught by the purge: it reports the trace and does not call the erasure verified."""
    import castable.maintenance.splice as splice

    table = registered(str(tmp_path / "t"), None, tmp_path)
    honest = splice.encode_row_group

    def keeps_old_column_index(kept: pa.Table, footer: Footer, index: int) -> splice.EncodedRowGroup:
        encoded = honest(kept, footer, index)
        source = table.store.get("data/ext/a.parquet").data
        for found, chunk in zip(encoded.indexes, footer.row_groups[index].get(RG_COLUMNS).items, strict=True):
            start, end = index_extent(chunk, "column_index")  # type: ignore[misc]
            found["column_index"] = source[start:end]
        return encoded

    monkeypatch.setattr(splice, "encode_row_group", keeps_old_column_index)
    report = table.erase(f"id = {2 * GROUP}", mode="splice")
    purge = purge_objects(table.store, {"data/ext/a.parquet": 1}, report.version, report.predicate)
    (f,) = table.manifest.data_files
    assert not purge.verified
    assert purge.remaining == {}, "no row matches: only the byte search sees it"
    found = purge.traces[f.path]
    assert "row group 2, column id: column index holds an erased value" in found
    assert "row group 2, column name: column index holds an erased string" in found


def test_a_string_that_survives_inside_another_column_is_not_a_trace(tmp_path: Path) -> None:
    """An erased name that lives on inside a surviving row's email (another column) is that row's:
    the footer, which holds every column's statistics, must not count it as a trace."""
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("email", pa.string())])
    erased = pa.table({"id": [0], "name": ["alice-0001"], "email": ["zed@example.org"]}, schema=schema)
    kept = pa.table({"id": [1], "name": ["bob-000002"], "email": ["alice-0001@example.org"]}, schema=schema)
    path = tmp_path / "kept.parquet"
    pq.write_table(kept, path)
    wanted = needles(erased, pq.ParquetFile(path))
    assert wanted.strings["name"] == {b"alice-0001"} and wanted.anywhere == {b"zed@example.org"}
    with pa.OSFile(str(path)) as source:
        assert find_traces(source, path.stat().st_size, wanted) == []
