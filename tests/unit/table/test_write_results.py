"""Every write says what it did: a :class:`castable.WriteResult` whose counts agree with what a
scan of the versions before and after sees, a count castable did not take said in words and
taken on request (``count=True``), never guessed."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from helpers.tables import EVENTS, events

import castable
from castable import WriteResult


@pytest.fixture
def table(tmp_path: Path) -> castable.Table:
    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id")
    t.append(events(0, 100))
    return t


def rows(t: castable.Table, version: int) -> dict[int, tuple[str | None, float | None]]:
    return {r["id"]: (r["category"], r["value"]) for r in t.scan(version=version).to_arrow().to_pylist()}


def test_an_append_says_what_it_added(table: castable.Table) -> None:
    result = table.append(events(100, 150), commit_id="load-1")
    assert isinstance(result, WriteResult)
    assert (result.version, result.commit_id, result.operation) == (2, "load-1", "append")
    assert result.committed and not result.retried and not result.staged
    assert (result.rows_added, result.files_added, result.not_counted()) == (50, 1, [])
    assert result.bytes_added == sum(f.size for f in table.manifest.data_files if f.added_version == 2)
    assert str(result).startswith("append committed version 2: 50 rows added, 1 file added, ")
    again = table.append(events(100, 150), commit_id="load-1")
    assert again.retried and again.version == 2 and again.rows_added == 50 and table.version == 2
    assert str(again).startswith("commit id 'load-1' had already committed as version 2; nothing new was written")


def test_a_delete_by_key_is_not_counted_unless_asked_and_then_exactly(table: castable.Table) -> None:
    result = table.delete("id BETWEEN 10 AND 19")
    assert result.rows_deleted is None and result.not_counted() == ["rows_deleted"]
    assert "rows deleted: not counted (written by key, no row read)" in str(result)
    assert str(result).endswith("(count=True counts them)")
    assert "None" not in str(result)
    doc = result.to_dict()
    assert doc["rows_deleted"] is None and doc["not_counted"] == ["rows_deleted"]
    json.dumps(doc)
    counted = table.delete("id BETWEEN 15 AND 29", count=True)
    assert counted.rows_deleted == 10 == len(rows(table, counted.version - 1)) - len(rows(table, counted.version))
    assert counted.not_counted() == [] and "10 rows deleted" in str(counted)


def test_a_delete_by_value_counts_what_it_read(table: castable.Table) -> None:
    expected = sum(1 for _, (category, _) in rows(table, table.version).items() if category == "a")
    result = table.delete("category = 'a'")
    assert result.rows_deleted == expected > 0


def test_a_delete_that_matches_nothing_commits_nothing_and_says_so(table: castable.Table) -> None:
    result = table.delete("id > 10000", count=True)
    assert not result.committed and result.version == table.version == 1 and result.rows_deleted == 0
    assert str(result) == "delete: no row matched; nothing committed, the table stays at version 1"


def test_an_upsert_counts_replaced_and_inserted_when_asked(table: castable.Table) -> None:
    batch = events(90, 130)
    plain = table.upsert(batch)
    assert plain.rows_added == 40 and plain.not_counted() == ["rows_inserted", "rows_replaced"]
    counted = table.upsert(events(120, 140), count=True)
    assert (counted.rows_added, counted.rows_replaced, counted.rows_inserted) == (20, 10, 10)
    assert "20 rows added, 10 rows inserted, 10 rows replaced" in str(counted)


def test_an_update_a_merge_and_an_overwrite_say_what_they_did(table: castable.Table) -> None:
    updated = table.update({"value": "value + 1"}, where="id < 5")
    assert updated.rows_updated == 5 and "5 rows updated" in str(updated)
    merged = (
        table.merge(events(95, 105))
        .when_matched_delete(where="s.id < 97")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (merged.rows_deleted, merged.rows_updated, merged.rows_inserted) == (2, 3, 5)
    replaced = table.overwrite(events(0, 3), where="id < 50", count=True)
    assert replaced.rows_added == 3 and replaced.rows_replaced == 50


def test_a_write_in_a_transaction_is_staged_until_it_commits(tmp_path: Path) -> None:
    db = castable.create_database(str(tmp_path / "db"))
    db.create_table("orders", EVENTS, primary_key="id")
    with db.transaction() as tx:
        first = tx.table("orders").append(events(0, 10))
        second = tx.table("orders").delete("category = 'a'")
    assert first.staged and first.rows_added == 10 and first.operation == "append"
    assert second.staged and second.operation == "delete" and second.rows_deleted == 3
    assert "staged in the transaction as version" in str(first)


def test_counts_taken_over_a_random_history_agree_with_scans(table: castable.Table) -> None:
    """Whatever the mix, the live rows of each version are those of the one before plus what the
    write added, less what it deleted and replaced."""
    rng = random.Random(7)
    for _ in range(12):
        lo = rng.randrange(0, 200)
        kind = rng.choice(["append", "delete", "upsert", "update"])
        if kind == "append":
            result = table.append(events(1000 + lo * 10, 1000 + lo * 10 + rng.randrange(1, 5)))
        elif kind == "delete":
            result = table.delete(f"id BETWEEN {lo} AND {lo + rng.randrange(0, 30)}", count=True)
        elif kind == "upsert":
            result = table.upsert(events(lo, lo + rng.randrange(1, 20)), count=True)
        else:
            result = table.update({"value": "value * 2"}, where=f"id < {lo}")
        if not result.committed:
            continue
        before, after = rows(table, result.version - 1), rows(table, result.version)
        assert result.not_counted() == [], (kind, result)
        added, deleted, replaced = result.rows_added, result.rows_deleted, result.rows_replaced
        assert added is not None and deleted is not None and replaced is not None
        assert len(after) - len(before) == added - deleted - replaced, (kind, result)
        if kind == "update":
            assert result.rows_updated == sum(1 for k in before if k < lo)


def test_a_result_prints_no_none_and_counts_from_two_versions() -> None:
    result = WriteResult(3, "c", "upsert", rows_added=5, rows_inserted=None, rows_replaced=None, files_added=1)
    assert "None" not in str(result) and "rows replaced: not counted" in str(result)
    history = castable.HistoryEntry(3, None, "upsert", "c", {"rows_added": 5, "rows_replaced": None})
    unknown = "not counted (written by key, no row read)"
    assert history.described() == f"5 rows added, rows inserted: {unknown}, rows replaced: {unknown}"
    assert result.counted(before=10, after=13) == WriteResult(
        3, "c", "upsert", rows_added=5, rows_inserted=3, rows_replaced=2, files_added=1
    )
