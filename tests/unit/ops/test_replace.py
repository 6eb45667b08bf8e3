"""Upsert and overwrite: rows replaced at tombstone cost, with the conflict rules of DESIGN 4."""

from __future__ import annotations

import pyarrow as pa
import pytest
from helpers.tables import EVENTS, events, keyed_events, live, other, snapshot_of

import castable
from castable.errors import CommitConflictError, EmptyWriteError, InvalidInputError, SchemaMismatchError
from castable.table import Table


@pytest.fixture
def table(table_uri: tuple[str, dict | None]) -> Table:
    return keyed_events(table_uri, 100)


def rows(ids: list[int], value: float, category: str = "u") -> pa.Table:
    return pa.table({"id": ids, "category": [category] * len(ids), "value": [value] * len(ids)}, schema=EVENTS)


def test_upsert_replaces_by_key_and_inserts_the_rest(table: Table) -> None:
    version = table.upsert(rows([5, 50, 500], 1.5), commit_id="u1").version
    now = live(table)
    assert len(now) == 101 and now[5] == now[50] == now[500] == ("u", 1.5) and now[6] == ("c", 3.0)
    h = table.history(limit=1)[0]
    assert (h.version, h.operation) == (version, "upsert")
    assert h.summary["rows_added"] == 3 and h.summary["tombstone"].startswith("tombstone/")
    assert table.upsert(rows([5], 9.0), commit_id="u1").version == version, "a repeated commit_id commits nothing"
    data_bytes = sum(f.size for f in table.manifest.data_files)
    assert data_bytes - sum(f.size for f in table.manifest_at(1).data_files) == h.summary["bytes_added"]


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: rows([1, 2, 1], 0.0), InvalidInputError, "key 1 more than once"),
        (
            lambda: pa.table({"id": [1, None], "category": ["a", "b"], "value": [1.0, 2.0]}),
            SchemaMismatchError,
            "nulls",
        ),
        (lambda: EVENTS.empty_table(), EmptyWriteError, "no rows"),
        (lambda: pa.table({"id": [1], "value": ["x"]}), SchemaMismatchError, "does not match"),
    ],
)
def test_bad_upserts_change_nothing(table: Table, make, error: type[Exception], match: str) -> None:  # type: ignore[no-untyped-def]
    before = snapshot_of(table.store)
    with pytest.raises(error, match=match):
        table.upsert(make())
    assert snapshot_of(table.store) == before


def test_upsert_needs_a_primary_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = castable.create_table(str(tmp_path / "t"), EVENTS)
    with pytest.raises(InvalidInputError, match="has none; use append"):
        t.upsert(rows([1], 1.0))


def test_overwrite_the_whole_table(table: Table) -> None:
    table.delete("id < 10")
    table.overwrite(rows([7, 8], 2.0))
    assert live(table) == {7: ("u", 2.0), 8: ("u", 2.0)}
    assert table.manifest.tombstones == () and len(table.manifest.data_files) == 1
    table.overwrite(EVENTS.empty_table())
    assert table.count() == 0 and table.manifest.data_files == ()


def test_overwrite_where_replaces_exactly_the_range(table: Table) -> None:
    table.overwrite(rows([200, 201, 202], 0.25, "a"), where="category = 'a'")
    now = live(table)
    assert {k for k, (c, _) in now.items() if c == "a"} == {200, 201, 202}
    assert len(now) == 100 - 25 + 3 and now[1] == ("b", 0.5)
    before = snapshot_of(table.store)
    with pytest.raises(InvalidInputError, match="1 of the 2 rows do not match"):
        table.overwrite(rows([1, 2], 1.0, "a").set_column(1, "category", pa.array(["a", "b"])), where="category = 'a'")
    with pytest.raises(InvalidInputError, match="do not match"):
        table.overwrite(rows([1], 1.0, None), where="category = 'a'")  # type: ignore[arg-type]
    assert snapshot_of(table.store) == before


def test_racing_upserts_of_one_key_leave_the_later_commit(table: Table) -> None:
    first, second = other(table), other(table)
    first.upsert(rows([7, 8], 1.0))
    second.upsert(rows([8, 9], 2.0))  # planned on the version before the first upsert
    now = live(table)
    assert now[7] == ("u", 1.0) and now[8] == ("u", 2.0) and now[9] == ("u", 2.0)
    assert table.history(limit=1)[0].summary["replans"] == 1


def test_upsert_racing_compaction_erase_and_delete_loses_and_resurrects_nothing(table: Table) -> None:
    table.append(events(100, 200))
    stale = other(table)
    table.compact(min_file_size=1 << 30)  # rewrites every file the upsert's tombstone targets
    table.erase("id = 30")
    table.delete("id = 40")
    stale.upsert(rows([10, 30, 150], 4.0))
    now = live(table)
    assert now[10] == now[30] == now[150] == ("u", 4.0)
    assert 40 not in now and len(now) == 200 - 2 + 1, "the delete stands; the erased key came back as an upsert"


def test_replace_where_racing_an_append_into_its_range_is_a_conflict(table: Table) -> None:
    stale = other(table)
    table.append(rows([1000], 1.0, "a"))
    before = live(table)
    with pytest.raises(CommitConflictError, match=r"overwrite conflicts .* added rows it would replace"):
        stale.overwrite(rows([1001], 1.0, "a"), where="category = 'a'")
    assert live(table) == before


def test_replace_where_racing_an_append_outside_its_range_rebases(table: Table) -> None:
    stale = other(table)
    table.append(rows([1000, 1001], 1.0, "b"))
    stale.overwrite(rows([2000], 1.0, "a"), where="category = 'a'")
    now = live(table)
    assert 1000 in now and 2000 in now and {k for k, (c, _) in now.items() if c == "a"} == {2000}


def feed(changes: list[tuple[int, str | None, float]]) -> pa.Table:
    """A Debezium-style change feed: the table's columns plus an ``op`` column."""
    return (
        rows([k for k, _, _ in changes], 0.0)
        .set_column(2, "value", pa.array([v for _, _, v in changes]))
        .append_column("op", pa.array([op for _, op, _ in changes]))
    )


def test_a_change_feed_deletes_its_delete_rows_and_keeps_each_keys_last_change_if_asked(table: Table) -> None:
    changes: list[tuple[int, str | None, float]] = [(5, "c", 1.0), (5, "u", 2.0), (6, "d", 0.0)]
    changes += [(500, "c", 3.0), (501, "c", 4.0), (501, "D", 0.0)]
    changes += [(7, "D", 0.0), (7, "u", 5.0), (8, None, 6.0), (9, "delete", 0.0)]
    before = snapshot_of(table.store)
    with pytest.raises(InvalidInputError, match=r"key 5 more than once.*last_wins=True"):
        table.upsert(feed(changes), op_column="op")
    assert snapshot_of(table.store) == before
    table.upsert(feed(changes), op_column="op", last_wins=True)
    now = live(table)
    assert now[5] == ("u", 2.0) and now[500] == ("u", 3.0) and now[7] == ("u", 5.0) and now[8] == ("u", 6.0)
    assert {6, 9, 501}.isdisjoint(now) and len(now) == 100 - 2 + 1
    assert "op" not in table.schema.names
    table.upsert(rows([60, 61, 60], 8.0).set_column(1, "category", pa.array(["x", "y", "z"])), last_wins=True)
    assert live(table)[60] == ("z", 8.0)
    table.upsert(feed([(1, "d", 0.0), (2, "d", 0.0)]), op_column="op")
    assert {1, 2}.isdisjoint(live(table)), "a feed of deletes only writes no data file"
    assert table.history(limit=1)[0].summary["files_added"] == 0


def test_a_change_feed_from_pandas_with_custom_delete_operations(table: Table) -> None:
    frame = feed([(3, "remove", 0.0), (4, "upsert", 7.0)]).to_pandas()
    table.upsert(frame, op_column="op", delete_ops=("REMOVE",))
    now = live(table)
    assert 3 not in now and now[4] == ("u", 7.0)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (rows([1], 1.0), "no operation column 'op'"),
        (rows([1], 1.0).append_column("op", pa.array([[1]])), "not text"),
        (rows([1], 1.0).append_column("op", pa.array(["u"])).append_column("extra", pa.array([1])), "extra"),
    ],
)
def test_bad_change_feeds_change_nothing(table: Table, data: pa.Table, match: str) -> None:
    before = snapshot_of(table.store)
    with pytest.raises(SchemaMismatchError, match=match):
        table.upsert(data, op_column="op")
    assert snapshot_of(table.store) == before


def test_an_upsert_names_only_the_keys_a_small_file_holds(table: Table) -> None:
    """An earlier upsert's file spans the key space with few rows: its key column is read, so a
    later upsert's tombstone does not list every key in it (tombstones stay O(change))."""
    table.upsert(rows([5, 95], 1.0))
    (spread,) = [f.path for f in table.manifest.data_files if f.added_version == table.version]
    table.upsert(rows([6, 50, 94], 2.0))
    last = table.manifest.tombstones[-1]
    assert spread not in last.files and last.files, "the small file holds none of 6, 50, 94"
    table.upsert(rows([95], 3.0))
    assert spread in table.manifest.tombstones[-1].files
    assert live(table)[95] == ("u", 3.0) and live(table)[5] == ("u", 1.0)


@pytest.mark.parametrize("data", ["rows", 5, [{"id": 2}]])
def test_rows_that_are_not_arrow_are_refused_by_every_write(table: Table, data: object) -> None:
    before = snapshot_of(table.store)
    for write in (table.append, table.upsert, table.overwrite):
        with pytest.raises(InvalidInputError):
            write(data)
    with pytest.raises(InvalidInputError):
        table.upsert(data, op_column="op")
    assert snapshot_of(table.store) == before
