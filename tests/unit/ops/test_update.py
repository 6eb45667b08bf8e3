"""Update: the matching rows read, changed by SQL expressions, tombstoned and appended again."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers.tables import EVENTS, events, keyed_events, live, other, snapshot_of

import castable
from castable.errors import InvalidInputError, InvalidPredicateError, SchemaMismatchError
from castable.table import Table


@pytest.fixture
def table(table_uri: tuple[str, dict | None]) -> Table:
    return keyed_events(table_uri, 100)


def test_update_sets_expressions_of_the_old_values_on_the_matching_rows_only(table: Table) -> None:
    before = live(table)
    version = table.update({"category": "'closed'", "value": "value * 2 + id"}, where="id BETWEEN 10 AND 14").version
    now = live(table)
    assert len(now) == 100
    for k in range(100):
        old_category, old_value = before[k]
        assert old_value is not None  # every EVENTS row has a value
        assert now[k] == (("closed", old_value * 2 + k) if 10 <= k <= 14 else (old_category, old_value))
    entry = table.history(limit=1)[0]
    assert (entry.version, entry.operation) == (version, "update")
    assert entry.summary["rows_updated"] == 5 and entry.summary["rows_added"] == 5 and entry.summary["tombstone"]
    assert table.scan(filter="category = 'closed'").count() == 5, "the new rows are found by their new values"


def test_update_without_where_changes_every_row_and_every_value_sees_the_old_row(table: Table) -> None:
    table.update({"value": "CASE WHEN category IS NULL THEN -1 ELSE id END", "category": "COALESCE(category, 'none')"})
    now = live(table)
    assert now[3] == ("none", -1.0) and now[2] == ("c", 2.0)
    assert table.update({"value": 0}, where="id > 1000").version == table.version, "no match: nothing committed"
    table.delete("id IN (5, 6)")
    assert table.update({"value": 0}, where="id IN (5, 6)").version == table.version, "deleted keys: nothing committed"
    assert table.update({"value": pc.field("value") + 1}, where="id = 2", commit_id="u").version == table.version
    assert live(table)[2] == ("c", 3.0)
    version = table.version
    assert table.update({"value": 100}, where="id = 2", commit_id="u").version == version and live(table)[2] == (
        "c",
        3.0,
    )


@pytest.mark.parametrize(
    ("values", "where", "error", "match"),
    [
        ({"id": "id + 1"}, None, InvalidInputError, "cannot set the primary key 'id'"),
        ({"value": "'high'"}, None, InvalidInputError, "'high' is not a valid double value"),
        ({"value": "category"}, None, InvalidInputError, "gives string"),
        ({"nope": "1"}, None, InvalidInputError, "unknown column 'nope'"),
        ({"value": "nope + 1"}, None, InvalidInputError, "unknown column 'nope'.*single quotes"),
        ({"category": "category + 1"}, None, InvalidInputError, "add_checked is not defined for"),
        ({}, None, InvalidInputError, "at least one column"),
        ({"value": "1"}, "nope = 1", InvalidPredicateError, "unknown column"),
        ({"value": "value +"}, None, InvalidInputError, "cannot parse"),
    ],
)
def test_bad_updates_change_nothing(table: Table, values: dict, where: str | None, error: type, match: str) -> None:
    before = snapshot_of(table.store)
    with pytest.raises(error, match=match):
        table.update(values, where=where)
    assert snapshot_of(table.store) == before


def test_an_update_that_breaks_a_column_rule_changes_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.int8(), nullable=False)])
    t = castable.create_table(str(tmp_path / "t"), schema, primary_key="id")
    t.append(pa.table({"id": [1, 2], "n": pa.array([100, 1], pa.int8())}, schema=schema))
    before = snapshot_of(t.store)
    with pytest.raises(InvalidInputError, match="does not fit column 'n'"):
        t.update({"n": "n + 100"})
    with pytest.raises(SchemaMismatchError):
        t.update({"n": "NULL"}, where="id = 2")
    assert snapshot_of(t.store) == before
    assert t.refresh().to_arrow().to_pylist() == [{"id": 1, "n": 100}, {"id": 2, "n": 1}]


def test_racing_updates_of_the_same_rows_both_apply(table: Table) -> None:
    first, second = other(table), other(table)
    first.update({"value": "value + 1"}, where="id < 5")
    second.update({"value": "value + 10"}, where="id < 5")  # read the rows before the first update
    before = {k: v for k, (_, v) in live(table.refresh()).items()}
    assert before[0] == events(0, 1).column("value")[0].as_py() + 11
    assert table.history(limit=1)[0].summary["replans"] == 1


def test_an_update_racing_compaction_and_an_upsert_loses_nothing(table: Table) -> None:
    table.append(events(100, 200))
    stale = other(table)
    table.compact(min_file_size=1 << 30)
    table.upsert(pa.table({"id": [150], "category": ["u"], "value": [0.5]}, schema=EVENTS))
    stale.update({"category": "'x'"}, where="id >= 149 AND id <= 151")
    now = live(table)
    assert len(now) == 200 and now[150] == ("x", 0.5) and now[149][0] == now[151][0] == "x"


def test_an_update_racing_an_append_into_its_range_leaves_the_appended_row(table: Table) -> None:
    stale = other(table)
    table.append(pa.table({"id": [500], "category": ["a"], "value": [1.0]}, schema=EVENTS))
    stale.update({"value": "0"}, where="category = 'a'")
    now = live(table)
    assert now[500] == ("a", 1.0), "the update is ordered before the append it did not see"
    assert all(v == 0 for k, (c, v) in now.items() if c == "a" and k != 500)
    assert table.history(limit=1)[0].summary["replans"] == 0
