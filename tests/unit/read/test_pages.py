"""Page-level reads (castable.read.pages): castable writes page indexes, and a filtered scan of a file
with them fetches only the pages that may match, with exactly the rows a whole read gives."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import castable
from castable.read import pages
from castable.read.where import parse_predicate

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("small", pa.int32()),
        pa.field("value", pa.float64()),
        pa.field("name", pa.string()),
        pa.field("day", pa.date32()),
        pa.field("at", pa.timestamp("us")),
        pa.field("flag", pa.bool_()),
        pa.field("amount", pa.decimal128(12, 2)),
    ]
)
ROWS = 300_000
FILTERS = [
    "id BETWEEN 120000 AND 124999",
    "id < 10 OR id >= 299990",
    "id IN (5, 150000, 299999)",
    "small BETWEEN 100 AND 140",
    "small IS NULL AND id < 50000",
    "value > 0.9999",
    "name = 'n0123456'",
    "name >= 'n0299990'",
    "day = DATE '2026-03-01'",
    "at BETWEEN TIMESTAMP '2026-01-02 10:00:00' AND TIMESTAMP '2026-01-02 10:05:00'",
    "flag = true AND id < 1000",
    "amount > 2990.00",
    "id > 10 AND NOT (id > 20)",
    "value IS NULL",
]


def rows(start: int, stop: int) -> pa.Table:
    """Rows sorted by id (as a key range's pages are), with NULLs, repeats and every type."""
    ids = np.arange(start, stop)
    rng = np.random.default_rng(start)
    small = pa.array((ids // 97).astype(np.int32), mask=ids % 13 == 0)
    value = pa.array(rng.random(len(ids)), mask=ids % 7 == 0)
    days = [date(2026, 1, 1) + timedelta(days=int(i // 5000)) for i in ids]
    at = [datetime(2026, 1, 1) + timedelta(seconds=int(i)) for i in ids]
    amount = pa.array([Decimal(int(i)) / 100 for i in ids], pa.decimal128(12, 2))
    return pa.table(
        {
            "id": ids,
            "small": small,
            "value": value,
            "name": [f"n{i:07d}" for i in ids],
            "day": pa.array(days, pa.date32()),
            "at": pa.array(at, pa.timestamp("us")),
            "flag": ids % 3 == 0,
            "amount": amount,
        },
        schema=SCHEMA,
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> castable.Table:
    t = castable.create_table(str(tmp_path_factory.mktemp("pages") / "t"), SCHEMA, primary_key="id")
    t.append(rows(0, ROWS))
    t.delete("id IN (120001, 120003, 299995) OR (id BETWEEN 7 AND 8)")
    t.upsert(rows(124_500, 124_520))  # the upserted keys' old rows: a key-list tombstone
    return t


def expected(t: castable.Table, where: str) -> pa.Table:
    """The rows a whole read keeps: every live row filtered in Arrow, not by castable's scan."""
    everything = t.scan().to_arrow()
    return everything.filter(parse_predicate(where, SCHEMA).to_expression()).sort_by("id")


def test_castable_writes_page_indexes(table: castable.Table) -> None:
    footer = pq.read_metadata(Path(table.uri) / table.manifest.data_files[0].path)
    for rg in range(footer.num_row_groups):
        for c in range(footer.num_columns):
            chunk = footer.row_group(rg).column(c)
            assert chunk.has_column_index and chunk.has_offset_index


@pytest.mark.parametrize("where", FILTERS)
def test_a_filtered_scan_reads_the_rows_a_whole_read_gives(table: castable.Table, where: str) -> None:
    castable.clear_caches()
    got = table.scan(filter=where).to_arrow().sort_by("id")
    assert got.equals(expected(table, where)), where


def test_a_key_range_is_read_from_a_few_pages(table: castable.Table, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages of the matching rows, not the row group: read page by page, and read far
    fewer column bytes than the row group holds."""
    read: list[int] = []
    real = pages.column_file

    def counting(*args: object) -> bytes:
        data = real(*args)  # type: ignore[arg-type]
        read.append(len(data))
        return data

    monkeypatch.setattr(pages, "column_file", counting)
    castable.clear_caches()
    where = "id BETWEEN 200000 AND 200999"
    assert table.scan(filter=where).to_arrow().sort_by("id").equals(expected(table, where))
    footer = pq.read_metadata(Path(table.uri) / table.manifest.data_files[0].path)
    group = max(footer.row_group(rg).total_byte_size for rg in range(footer.num_row_groups))
    assert read and sum(read) < group / 10, (sum(read), group)


def test_the_page_index_is_read_for_pages_of_every_writer_layout(tmp_path: Path) -> None:
    """Column files built from any choice of pages decode to exactly those rows, for pages of
    pyarrow's layouts: dictionary or plain, data pages v1 and v2, small pages, NULLs."""
    data = rows(0, 50_000)
    for options in (
        {"use_dictionary": True},
        {"use_dictionary": False, "data_page_version": "2.0"},
        {"use_dictionary": ["name"], "data_page_size": 4096, "compression": "zstd"},
    ):
        path = tmp_path / "f.parquet"
        pq.write_table(data, path, row_group_size=30_000, write_page_index=True, **options)  # type: ignore[arg-type]
        metadata = pq.read_metadata(path)
        footer = pages.file_footer(metadata)
        raw = path.read_bytes()
        rng = np.random.default_rng(1)
        for rg in range(metadata.num_row_groups):
            start = sum(metadata.row_group(i).num_rows for i in range(rg))
            n = metadata.row_group(rg).num_rows
            for c, name in enumerate(data.column_names):
                extents = pages.index_ranges(footer, rg, [c])
                assert extents is not None
                chunk = pages.ChunkPages.read(footer, rg, c, {e: raw[e[0] : e[1]] for e in extents})
                a = int(rng.integers(0, n - 1))
                wanted = [(a, min(n, a + int(rng.integers(1, 5000))))]
                chosen = chunk.pages_for(wanted)
                body = b"".join(raw[x:y] for x, y in chunk.byte_ranges(chosen))
                at = np.arange(*wanted[0], dtype=np.int64)
                got = pages.read_column(footer, rg, c, name, chunk, chosen, body, at)
                lo, hi = wanted[0]
                assert got.equals(data.column(name).slice(start + lo, hi - lo)), (options, rg, name)


def test_a_file_without_page_indexes_is_read_whole(tmp_path: Path) -> None:
    """Files registered from other writers may have no page index: the scan reads them whole."""
    data = rows(0, 20_000)
    path = tmp_path / "t" / "data" / "plain.parquet"
    path.parent.mkdir(parents=True)
    t = castable.create_table(str(tmp_path / "t"), SCHEMA, primary_key="id")
    pq.write_table(data, path, write_page_index=False)
    t.add_files(["data/plain.parquet"])
    where = "id BETWEEN 100 AND 199"
    assert t.scan(filter=where).to_arrow().sort_by("id").equals(data.slice(100, 100))


def test_a_page_index_that_does_not_decode_reads_the_row_group_whole(tmp_path: Path) -> None:
    """Page indexes are optional and another writer's may be wrong: castable then reads by row
    group (pyarrow does not read them), with the same rows."""
    data = rows(0, 200_000)
    root = tmp_path / "t"
    t = castable.create_table(str(root), SCHEMA, primary_key="id")
    path = root / "data" / "odd.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, path, write_page_index=True)
    footer = pages.file_footer(pq.read_metadata(path))
    raw = bytearray(path.read_bytes())
    for extent in pages.index_ranges(footer, 0, list(range(len(SCHEMA)))) or []:
        raw[extent[0] : extent[1]] = b"\xff" * (extent[1] - extent[0])
    path.write_bytes(bytes(raw))
    t.add_files(["data/odd.parquet"])
    castable.clear_caches()
    where = "id BETWEEN 1000 AND 1099"
    assert t.scan(filter=where).to_arrow().sort_by("id").equals(data.slice(1000, 100))
