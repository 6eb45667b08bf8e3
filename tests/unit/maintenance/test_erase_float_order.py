"""Erasure from a file whose footer declares the IEEE 754 total order for its float columns.

parquet-testing's ``floating_orders_nan_count.parquet`` (apache/parquet-testing ``data/``,
Apache License 2.0; written by parquet-java 1.18) has FLOAT, DOUBLE and FLOAT16 columns in
IEEE 754 total order and in the type-defined order, five row groups (no NaN, some NaN, all NaN,
zero minimum, zero maximum) and NaN counts in the statistics and the column indexes. pyarrow
re-encodes a spliced row group with type-defined bounds and no NaN counts; the splice restates
them as the footer's column orders say (``castable.parquet.floatorder``), checked here against a
separate computation of the total order on the rows each row group keeps.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ROOT

import castable
from castable.maintenance.splice import SpliceNotPossibleError
from castable.parquet.floatorder import total_order_bounds
from castable.parquet.footer import (
    CC_META_DATA,
    CMD_PATH,
    CMD_STATISTICS,
    INDEX_KINDS,
    RG_COLUMNS,
    Footer,
    index_extent,
    set_index_extent,
)
from castable.parquet.thrift import Struct, decode_struct, encode_struct

SOURCE = ROOT / "tests" / "data" / "parquet-testing" / "floating_orders_nan_count.parquet"
PAD = 11 * 1024 * 1024
"""Bytes put between the row groups and the page indexes: a file under 5 MiB cannot be
range-copied, and ``auto`` splices files from 10 MiB."""
ERASED = "float_ieee754 IN (-5.0, 1.5)"
"""The file's smallest value (row group 4) and a value only row group 3 holds (its rows keep a
+0.0 minimum in total order, -0.0 in the type-defined one)."""
_FORMATS = {"FLOAT": "<f", "DOUBLE": "<d", "FIXED_LEN_BYTE_ARRAY": "<e"}
_BITS = {"FLOAT": "<i", "DOUBLE": "<q", "FIXED_LEN_BYTE_ARRAY": "<h"}


def padded(data: bytes, pad: int) -> bytes:
    """The same file with ``pad`` zero bytes after its row groups (every index offset moved)."""
    footer = Footer.from_tail(data, len(data))
    at = max(footer.row_group_span(i)[1] for i in range(len(footer.row_groups)))
    for rg in footer.row_groups:
        for chunk in rg.get(RG_COLUMNS).items:
            for kind in INDEX_KINDS:
                extent = index_extent(chunk, kind)
                if extent is not None:
                    set_index_extent(chunk, kind, (extent[0] + pad, extent[1] + pad))
    return data[:at] + bytes(pad) + data[at : footer.offset] + footer.serialize()


def total_order(plain: bytes, physical: str) -> int:
    """IEEE 754 totalOrder as an integer key, from sign and magnitude (independently of
    castable.parquet.floatorder's numpy code)."""
    fmt = _BITS[physical]
    bits = struct.unpack(fmt, plain)[0]
    magnitude = bits & ((1 << (8 * struct.calcsize(fmt) - 1)) - 1)
    return -magnitude - 1 if bits < 0 else magnitude  # a negative sign orders by falling magnitude, below +0


def expected_bounds(plains: list[bytes], physical: str) -> tuple[bytes | None, bytes | None, int]:
    """(min, max, NaN count) of plain-encoded values in total order, per the Parquet spec."""
    fmt = _FORMATS[physical]
    nans = [p for p in plains if math.isnan(struct.unpack(fmt, p)[0])]
    among = [p for p in plains if p not in nans] or nans
    if not among:
        return None, None, 0
    ordered = sorted(among, key=lambda p: total_order(p, physical))
    return ordered[0], ordered[-1], len(nans)


def plain_values(column: pa.ChunkedArray) -> list[bytes]:
    array = column.combine_chunks()
    if pa.types.is_float16(array.type):
        return [struct.pack("<h", v) for v in array.view(pa.int16()).to_pylist()]
    fmt = "<f" if pa.types.is_float32(array.type) else "<d"
    return [np.array(v, dtype=fmt).tobytes() for v in array.to_numpy()]


def chunks(path: Path) -> list[list[tuple[str, str, Struct, Struct | None]]]:
    """Per row group, per column: name, physical type, statistics and column index, as castable's
    own Thrift reader decodes them."""
    data = path.read_bytes()
    footer = Footer.from_tail(data, len(data))
    schema = pq.read_schema(path)
    physical = [pq.ParquetFile(path).schema.column(i).physical_type for i in range(len(schema))]
    out = []
    for rg in footer.row_groups:
        row = []
        for i, chunk in enumerate(rg.get(RG_COLUMNS).items):
            meta = chunk.get(CC_META_DATA)
            extent = index_extent(chunk, "column_index")
            index = decode_struct(data[extent[0] : extent[1]])[0] if extent else None
            row.append((meta.get(CMD_PATH).items[0].decode(), physical[i], meta.get(CMD_STATISTICS), index))
        out.append(row)
    return out


def same_rows(a: pa.Table, b: pa.Table) -> bool:
    """Equal, NaN for NaN (to the bit)."""
    return all(plain_values(a.column(n)) == plain_values(b.column(n)) for n in a.column_names)


@pytest.mark.parametrize(
    ("values", "lowest", "highest", "nans"),
    [
        ([float("nan"), 1.0, -0.0, None, -float("nan")], -0.0, 1.0, 2),
        ([0.0, 2.0], 0.0, 2.0, 0),
        ([-0.0, -3.0], -3.0, -0.0, 0),
        ([-float("inf"), float("inf")], -float("inf"), float("inf"), 0),
        ([None], None, None, 0),
    ],
)
@pytest.mark.parametrize("kind", [pa.float16(), pa.float32(), pa.float64()])
def test_total_order_bounds(
    kind: pa.DataType, values: list[float | None], lowest: float | None, highest: float | None, nans: int
) -> None:
    width = kind.bit_width // 8
    dtype = {2: "<f2", 4: "<f4", 8: "<f8"}[width]
    array = pa.array(
        np.array([0.0 if v is None else v for v in values], dtype=dtype), mask=np.array([v is None for v in values])
    )
    bounds = total_order_bounds(array.cast(kind), width)

    def as_plain(v: float | None) -> bytes | None:
        return None if v is None else np.array(v, dtype=dtype).tobytes()

    assert (bounds.lowest, bounds.highest, bounds.nans) == (as_plain(lowest), as_plain(highest), nans)


def test_only_nans_are_bounded_by_the_smallest_and_largest_nan() -> None:
    negative, positive = struct.pack("<i", -1), struct.pack("<i", 0x7FFFFFFF)  # -NaN and +NaN, all mantissa bits
    quiet = struct.pack("<i", 0x7FC00000)
    array = pa.array(np.frombuffer(quiet + negative + positive, dtype="<f4"))
    bounds = total_order_bounds(array, 4)
    assert (bounds.lowest, bounds.highest, bounds.nans) == (negative, positive, 3)


def test_an_erase_splices_statistics_in_the_files_column_orders(tmp_path: Path) -> None:
    original = pq.read_table(SOURCE)
    t = castable.create_table(str(tmp_path / "t"), original.schema)
    (tmp_path / "t" / "data").mkdir()
    (tmp_path / "t" / "data" / "source.parquet").write_bytes(padded(SOURCE.read_bytes(), PAD))
    t.add_files(["data/source.parquet"])
    report = t.erase(ERASED)
    assert [e.method for e in report.files] == ["splice"] and report.rows_erased == 2
    assert report.files[0].row_groups_edited == [3, 4]
    assert t.purge_erased(report).verified

    (new,) = t.manifest.data_files
    path = tmp_path / "t" / new.path
    survives = pa.array([v not in (-5.0, 1.5) for v in original.column("float_ieee754").to_pylist()])
    assert same_rows(pq.read_table(path), original.filter(survives)), "pyarrow reads the spliced file"
    duck = [duckdb.sql(f"SELECT * FROM read_parquet('{p}')").to_arrow_table() for p in (SOURCE, path)]
    assert same_rows(duck[1], duck[0].filter(survives)), "DuckDB reads it as it read the original, less the rows"

    before, after = chunks(SOURCE), chunks(path)
    data = pq.ParquetFile(path)
    orders = Footer.from_tail(path.read_bytes(), path.stat().st_size).column_orders
    assert orders == (2, 1, 2, 1, 2, 1), "the footer's column orders are kept"
    erased = {struct.pack("<f", -5.0), struct.pack("<f", 1.5), struct.pack("<d", -5.0), struct.pack("<d", 1.5)}
    for r, row in enumerate(after):
        rows = data.read_row_group(r)
        for c, (name, physical, stats, index) in enumerate(row):
            if r < 3:  # unedited: the writer's own statistics and column index, to the byte
                assert encode_struct(stats) == encode_struct(before[r][c][2])
                assert (index is None) == (before[r][c][3] is None)
                assert index is None or encode_struct(index) == encode_struct(before[r][c][3])
                continue
            lowest, highest, nans = expected_bounds(plain_values(rows.column(name)), physical)
            assert stats.get(9) == nans and index.get(8).items == [nans], f"row group {r}, {name}: NaN counts"
            if orders[c] == 2:
                assert (stats.get(6), stats.get(5)) == (lowest, highest), f"row group {r}, {name}: total order"
                assert (stats.get(2), stats.get(1)) == (lowest, highest)
                assert (index.get(2).items, index.get(3).items) == ([lowest], [highest])
            values = [stats.get(f) for f in (1, 2, 5, 6)] + index.get(2).items + index.get(3).items
            assert not erased.intersection(values), f"row group {r}, {name} holds an erased value"
    edited = {name: (s.get(6), s.get(5)) for name, _, s, _ in after[3]}
    assert edited["float_ieee754"] == (struct.pack("<f", 0.0), struct.pack("<f", 5.0)), "+0.0 in total order"
    assert edited["float_typedef"] == (struct.pack("<f", -0.0), struct.pack("<f", 5.0)), "-0.0 in the type order"
    assert {name: s.get(5) for name, _, s, _ in after[4]}["double_ieee754"] == struct.pack("<d", -0.0)
    metadata = data.metadata
    typed = metadata.row_group(4).column(3).statistics  # pyarrow reads the type-ordered bounds
    assert (typed.min, typed.max) == (-4.0, 0.0)
    assert not metadata.row_group(4).column(2).statistics.has_min_max, "pyarrow ignores an order it does not know"


def test_a_listed_float_column_in_total_order_is_rewritten_not_spliced(tmp_path: Path) -> None:
    """Its pages' values are not one per row, so the splice does not restate them: ``auto``
    rewrites the file, ``splice`` refuses it with nothing written."""
    rows = pa.table({"id": pa.array(range(20), pa.int64()), "v": [[float(i), -float(i)] for i in range(20)]})
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, row_group_size=5, write_page_index=True)
    data = sink.getvalue().to_pybytes()
    footer = Footer.from_tail(data, len(data))
    footer.metadata.get(7).items[1] = Struct([[2, 12, Struct()]])  # the list's float leaf: IEEE754TotalOrder
    t = castable.create_table(str(tmp_path / "t"), rows.schema)
    (tmp_path / "t" / "data").mkdir()
    (tmp_path / "t" / "data" / "source.parquet").write_bytes(padded(data[: footer.offset] + footer.serialize(), PAD))
    t.add_files(["data/source.parquet"])
    with pytest.raises(SpliceNotPossibleError, match="repeated float column in IEEE 754 total order"):
        t.erase("id = 3", mode="splice")
    assert t.count() == 20
    report = t.erase("id = 3")
    assert [e.method for e in report.files] == ["rewrite"] and t.count() == 19


def _values(table: pa.Table) -> list[tuple[str, float]]:
    """The distinct values but NaN of every column in IEEE 754 total order, as ``(column, value)``."""
    out = []
    for name in (n for n in table.column_names if n.endswith("_ieee754")):
        seen = {v for v in table.column(name).to_pylist() if not math.isnan(v)}
        out += [(name, v) for v in sorted(seen)]
    return out


def test_any_value_erased_with_small_parts_leaves_no_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of 1 KiB (a store whose parts may be that small): each row group is its own part, so
    every edited row group's statistics and indexes are restated, whichever value goes; the
    purge's byte-level search then finds none of it and verifies."""
    import functools

    import castable.maintenance.erasechange
    import castable.maintenance.splice
    import castable.store.local
    from castable.maintenance.parts import plan_parts

    for module in (castable.maintenance.splice, castable.maintenance.erasechange, castable.store.local):
        monkeypatch.setattr(module, "MIN_PART_SIZE", 1024)
    monkeypatch.setattr(castable.maintenance.splice, "plan_parts", functools.partial(plan_parts, min_size=1024))
    original = pq.read_table(SOURCE)
    for i, (name, value) in enumerate(_values(original)):
        t = castable.create_table(str(tmp_path / f"t{i}"), original.schema)
        (tmp_path / f"t{i}" / "data").mkdir()
        (tmp_path / f"t{i}" / "data" / "source.parquet").write_bytes(SOURCE.read_bytes())
        t.add_files(["data/source.parquet"])
        report = t.erase(f"{name} = {value!r}", mode="splice")
        assert report.rows_erased >= 1 and [e.method for e in report.files] == ["splice"]
        purged = t.purge_erased(report)
        assert purged.verified and not purged.traces, (name, value, purged)
        assert t.count() == original.num_rows - report.rows_erased
