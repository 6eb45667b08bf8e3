"""Merge by primary key: clauses tried in order, change feeds, bad input, racing writers."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest
from helpers.tables import EVENTS, events, keyed_events, live, snapshot_of

import castable
from castable.errors import InvalidInputError, SchemaMismatchError
from castable.table import Table
from castable.tables import load_table


@pytest.fixture
def table(table_uri: tuple[str, dict | None]) -> Table:
    return keyed_events(table_uri, 10)


def feed(changes: list[tuple[int, str, float]]) -> pa.Table:
    """A change feed: key, operation, value (category 'f')."""
    return pa.table(
        {
            "id": [k for k, _, _ in changes],
            "op": [op for _, op, _ in changes],
            "category": ["f"] * len(changes),
            "value": [v for _, _, v in changes],
        }
    )


def test_a_change_feed_merged_deletes_updates_and_inserts_in_one_commit(table: Table) -> None:
    source = feed([(1, "d", 0.0), (2, "u", 5.0), (11, "c", 7.0), (12, "d", 0.0)])
    result = (
        table.merge(source)
        .when_matched_delete(where="s.op = 'd'")
        .when_matched_update(set={"value": "t.value + s.value", "category": "t.category || s.category"})
        .when_not_matched_insert_all(where="s.op <> 'd'")
        .execute(commit_id="cdc-1")
    )
    assert (result.rows_deleted, result.rows_updated, result.rows_inserted) == (1, 1, 1)
    now = live(table)
    assert 1 not in now and 12 not in now and now[2] == ("cf", 6.0) and now[11] == ("f", 7.0) and len(now) == 10
    entry = table.history(limit=1)[0]
    assert entry.operation == "merge" and entry.summary["rows_deleted"] == 1 and entry.version == result.version
    again = table.merge(source).when_matched_delete().execute(commit_id="cdc-1")
    assert again.retried and again == replace(result, retried=True), (
        "idempotent: the first commit's result, nothing new"
    )


def test_clauses_apply_in_order_and_unset_inserted_columns_are_null(table: Table) -> None:
    source = pa.table({"id": [3, 4, 20, 21], "value": [1.0, -1.0, 2.0, -2.0]})
    result = (
        table.merge(source, source_alias="src", target_alias="tgt")
        .when_matched_update(set={"value": "src.value"}, where="src.value > 0")
        .when_matched_delete()
        .when_not_matched_insert({"id": "src.id", "value": "src.value * 10"}, where="src.value > 0")
        .execute()
    )
    now = live(table)
    assert now[3] == (None, 1.0) and 4 not in now and now[20] == (None, 20.0) and 21 not in now
    assert (result.rows_updated, result.rows_deleted, result.rows_inserted) == (1, 1, 1)
    nothing = table.merge(pa.table({"id": [99]})).when_matched_delete().execute()
    assert nothing.version == table.version and nothing.rows_deleted == 0


def test_update_all_replaces_whole_rows_from_a_pandas_source(table: Table) -> None:
    source = events(5, 15).to_pandas()
    source["value"] = -source["value"]
    table.merge(source).when_matched_update_all().when_not_matched_insert_all().execute()
    now = live(table)
    assert len(now) == 15 and now[7] == (None, -3.5) and now[14] == ("c", -7.0) and now[4] == ("a", 2.0)


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda t: t.merge(pa.table({"id": [1, 1]})), InvalidInputError, "more than once"),
        (lambda t: t.merge(pa.table({"key": [1]})), SchemaMismatchError, "no primary key column 'id'"),
        (lambda t: t.merge(pa.table({"id": [1, None]})), SchemaMismatchError, "NULLs"),
        (lambda t: t.merge(pa.table({"id": [1]})).execute(), InvalidInputError, "at least one"),
        (lambda t: t.merge(pa.table({"id": [1]})).when_matched_update_all(), SchemaMismatchError, "lacks columns"),
        (
            lambda t: t.merge(pa.table({"id": [1]})).when_matched_delete(where="s.id + 1"),
            InvalidInputError,
            "not true or false",
        ),
        (
            lambda t: t.merge(pa.table({"id": [1]})).when_matched_update({"id": "s.id"}),
            InvalidInputError,
            "cannot set the primary key",
        ),
        (
            lambda t: t.merge(pa.table({"id": [1], "value": [1.0]})).when_matched_update({"value": "value"}),
            InvalidInputError,
            "ambiguous",
        ),
        (
            lambda t: t.merge(pa.table({"id": [1]})).when_not_matched_insert({"id": "s.id + 1"}),
            InvalidInputError,
            "key is the source row's",
        ),
        (
            lambda t: t.merge(pa.table({"id": [1]})).when_matched_update({"category": "s.nope"}),
            InvalidInputError,
            "unknown column 's.nope'",
        ),
        (lambda t: t.merge(pa.table({"id": [1]}), source_alias="t"), InvalidInputError, "two different names"),
        (
            lambda t: t.merge(pa.table({"id": ["x"]})).when_matched_delete().execute(),
            SchemaMismatchError,
            "key column 'id' is string, the table's int64",
        ),
    ],
)
def test_bad_merges_change_nothing(table: Table, build, error: type, match: str) -> None:  # type: ignore[no-untyped-def]
    before = snapshot_of(table.store)
    with pytest.raises(error, match=match):
        build(table)
    assert snapshot_of(table.store) == before


def test_merge_needs_a_primary_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    t = castable.create_table(str(tmp_path / "t"), EVENTS)
    with pytest.raises(InvalidInputError, match="has none"):
        t.merge(pa.table({"id": [1]}))


def test_a_merge_racing_an_insert_of_its_key_decides_again(table: Table) -> None:
    stale = load_table(table.store)
    table.append(pa.table({"id": [50], "category": ["new"], "value": [1.0]}, schema=EVENTS))
    source = pa.table({"id": [50, 3], "value": [9.0, 9.0]})
    stale.merge(source).when_matched_update({"value": "s.value"}).when_not_matched_insert(
        {"value": "s.value"}
    ).execute()
    now = live(table)
    assert now[50] == ("new", 9.0), "the key inserted meanwhile is matched, not inserted a second time"
    assert now[3] == (None, 9.0) and table.history(limit=1)[0].summary["replans"] == 1


@pytest.mark.parametrize("source", [[], "rows", 5, [pa.table({"id": [1]}), {"id": 2}]])
def test_a_merge_source_that_is_not_rows_is_refused(table: Table, source: object) -> None:
    with pytest.raises(InvalidInputError):
        table.merge(source)


def test_a_merge_source_may_be_batches(table: Table) -> None:
    batches = pa.table({"id": [1, 2], "value": [7.0, 8.0]}).to_batches(max_chunksize=1)
    table.merge(batches).when_matched_update({"value": "s.value"}).execute()
    assert live(table)[1][1] == 7.0 and live(table)[2][1] == 8.0
