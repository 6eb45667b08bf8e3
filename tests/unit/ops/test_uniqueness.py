"""Enforced primary keys (``write.primary-key.enforce``): every write that adds rows refuses keys
already live or repeated, naming them, and leaves the table as it was; concurrent writers and a
table that begins to enforce meanwhile are caught on the version the write is built on."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.reads import Reads
from helpers.tables import EVENTS, events

import castable
from castable.errors import DuplicateKeyError, InvalidInputError, SchemaMismatchError
from castable.table import Table

ENFORCED = {"write.primary-key.enforce": "true", "write.inline.max-bytes": "0"}


def enforced_table(tmp_path: Path, rows: int = 100, **properties: str) -> Table:
    table = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id", properties=ENFORCED | properties)
    table.append(events(0, rows))
    return table


def state(table: Table) -> tuple[int, list[dict[str, Any]]]:
    fresh = castable.open_table(table.uri)
    return fresh.version, fresh.to_arrow().sort_by("id").to_pylist()


def ids(table: Table) -> list[int]:
    return sorted(castable.open_table(table.uri).to_arrow().column("id").to_pylist())


def refuses(table: Table, write: Callable[[], object], keys: list[int], match: str) -> None:
    """``write`` raises ``DuplicateKeyError`` naming exactly ``keys``; the table is as it was."""
    before = state(table)
    with pytest.raises(DuplicateKeyError, match=match) as raised:
        write()
    assert raised.value.keys == keys and isinstance(raised.value, InvalidInputError)
    assert state(table) == before


def test_an_append_of_live_or_repeated_keys_is_refused_naming_them(tmp_path: Path) -> None:
    table = enforced_table(tmp_path)
    refuses(
        table,
        lambda: table.append(events(98, 103)),
        [98, 99],
        r"2 key\(s\) of the write are already live in "
        r"version 1: id 98, 99; nothing was committed",
    )
    refuses(
        table,
        lambda: table.append(pa.concat_tables([events(200, 203), events(201, 202)])),
        [201],
        "repeated among the write's rows: id 201",
    )
    assert table.append(events(100, 150)).rows_added == 50
    table.delete("id < 10")
    assert table.append(events(0, 5)).rows_added == 5, "a deleted key may come back"
    assert ids(table) == [*range(5), *range(10, 150)]


def test_many_keys_are_named_ten_and_carried_a_hundred(tmp_path: Path) -> None:
    table = enforced_table(tmp_path, 500)
    with pytest.raises(DuplicateKeyError, match=r"300 key\(s\) .*id 0, 1, 10, 100, .*, \.\.\.;") as raised:
        table.append(events(0, 300))
    assert len(raised.value.keys) == 100


def test_new_keys_past_the_live_ones_read_no_data_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The usual append (ids or times that grow) is settled by the files' statistics alone."""
    table = enforced_table(tmp_path, 1000)
    for start in range(1000, 5000, 1000):
        table.append(events(start, start + 1000))
    reads = Reads(monkeypatch)
    table.append(events(5000, 6000))
    assert reads.data == []
    reads.keys.clear()
    with pytest.raises(DuplicateKeyError):
        table.append(events(5999, 6001))
    assert len(set(reads.data)) == 1, "only the file whose statistics hold the key is read"


def test_a_key_committed_first_by_another_writer_is_found_on_the_newer_version(tmp_path: Path) -> None:
    table = enforced_table(tmp_path)
    other = castable.open_table(table.uri)
    other.append(events(100, 110))
    refuses(table, lambda: table.append(events(105, 120)), list(range(105, 110)), "already live in version 2")
    assert table.append(events(110, 120)).version == 3


def test_a_write_planned_before_the_table_enforced_its_key_is_checked_all_the_same(tmp_path: Path) -> None:
    table = castable.create_table(
        str(tmp_path / "t"), EVENTS, primary_key="id", properties={"write.inline.max-bytes": "0"}
    )
    table.append(events(0, 10))
    stale = castable.open_table(table.uri)
    table.set_properties({"write.primary-key.enforce": "true"})
    refuses(stale, lambda: stale.append(events(5, 12)), list(range(5, 10)), "already live in version 2")
    stale.set_properties({"write.primary-key.enforce": "false"})
    assert stale.append(events(5, 12)).rows_added == 7, "off again: duplicates are the writer's to avoid"


def test_enforcement_is_refused_where_keys_are_live_twice_or_there_is_no_key(tmp_path: Path) -> None:
    table = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id")
    table.append(events(0, 10))
    table.append(events(8, 12))
    refuses(
        table,
        lambda: table.set_properties({"write.primary-key.enforce": "true"}),
        [8, 9],
        r"2 key\(s\) are live more than once in version 2",
    )
    table.delete("id IN (8, 9)")
    table.append(events(8, 10))
    assert table.set_properties({"write.primary-key.enforce": "true"}).version == 5
    with pytest.raises(InvalidInputError, match="needs a primary key"):
        castable.create_table(str(tmp_path / "u"), EVENTS, properties={"write.primary-key.enforce": "true"})


def test_a_restore_that_would_bring_back_a_repeated_key_is_refused(tmp_path: Path) -> None:
    table = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id")
    table.append(events(0, 10))
    table.append(events(5, 6))  # version 2 holds key 5 twice
    table.delete("id = 5")
    table.set_properties({"write.primary-key.enforce": "true"})
    refuses(table, lambda: table.restore(2), [5], "live more than once")
    assert table.restore(1).version == 5


def test_overwrites_keep_keys_unique_outside_what_they_replace(tmp_path: Path) -> None:
    table = enforced_table(tmp_path, 10)
    moved = events(3, 4).set_column(1, "category", pa.array(["a"]))
    refuses(table, lambda: table.overwrite(moved, where="category = 'a'"), [3], "already live")
    assert table.overwrite(events(0, 1), where="category = 'a'").rows_added == 1
    refuses(table, lambda: table.overwrite(pa.concat_tables([events(0, 3), events(2, 3)])), [2], "repeated")
    assert table.overwrite(events(0, 3)).rows_added == 3 and ids(table) == [0, 1, 2]


def test_registered_files_and_transactions_are_checked_too(tmp_path: Path) -> None:
    table = enforced_table(tmp_path, 10)
    buf = io.BytesIO()
    pq.write_table(events(8, 12), buf)
    table.store.put("data/engine/part-0.parquet", buf.getvalue())
    refuses(table, lambda: table.add_files(["data/engine/part-0.parquet"]), [8, 9], "already live")
    assert table.add_files(["data/engine/part-0.parquet"], mode="upsert").rows_added == 4
    db = castable.create_database(str(tmp_path / "db"))
    orders = db.create_table("orders", EVENTS, primary_key="id", properties=ENFORCED)
    orders.append(events(0, 5))

    def transaction() -> None:
        with db.transaction() as tx:
            tx.table("orders").append(events(4, 6))

    refuses(orders, transaction, [4], "already live")


def test_upserts_and_merges_need_no_check_and_keep_keys_unique(tmp_path: Path) -> None:
    table = enforced_table(tmp_path, 10)
    assert table.upsert(events(5, 15)).rows_added == 10
    table.merge(events(12, 20)).when_matched_update_all().when_not_matched_insert_all().execute()
    keys = ids(table)
    assert keys == list(range(20)) and len(keys) == len(set(keys))


def test_a_key_set_on_an_existing_table_is_checked_against_its_live_rows(tmp_path: Path) -> None:
    """No live key may be NULL (nor, where the table enforces its key, live twice); the key
    then counts everywhere (upsert, deletes by key); a rename keeps it; it can be dropped."""
    table = castable.create_table(str(tmp_path / "t"), EVENTS.remove(0).insert(0, pa.field("id", pa.int64())))
    table.append(pa.table({"id": [1, 2, None], "category": ["a", "b", "c"], "value": [1.0, 2.0, 3.0]}))
    refuses_key = state(table)
    with pytest.raises(InvalidInputError, match="1 live row"):
        table.alter().set_primary_key("id").commit()
    assert state(table) == refuses_key
    table.delete("id IS NULL")
    table.append(events(2, 3))  # a key twice is allowed where uniqueness is not asked for
    assert table.alter().set_primary_key("id").commit().version == 4 and table.primary_key == "id"
    with pytest.raises(SchemaMismatchError, match="holds NULLs"):
        table.append(pa.table({"id": [None], "category": ["x"], "value": [0.0]}))
    refuses(table, lambda: table.set_properties({"write.primary-key.enforce": "true"}), [2], "live more than once")
    table.upsert(events(2, 3))
    table.set_properties({"write.primary-key.enforce": "true"})
    table.alter().rename_column("id", "ident").commit()
    assert table.primary_key == "ident" and table.settings.primary_key_enforce
    with pytest.raises(InvalidInputError, match="set it to false before the primary key goes"):
        table.alter().drop_primary_key().commit()
    table.set_properties({"write.primary-key.enforce": "false"})
    assert table.alter().drop_primary_key().commit().summary["changes"] == ["drop the primary key"]
    with pytest.raises(InvalidInputError, match="has none"):
        table.upsert(events(5, 6).rename_columns(["ident", "category", "value"]))
    with pytest.raises(InvalidInputError, match="single-column"):
        table.alter().set_primary_key(["ident", "category"]).commit()
    with pytest.raises(InvalidInputError, match="must be an integer"):
        table.alter().set_primary_key("value").commit()


def test_a_write_planned_before_a_key_was_set_is_checked_for_null_keys(tmp_path: Path) -> None:
    table = castable.create_table(str(tmp_path / "t"), EVENTS.remove(0).insert(0, pa.field("id", pa.int64())))
    table.append(events(0, 3))
    stale = castable.open_table(table.uri)
    table.alter().set_primary_key("id").commit()
    rows = pa.table({"id": [None, 7], "category": ["x", "y"], "value": [0.0, 1.0]}, schema=stale.schema)
    before = state(table)
    with pytest.raises(InvalidInputError, match="primary key became 'id' since the write began, and 1 of its rows"):
        stale.append(rows)
    assert state(table) == before
    assert stale.append(rows.slice(1)).rows_added == 1


def test_renaming_the_key_column_reads_no_data_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = enforced_table(tmp_path)
    reads = Reads(monkeypatch)
    table.alter().rename_column("id", "ident").commit()
    assert reads.data == []
