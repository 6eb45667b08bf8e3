"""Sort orders (castable.format.sorting): rows in the declared order (each field's direction and
null placement, against Python's sort of the same rows), every write and compaction following
the current order and recording it, scans that read less of a sorted table, Iceberg's metadata
carrying the orders, and a sort column that cannot be dropped."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import castable
from castable.errors import InvalidInputError
from castable.format.evolution import with_ids
from castable.format.manifest import DataFile
from castable.format.sorting import Sorting
from castable.iceberg import publish
from castable.inputs.orders import parse_sort_by
from castable.read.snapshot import Snapshot
from castable.store.cache import clear_caches

SCHEMA = with_ids(pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.float64())]))


def _key(row: dict[str, Any], spec: list[tuple[str, bool, bool]]) -> tuple[Any, ...]:
    """Python's sort key of the order: per field, where nulls go, then the value (negated or reversed)."""
    key: list[Any] = []
    for column, descending, nulls_first in spec:
        value = row[column]
        key.append((value is None) != nulls_first)
        if value is None:
            key.append(0)
        elif isinstance(value, str):
            key.append((*(-ord(ch) for ch in value), 1) if descending else value)
        else:
            key.append(-value if descending else value)
    return tuple(key)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(-5, 5)),
            st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b"])),
            st.one_of(st.none(), st.floats(-3, 3, allow_nan=False)),
        ),
        max_size=40,
    ),
    st.lists(
        st.tuples(st.sampled_from("abc"), st.booleans(), st.booleans()),
        min_size=1,
        max_size=3,
        unique_by=lambda f: f[0],
    ),
)
def test_an_order_sorts_as_python_sorts_the_same_rows(
    rows: list[tuple[Any, ...]], spec: list[tuple[str, bool, bool]]
) -> None:
    table = pa.table({"a": [r[0] for r in rows], "b": [r[1] for r in rows], "c": [r[2] for r in rows]}, schema=SCHEMA)
    text = [f"{c} {'DESC' if d else 'ASC'} NULLS {'FIRST' if n else 'LAST'}" for c, d, n in spec]
    order = Sorting().evolved(parse_sort_by(text, SCHEMA), SCHEMA).default
    got = order.sort(table, SCHEMA).to_pylist()
    assert [_key(r, spec) for r in got] == sorted(_key(r, spec) for r in table.to_pylist())


def test_defaults_are_spark_s_nulls_first_ascending_last_descending() -> None:
    fields = parse_sort_by(["a", "b DESC"], SCHEMA)
    assert [(f.direction, f.null_order) for f in fields] == [("asc", "nulls-first"), ("desc", "nulls-last")]
    with pytest.raises(InvalidInputError, match="no such column"):
        parse_sort_by(["d"], SCHEMA)
    with pytest.raises(InvalidInputError, match="orders nothing"):
        Sorting().evolved(parse_sort_by(["void(a)"], SCHEMA), SCHEMA)


def _rows(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    ids = list(range(n))
    rng.shuffle(ids)
    return pa.table(
        {"a": ids, "b": [f"s{i % 97}" for i in ids], "c": [i / 7 for i in ids]}, schema=pa.schema(list(SCHEMA))
    )


SMALL_GROUPS = {"write.row-group-size-bytes": 4096, "write.inline.max-bytes": 0}


def test_writes_and_compaction_follow_the_current_order(tmp_path: Path) -> None:
    table = castable.create_table(
        str(tmp_path / "t"), pa.schema(list(SCHEMA)), sort_by=["a DESC"], properties=SMALL_GROUPS
    )
    table.append(_rows(300, 1))
    assert table.to_arrow().column("a").to_pylist() == list(range(299, -1, -1))
    table.sort_by(["b", "a"])
    table.append(_rows(50, 2))
    assert [f.sort_order_id for f in table.manifest.data_files] == [1, 2]
    table.compact(min_file_size=1 << 30)
    (only,) = table.manifest.data_files
    assert only.sort_order_id == 2
    got = table.to_arrow().to_pylist()
    assert got == sorted(got, key=lambda r: (r["b"], r["a"]))
    assert table.sort_by(["b", "a"]).committed is False  # the order in force already
    assert table.sort_by(["a DESC"]).version == table.version and table.sorting.default_order_id == 1


def test_a_scan_of_a_sorted_table_reads_a_fraction_of_an_unsorted_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes of the row groups a range scan reads: row groups of a sorted column each hold a
    narrow range, so statistics rule most out."""
    asked: list[int] = []
    real = Snapshot.read

    def read(snapshot: Snapshot, f: DataFile, footer: Any, columns: Any, row_groups: Any) -> pa.Table:
        asked.extend(footer.row_group(rg).total_byte_size for rg in row_groups)
        return real(snapshot, f, footer, columns, row_groups)

    monkeypatch.setattr(Snapshot, "read", read)
    rows = _rows(20_000, 3)
    sizes = {}
    for name, order in (("sorted", ["a"]), ("unsorted", [])):
        table = castable.create_table(
            str(tmp_path / name), pa.schema(list(SCHEMA)), sort_by=order, properties=SMALL_GROUPS
        )
        table.append(rows)
        clear_caches()
        asked.clear()
        assert table.count(filter="a BETWEEN 1000 AND 1200") == 201
        sizes[name] = sum(asked)
    assert 0 < sizes["sorted"] * 5 < sizes["unsorted"], sizes


def test_the_iceberg_metadata_carries_the_orders(tmp_path: Path) -> None:
    from pyiceberg.table import StaticTable

    table = castable.create_table(
        str(tmp_path / "t"), pa.schema(list(SCHEMA)), sort_by=["b DESC NULLS FIRST", "bucket(4, a)"]
    )
    table.append(_rows(20, 4))
    published = publish(table)
    metadata = StaticTable.from_metadata(published)
    assert [str(f) for f in metadata.sort_order().fields] == ["2 DESC NULLS FIRST", "bucket[4](1) ASC NULLS FIRST"]
    assert {task.file.sort_order_id for task in metadata.scan().plan_files()} == {1}


def test_a_column_a_sort_order_uses_cannot_be_dropped(tmp_path: Path) -> None:
    table = castable.create_table(str(tmp_path / "t"), pa.schema(list(SCHEMA)), sort_by=["c"])
    table.sort_by(["a"])
    with pytest.raises(InvalidInputError, match="cannot be dropped"):
        table.alter().drop_column("c").commit()
    assert table.refresh().version == 1 and "c" in table.schema.names
