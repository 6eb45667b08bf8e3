"""Statistics of the fields inside struct columns (castable.format.stats.stat_fields): kept for
each file and row group by field id, pruning files and row groups for ``payload.user.id = 7``
as for a column, through renames and widening of nested fields, never losing a row (random rows
and filters against pyarrow over every row), and a whole-file delete by a nested field that
reads no data file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers.objects import plain
from hypothesis import given, settings
from hypothesis import strategies as st

import castable
from castable.errors import InvalidInputError
from castable.format.manifest import DataFile
from castable.format.stats import leaf_key
from castable.iceberg import publish
from castable.read.snapshot import Snapshot
from castable.read.where import parse_predicate
from castable.store.cache import clear_caches

USER = pa.struct([("id", pa.int32()), ("name", pa.string())])
SCHEMA = pa.schema([("id", pa.int64()), ("payload", pa.struct([("user", USER), ("amount", pa.float64())]))])
FILES_ONLY = {"write.inline.max-bytes": 0, "write.row-group-size-bytes": 2048}


def events(start: int, n: int, *, nulls: bool = False) -> pa.Table:
    payload = [
        None
        if nulls and i % 7 == 0
        else {"user": None if nulls and i % 5 == 0 else {"id": i, "name": f"u{i:04d}"}, "amount": i / 4}
        for i in range(start, start + n)
    ]
    return pa.table({"id": list(range(start, start + n)), "payload": payload}, schema=SCHEMA)


def test_each_file_keeps_the_bounds_of_every_field_inside_its_structs(tmp_path: Path) -> None:
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, properties=FILES_ONLY)
    table.append(events(100, 50))
    (f,) = table.manifest.data_files
    assert f.stats[leaf_key("payload", ["user", "id"])] == {"min": 100, "max": 149, "nulls": 0}
    assert f.stats[leaf_key("payload", ["user", "name"])] == {"min": "u0100", "max": "u0149", "nulls": 0}
    assert leaf_key("payload", ["amount"]) in f.stats


def test_a_filter_on_a_nested_field_prunes_files_and_row_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, properties=FILES_ONLY)
    for start in range(0, 1000, 200):
        table.append(events(start, 200))
    assert len(table.scan(filter="payload.user.id = 450").files()) == 1
    assert len(table.scan(filter="payload.user.name >= 'u0790'").files()) == 2
    read: list[int] = []
    real = Snapshot.read

    def counting(snapshot: Snapshot, f: DataFile, footer: Any, columns: Any, row_groups: Any) -> pa.Table:
        read.extend(row_groups)
        return real(snapshot, f, footer, columns, row_groups)

    monkeypatch.setattr(Snapshot, "read", counting)
    clear_caches()
    assert castable.open_table(table.uri).count(filter="payload.user.id = 450") == 1
    (f,) = table.scan(filter="payload.user.id = 450").files()
    assert len(read) == 1 and f.row_groups >= 3  # one row group of the one file
    # by id: a renamed and widened field keeps its statistics; the old name is no field now
    table.alter().rename_column(("payload", "user", "id"), "uid").widen_column(
        ("payload", "user", "uid"), pa.int64()
    ).commit()
    assert len(table.scan(filter="payload.user.uid = 450").files()) == 1
    assert table.count(filter="payload.user.uid BETWEEN 440 AND 460") == 21


def test_a_delete_by_a_nested_field_drops_whole_files_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, properties=FILES_ONLY)
    for start in range(0, 600, 200):
        table.append(events(start, 200))
    clear_caches()
    read: list[str] = []
    real = Snapshot.footer

    def footer(snapshot: Snapshot, f: DataFile) -> Any:
        read.append(f.path)
        return real(snapshot, f)

    monkeypatch.setattr(Snapshot, "footer", footer)
    result = castable.open_table(table.uri).delete("payload.user.id >= 200 AND payload.user.id < 400")
    assert result.rows_deleted == 200 and result.files_removed == 1 and read == []
    assert table.refresh().count() == 400


FILTERS = [
    "payload.user.id = 33",
    "payload.user.id IN (1, 60, 200)",
    "payload.user.id > 90 OR payload.amount < 2",
    "payload.user.name < 'u0010'",
    "payload.user.id IS NULL",
    "payload.user IS NULL",
    "payload.user.name IS NOT NULL AND payload.user.id <= 45",
    "NOT (payload.user.id = 5)",
]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 120), st.integers(1, 40)), min_size=1, max_size=5), st.sampled_from(FILTERS))
def test_pruning_by_nested_fields_never_loses_a_row(
    tmp_path_factory: pytest.TempPathFactory, appends: list[tuple[int, int]], deleted: str
) -> None:
    table = castable.create_table(str(tmp_path_factory.mktemp("t")), SCHEMA, properties=FILES_ONLY)
    written = []
    for start, n in appends:
        rows = events(start, n, nulls=True)
        table.append(rows)
        written.append(rows)
    whole = pa.concat_tables(written)
    for where in FILTERS:
        assert (
            table.count(filter=where) == whole.filter(parse_predicate(where, table.schema).to_expression()).num_rows
        ), where
    matched = whole.filter(parse_predicate(deleted, table.schema).to_expression()).num_rows
    assert table.delete(deleted).rows_deleted == matched
    assert table.count() == whole.num_rows - matched


def test_a_name_with_a_nul_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="NUL"):
        castable.create_table(str(tmp_path / "t"), pa.schema([("a\x00b", pa.int64())]))
    table = castable.create_table(str(tmp_path / "u"), SCHEMA)
    with pytest.raises(InvalidInputError, match="NUL"):
        table.alter().rename_column(("payload", "amount"), "x\x00y").commit()
    assert table.refresh().version == 0


def test_erase_and_purge_leave_no_byte_of_a_nested_value(tmp_path: Path) -> None:
    """A value inside a struct, in the bounds castable keeps of the field (the file's and the
    segment summary's) as in the data, the footer's statistics and page indexes: after the
    erase and its purge no object holds it, segments decoded and Iceberg manifests inflated."""
    table = castable.create_table(str(tmp_path / "t"), SCHEMA, properties={**FILES_ONLY, "publish.iceberg": "true"})
    rows = events(0, 30)
    secret = {"user": {"id": 10**6, "name": "zz-secret-name"}, "amount": 1.0}  # the greatest name: every maximum
    table.append(pa.concat_tables([rows, pa.table({"id": [99], "payload": [secret]}, schema=SCHEMA)]))
    publish(table)

    def holding() -> set[str]:
        return {o.key for o in table.store.list("") if b"zz-secret" in plain(o.key, table.store.get(o.key).data)}

    before = holding()
    assert any(k.startswith("segment/") for k in before) and any(k.startswith("data/") for k in before), before
    report = table.erase("payload.user.name = 'zz-secret-name'")
    assert report.rows_erased == 1
    purged = table.purge_erased(report)
    assert purged.verified and not purged.traces
    assert holding() == set()
    assert table.count() == 30 and table.count(filter="payload.user.name = 'u0029'") == 1
