"""Databases: several tables committed through one log, read at one version (docs/format.md section 13)."""

from __future__ import annotations

import gc
import io
import json
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.faults import FaultyStore, SimulatedCrash, once
from helpers.tables import EVENTS, events, snapshot_of

import castable
from castable.commit.change import NextState
from castable.commit.dbcommitters import DatabaseLog
from castable.commit.dblog import LOG_PREFIX
from castable.commit.pointer import read_pointer
from castable.database import Database
from castable.errors import (
    CommitConflictError,
    CorruptObjectError,
    DatabaseAlreadyExistsError,
    DatabaseNotFoundError,
    InvalidInputError,
    TableAlreadyExistsError,
    TableNotFoundError,
    TransactionClosedError,
    VersionNotFoundError,
)
from castable.format.layout import POINTER_KEY, manifest_key
from castable.format.manifest import Manifest

LINES = pa.schema([pa.field("order_id", pa.int64(), nullable=False), pa.field("qty", pa.int64())])


def lines(order_ids: list[int]) -> pa.Table:
    return pa.table({"order_id": order_ids, "qty": [1] * len(order_ids)}, schema=LINES)


@pytest.fixture
def shop(table_uri: tuple[str, dict | None]) -> Database:
    """A database with ``orders`` (keyed by id, ids 0-9) and ``lines`` (two per order), on each store."""
    uri, options = table_uri
    db = castable.create_database(uri, storage_options=options)
    db.create_table("orders", EVENTS, primary_key="id").append(events(0, 10))
    db.create_table("lines", LINES).append(lines([i for i in range(10) for _ in range(2)]))
    return db


def ids(t: castable.Table) -> list[int]:
    return sorted(t.scan(["id"]).to_arrow().column("id").to_pylist())


def order_ids(t: castable.Table) -> list[int]:
    return sorted(t.scan(["order_id"]).to_arrow().column("order_id").to_pylist())


def test_a_transaction_commits_every_table_as_one_version(shop: Database) -> None:
    before = shop.version
    with shop.transaction(commit_id="order-10") as tx:
        tx.table("orders").append(events(10, 11))
        tx.table("lines").append(lines([10, 10, 10]))
        assert ids(tx.table("orders"))[-1] == 10, "a transaction reads its own writes"
        assert ids(shop.table("orders"))[-1] == 9, "no one else sees them before the commit"
    assert tx.version == before + 1 == shop.version
    snap = shop.snapshot()
    assert snap.tables == {"lines": 2, "orders": 2}
    assert ids(snap.table("orders")) == list(range(11))
    assert order_ids(snap.table("lines")).count(10) == 3
    old = shop.snapshot(version=before)
    assert ids(old.table("orders")) == list(range(10)) and 10 not in order_ids(old.table("lines"))
    entry = shop.history(limit=1)[0]
    assert (entry.version, entry.operation, entry.commit_id) == (tx.version, "transaction", "order-10")
    assert entry.tables["orders"]["rows_added"] == 1 and entry.tables["lines"]["rows_added"] == 3


def test_several_writes_to_one_table_in_a_transaction_are_one_table_version(shop: Database) -> None:
    with shop.transaction() as tx:
        orders = tx.table("orders")
        orders.append(events(10, 20))
        orders.delete("id >= 15")
        orders.upsert(events(3, 4).set_column(2, "value", pa.array([99.0])))
    table = shop.table("orders")
    assert table.version == 2 and ids(table) == list(range(15))
    assert table.to_arrow(filter="id = 3").column("value").to_pylist() == [99.0]
    assert [h.operation for h in table.history()[:1]] == ["transaction"]
    assert table.history()[0].summary["operations"][1]["operation"] == "delete"


def test_the_same_commit_id_commits_a_transaction_once(shop: Database) -> None:
    for _ in range(2):
        with shop.transaction(commit_id="once") as tx:
            tx.table("orders").append(events(10, 11))
            tx.table("lines").append(lines([10]))
    assert tx.version == shop.committed_version("once") == shop.version
    assert ids(shop.table("orders")).count(10) == 1
    assert order_ids(shop.table("lines")).count(10) == 1


def test_a_member_table_opened_on_its_own_still_commits_through_the_database(
    shop: Database, table_uri: tuple[str, dict | None]
) -> None:
    uri, options = table_uri
    orders = castable.open_table(f"{uri}/orders", storage_options=options)
    version = orders.append(events(10, 12), commit_id="alone").version
    assert version == 2 and ids(orders) == list(range(12))
    assert shop.refresh().history(limit=1)[0].commit_id == "alone"
    assert shop.snapshot().tables["orders"] == version
    assert orders.append(events(10, 12), commit_id="alone").version == version, "idempotent on its own too"


def test_time_travel_by_database_version_and_time(shop: Database) -> None:
    first = shop.snapshot()
    with shop.transaction() as tx:
        tx.table("orders").delete("id < 5")
        tx.table("lines").delete("order_id < 5")
    at = shop.snapshot(as_of=first.created_at)
    assert at.version == first.version
    assert ids(at.table("orders")) == list(range(10))
    assert ids(shop.snapshot().table("orders")) == list(range(5, 10))
    with pytest.raises(VersionNotFoundError, match="did not exist"):
        shop.snapshot(as_of=first.created_at - timedelta(days=1))


def test_transactions_on_the_same_table_rebase_by_its_rules(shop: Database) -> None:
    first, second = shop.transaction(), shop.transaction()
    first.begin(), second.begin()
    first.table("orders").append(events(10, 11))
    first.table("lines").append(lines([10]))
    second.table("orders").delete("id = 3")
    second.table("lines").delete("order_id = 3")
    assert first.commit() + 1 == second.commit(), "a delete rebases over a concurrent append"
    assert ids(shop.table("orders")) == [i for i in range(11) if i != 3]
    assert 3 not in order_ids(shop.table("lines")) and 10 in order_ids(shop.table("lines"))


def test_a_conflict_on_one_table_aborts_the_whole_transaction(shop: Database) -> None:
    loser = shop.transaction()
    loser.begin()
    loser.table("lines").append(lines([77]))
    loser.table("orders").overwrite(events(100, 101), where="id >= 100")
    shop.table("orders").append(events(100, 102))  # adds rows the overwrite would replace
    before = snapshot_of(shop.store)
    with pytest.raises(CommitConflictError, match="overwrite"):
        loser.commit()
    changed = {k for k, v in snapshot_of(shop.store).items() if before.get(k) != v}
    assert not [k for k in changed if "manifest" in k or POINTER_KEY in k], "nothing was committed"
    assert 77 not in order_ids(shop.table("lines")), "the other table's write is not committed either"
    with pytest.raises(TransactionClosedError, match="failed"):
        loser.table("lines")


def test_racing_upserts_in_transactions_first_committer_wins(shop: Database) -> None:
    first, second = shop.transaction().begin(), shop.transaction().begin()
    first.table("orders").upsert(events(3, 4).set_column(2, "value", pa.array([1.0])))
    first.table("lines").append(lines([3]))
    second.table("orders").upsert(events(3, 4).set_column(2, "value", pa.array([2.0])))
    second.table("lines").append(lines([77]))
    first.commit()
    before = snapshot_of(shop.store)
    with pytest.raises(CommitConflictError, match=r"table 'orders'.*upsert.*\(id 3\)"):
        second.commit()
    assert snapshot_of(shop.store) == before, "the refused transaction wrote nothing to any table"
    assert shop.refresh().table("orders").to_arrow(filter="id = 3").column("value").to_pylist() == [1.0]
    assert ids(shop.table("orders")) == list(range(10)) and 77 not in order_ids(shop.table("lines"))


def test_racing_blind_upserts_outside_transactions_keep_the_later_commits_row(shop: Database) -> None:
    first, second = (
        shop.table("orders"),
        castable.open_database(shop.uri, storage_options=_options(shop)).table("orders"),
    )
    first.upsert(events(3, 4).set_column(2, "value", pa.array([1.0])))
    second.upsert(events(3, 4).set_column(2, "value", pa.array([2.0])))  # planned on the older version
    assert shop.refresh().table("orders").to_arrow(filter="id = 3").column("value").to_pylist() == [2.0]
    assert ids(shop.table("orders")) == list(range(10))


def test_a_transaction_planned_before_a_schema_change_conflicts(shop: Database) -> None:
    tx = shop.transaction().begin()
    tx.table("lines").append(lines([11]))
    tx.table("orders").delete("id = 1")
    shop.table("orders").alter().add_column("note", pa.string()).commit()
    with pytest.raises(CommitConflictError, match="schema"):
        tx.commit()
    assert 11 not in order_ids(shop.table("lines")) and 1 in ids(shop.table("orders"))


def test_transactions_on_disjoint_tables_both_commit_without_rebuilding(shop: Database) -> None:
    a, b = shop.transaction(), shop.transaction()
    a.begin(), b.begin()
    a.table("orders").append(events(10, 11))
    b.table("lines").append(lines([10]))
    builds: list[int] = []
    original = b._staged.writes["lines"].changes[0].build

    def counting_build(m: Manifest) -> NextState:
        builds.append(m.version)
        return original(m)

    b._staged.writes["lines"].changes[0] = type(b._staged.writes["lines"].changes[0])("append", counting_build)
    assert (a.commit(), b.commit()) == (5, 6)
    assert builds == [1], "the lines table was built once: the orders commit did not touch it"
    assert shop.snapshot().tables == {"orders": 2, "lines": 2}


def test_bad_table_names_are_refused_before_anything_is_written(shop: Database) -> None:
    before = snapshot_of(shop.store)
    for name in ["../orders", "a/b", "_database", "", ".hidden", "x" * 200, "-x", 3]:
        with pytest.raises(InvalidInputError, match="not a table name inside the database"):
            shop.create_table(name, EVENTS)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="not a table name inside the database"):
            shop.table(name)  # type: ignore[arg-type]
    with pytest.raises(TableNotFoundError, match="has no table 'nope'"):
        shop.table("nope")
    with pytest.raises(TableNotFoundError, match="has no table 'nope'"), shop.transaction() as tx:
        tx.table("nope")
    with pytest.raises(TableAlreadyExistsError):
        shop.create_table("orders", EVENTS)
    assert snapshot_of(shop.store) == before


def test_a_retried_create_table_returns_the_table_it_created(shop: Database) -> None:
    first = shop.create_table("refunds", EVENTS, commit_id="create-refunds")
    again = shop.create_table("refunds", EVENTS, commit_id="create-refunds")
    assert (first.manifest.table_uuid, again.version) == (again.manifest.table_uuid, 0)
    with pytest.raises(TableAlreadyExistsError):
        shop.create_table("refunds", EVENTS)


@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
def test_a_read_only_transaction_commits_nothing_and_raises_nothing(shop: Database, isolation: str) -> None:
    before, version = snapshot_of(shop.store), shop.version
    with shop.transaction(isolation=isolation) as tx:  # type: ignore[arg-type]
        assert ids(tx.table("orders")) == list(range(10))
        assert tx.table("lines").count() == 20
    assert tx.version == version == shop.refresh().version
    explicit = shop.transaction(isolation=isolation).begin()  # type: ignore[arg-type]
    assert explicit.table("orders").count() == 10
    assert explicit.commit() == version
    with pytest.raises(TransactionClosedError, match="committed"):
        explicit.commit()
    with shop.transaction(isolation=isolation) as untouched:  # type: ignore[arg-type]
        pass
    assert untouched.version == version
    assert shop.run(lambda tx: ids(tx.table("orders")), isolation=isolation) == list(range(10))  # type: ignore[arg-type]
    assert snapshot_of(shop.store) == before, "no version, no object written"
    assert shop.refresh().version == version


def test_a_read_only_transaction_judges_its_reads_only_when_serializable(shop: Database) -> None:
    """A commit since the snapshot that changed a row the transaction read fails a serializable
    read-only transaction (and only then), with nothing committed; snapshot isolation lets it end.
    Rows are judged by the columns read: ids that did not change are no conflict."""
    readers = {level: shop.transaction(isolation=level).begin() for level in ("snapshot", "serializable")}
    for tx in readers.values():
        assert tx.table("orders").to_arrow(filter="id = 3").column("value").to_pylist() == [1.5]
    counter = shop.transaction(isolation="serializable").begin()
    assert counter.table("orders").scan(["id"], filter="id = 3").count() == 1
    snapshot = shop.version
    shop.table("orders").upsert(events(7, 8).set_column(2, "value", pa.array([70.0])))  # a row none read
    shop.table("orders").upsert(events(3, 4).set_column(2, "value", pa.array([30.0])))
    before, version = snapshot_of(shop.store), shop.refresh().version
    assert readers["snapshot"].commit() == snapshot, "it read its snapshot, and says so"
    with pytest.raises(CommitConflictError, match=r"table 'orders'.* read rows .*\(id 3\)"):
        readers["serializable"].commit()
    with pytest.raises(TransactionClosedError, match="failed"):
        readers["serializable"].table("orders")
    assert counter.commit() == snapshot, "the ids it read are unchanged"
    assert snapshot_of(shop.store) == before and shop.refresh().version == version


def test_run_reruns_a_serializable_read_only_function_whose_reads_changed(shop: Database) -> None:
    seen: list[float] = []

    def report(tx: castable.Transaction) -> float:
        [value] = tx.table("orders").to_arrow(filter="id = 5").column("value").to_pylist()
        seen.append(value)
        if len(seen) == 1:  # a commit between the read and the end of the function
            shop.table("orders").upsert(events(5, 6).set_column(2, "value", pa.array([50.0])))
        return value

    version = shop.version
    assert shop.run(report, isolation="serializable") == 50.0
    assert seen == [2.5, 50.0] and shop.refresh().version == version + 1, "only the other commit's version"
    assert shop.run(report) == 50.0, "snapshot isolation: a read-only run never conflicts"


def test_a_transaction_left_open_commits_nothing_and_blocks_no_one(shop: Database) -> None:
    tx = shop.transaction().begin()
    tx.table("orders").append(events(10, 11))
    shop.table("orders").append(events(20, 21))
    with shop.transaction() as other:
        other.table("lines").append(lines([20]))
    assert ids(shop.table("orders")) == [*range(10), 20]
    with pytest.warns(ResourceWarning, match="left open"):
        del tx
        gc.collect()
    assert ids(shop.table("orders")) == [*range(10), 20]


def test_a_transaction_cannot_be_used_outside_its_life(shop: Database) -> None:
    tx = shop.transaction()
    with pytest.raises(TransactionClosedError, match="is new"):
        tx.table("orders")
    with tx:
        orders = tx.table("orders")
        orders.append(events(10, 11))
    with pytest.raises(TransactionClosedError, match="committed"):
        orders.append(events(11, 12))
    with pytest.raises(TransactionClosedError, match="already begun"), tx:
        pass
    before = snapshot_of(shop.store)
    with pytest.raises(ValueError, match="boom"), shop.transaction() as aborted:
        aborted.table("orders").append(events(30, 31))
        aborted.table("orders").delete("id = 10")
        raise ValueError("boom")
    assert snapshot_of(shop.store) == before, "the aborted writes' data and tombstone files are deleted"
    with pytest.raises(TransactionClosedError, match="aborted"):
        aborted.table("orders")
    assert 30 not in ids(shop.table("orders"))


def test_an_aborted_transaction_leaves_the_files_it_registered(shop: Database) -> None:
    """Files given to add_files are the caller's (an engine may commit them again): an abort
    deletes only what the transaction itself wrote."""
    orders = shop.table("orders")
    buf = io.BytesIO()
    pq.write_table(events(40, 42), buf)
    orders.store.put("data/engine.parquet", buf.getvalue())
    before = snapshot_of(shop.store)
    with pytest.raises(ValueError, match="boom"), shop.transaction() as aborted:
        aborted.table("orders").add_files(["data/engine.parquet"])
        aborted.table("orders").append(events(30, 31))
        raise ValueError("boom")
    assert snapshot_of(shop.store) == before
    orders.refresh().add_files(["data/engine.parquet"])
    assert ids(orders) == [*range(10), 40, 41]


def test_what_a_transaction_cannot_do_is_refused(shop: Database) -> None:
    with shop.transaction() as tx:
        orders = tx.table("orders")
        with pytest.raises(InvalidInputError, match="commit_id"):
            orders.append(events(10, 11), commit_id="mine")
        with pytest.raises(InvalidInputError, match="maintenance"):
            orders.gc()
        with pytest.raises(InvalidInputError, match="cannot run inside a transaction"):
            orders.alter().add_column("extra", pa.string()).commit()
        with pytest.raises(InvalidInputError, match="cannot run inside a transaction"):
            orders.restore(version=0)
        orders.append(events(10, 11))
    assert ids(shop.table("orders")) == list(range(11))


def test_create_refuses_what_is_already_there(tmp_path: Path) -> None:
    db = castable.create_database(str(tmp_path / "db"))
    with pytest.raises(DatabaseAlreadyExistsError):
        castable.create_database(str(tmp_path / "db"))
    castable.create_table(str(tmp_path / "t"), EVENTS)
    with pytest.raises(DatabaseAlreadyExistsError, match="a table"):
        castable.create_database(str(tmp_path / "t"))
    with pytest.raises(InvalidInputError, match="inside the database"):
        castable.create_table(str(tmp_path / "db" / "loose"), EVENTS)
    with pytest.raises(InvalidInputError, match="inside"):
        castable.create_database(str(tmp_path / "t" / "inner"))
    with pytest.raises(DatabaseNotFoundError):
        castable.open_database(str(tmp_path / "nothing"))
    assert db.tables() == []


def test_a_malformed_database_version_is_a_clear_error_and_changes_nothing(shop: Database) -> None:
    log = shop.store.child(LOG_PREFIX)
    log.put(manifest_key(shop.version + 1), b'{"format": "castable-database", "format_version": 1}', if_none_match=True)
    before = snapshot_of(shop.store)
    with pytest.raises(CorruptObjectError, match="not a valid database version"):
        castable.open_database(shop.uri, storage_options=_options(shop))
    with pytest.raises(CorruptObjectError, match="not a valid database version"):
        shop.table("orders").append(events(10, 11))
    assert {k: v for k, v in snapshot_of(shop.store).items() if "manifest" in k} == {
        k: v for k, v in before.items() if "manifest" in k
    }


@pytest.mark.parametrize(
    "step",
    [
        "lines/segment/",  # a member's segment is written, the database version is not
        f"{LOG_PREFIX}/manifest/",  # the commit point itself
        "orders/manifest/",  # committed; the first member copy is not written
        "lines/manifest/",  # committed; one member copy is written, the other is not
        f"{LOG_PREFIX}/_latest_manifest",  # committed and copied; the database pointer lags
    ],
)
@pytest.mark.parametrize("when", ["crash-before", "crash-after"])
def test_a_writer_killed_at_any_step_leaves_no_half_transaction(shop: Database, step: str, when: str) -> None:
    before = shop.snapshot()
    crashing = Database.load(FaultyStore(shop.store, once("put", step, when)))
    with pytest.raises(SimulatedCrash), crashing.transaction() as tx:
        tx.table("lines").append(lines([10, 10]))
        tx.table("orders").append(events(10, 11))
    committed = step != "lines/segment/" and not (step == f"{LOG_PREFIX}/manifest/" and when == "crash-before")
    reader = castable.open_database(shop.uri, storage_options=_options(shop))
    snap = reader.snapshot()
    assert snap.version == before.version + committed
    assert (10 in ids(snap.table("orders"))) == committed
    assert (10 in order_ids(snap.table("lines"))) == committed, "both tables or neither"
    direct = castable.open_table(f"{shop.uri}/lines", storage_options=_options(shop))
    assert (10 in order_ids(direct)) == committed, "a member read on its own agrees"
    next_version = shop.table("orders").append(events(20, 21)).version
    assert next_version == 2 + committed
    for name in ("orders", "lines"):
        member = shop.store.child(name)
        numbers = sorted(int(i.key[-25:-5]) for i in member.list("manifest/"))
        assert numbers == list(range(len(numbers))), "every committed version has its member copy"
        assert read_pointer(member).version == 0, "a member's own pointer is not moved by commits"
    assert read_pointer(shop.store.child(LOG_PREFIX)).version == shop.refresh().version
    gc_report = shop.table("lines").gc(orphan_grace=timedelta(0))
    assert (10 in order_ids(shop.table("lines"))) == committed, f"gc kept the committed files: {gc_report}"


def test_a_handle_that_refreshed_past_an_unrolled_version_rolls_it_forward_before_committing(
    shop: Database,
) -> None:
    crashing = Database.load(FaultyStore(shop.store, once("put", "lines/manifest/", "crash-before")))
    with pytest.raises(SimulatedCrash), crashing.transaction() as tx:
        tx.table("lines").append(lines([10]))
    shop.refresh()
    shop.refresh()  # from the version in hand, which is past the lagging pointer
    lines_store = shop.store.child("lines")
    assert not lines_store.exists(manifest_key(2)), "the crashed writer's copy is missing"
    shop.table("orders").append(events(20, 21))
    assert lines_store.exists(manifest_key(2)), "rolled forward before the next commit"
    assert read_pointer(shop.store.child(LOG_PREFIX)).version == shop.version


def test_a_lost_response_on_the_commit_point_is_recognised(shop: Database) -> None:
    flaky = Database.load(FaultyStore(shop.store, once("put", f"{LOG_PREFIX}/manifest/", "lose-response")))
    with flaky.transaction(commit_id="lost") as tx:
        tx.table("orders").append(events(10, 11))
        tx.table("lines").append(lines([10]))
    assert tx.version == shop.refresh().version
    assert shop.committed_version("lost") == tx.version
    assert ids(shop.table("orders")).count(10) == 1


def test_a_member_copy_written_outside_the_database_is_reported(shop: Database) -> None:
    orders = shop.store.child("orders")
    forged = json.loads(orders.get(manifest_key(1)).data)
    forged["version"], forged["previous"] = 2, 1
    forged["database"]["version"] = 99
    orders.put(manifest_key(2), json.dumps(forged).encode(), if_none_match=True)
    assert shop.table("orders").append(events(10, 11)).version == 2, "committed: the log is the truth"
    assert ids(shop.refresh().table("orders")) == list(range(11)), "read from the log, not the forged copy"
    with pytest.raises(CorruptObjectError, match="written outside its database"):
        shop.table("orders").append(events(11, 12))


def test_erasure_across_tables_is_one_commit_and_complete(shop: Database) -> None:
    before = shop.version
    reports = shop.erase({"orders": "id = 4", "lines": "order_id = 4"}, purge=True, commit_id="gdpr-4")
    assert shop.version == before + 1
    assert shop.history(limit=1)[0].operation == "erase"
    assert reports["orders"].rows_erased == 1 and reports["lines"].rows_erased == 2
    for report in reports.values():
        assert report.purge is not None and report.purge.verified and report.purge.objects_deleted
    assert 4 not in ids(shop.table("orders")) and 4 not in order_ids(shop.table("lines"))
    again = shop.erase({"orders": "id = 4", "lines": "order_id = 4"}, commit_id="gdpr-4")
    assert shop.version == before + 1 and again["orders"].version == reports["orders"].version


def test_member_maintenance_keeps_the_database_readable(shop: Database) -> None:
    early = shop.version
    for i in range(10, 14):
        shop.table("orders").append(events(i, i + 1))
    orders = shop.table("orders")
    orders.compact(min_file_size=1 << 30)
    orders.expire(retain_versions=1)
    orders.gc(orphan_grace=timedelta(0))
    assert ids(shop.snapshot().table("orders")) == list(range(14))
    assert order_ids(shop.snapshot().table("lines")) == sorted(i for i in range(10) for _ in range(2))
    with pytest.raises(VersionNotFoundError, match="expired"):
        shop.snapshot(version=early).table("orders")
    assert order_ids(shop.snapshot(version=early).table("lines")), "the other table at that version still reads"


def _options(db: Database) -> dict | None:
    from castable.store import S3Store

    store = db.store
    if isinstance(store, FaultyStore):
        store = store.inner
    if isinstance(store, S3Store):
        return {"endpoint_url": str(store.client.meta.endpoint_url), "region": "us-east-1"}
    return None


def test_a_stale_handles_retry_answers_the_version_it_landed_as(shop: Database) -> None:
    stale = Database.load(shop.store).table("orders")
    landed = shop.table("orders").append(events(10, 11), commit_id="X").version
    shop.table("orders").append(events(11, 12))
    assert stale.append(events(10, 11), commit_id="X").version == landed
    assert ids(shop.table("orders")).count(10) == 1


def test_a_retry_is_recognised_by_the_tables_own_history_after_the_databases_forgot_it(
    shop: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from castable.commit import dblog

    monkeypatch.setattr(dblog, "COMMIT_RETENTION", 3)  # stands for 1,000 commits to other tables
    monkeypatch.setattr(dblog, "INLINE_COMMITS", 2)
    stale = Database.load(shop.store).table("orders")
    shop.table("orders").append(events(10, 11), commit_id="X")
    for i in range(5):
        shop.table("lines").append(lines([100 + i]))
    assert shop.refresh().committed_version("X") is None, "the database's recent commits no longer hold X"
    stale.append(events(10, 11), commit_id="X")
    assert ids(shop.table("orders")).count(10) == 1


def test_an_aborted_or_failed_transactions_handles_read_its_snapshot_again(shop: Database) -> None:
    tx = shop.transaction().begin()
    orders = tx.table("orders")
    orders.append(events(10, 13))
    assert orders.count() == 13
    tx.abort()
    assert orders.count() == 10 and orders.refresh().count() == 10
    committed = shop.transaction().begin()
    handle = committed.table("orders")
    handle.append(events(20, 21))
    shop.table("orders").append(events(30, 31))  # the commit rebases over this
    committed.commit()
    assert handle.version == shop.table("orders").version and 30 in ids(handle), "the handle reads the commit"


def test_expiry_during_an_unrolled_commit_keeps_the_member_pointer_on_a_written_copy(
    shop: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from castable.commit import dblog
    from castable.store import StoreError

    maintained = Database.load(shop.store).table("orders")
    real_copy = dblog._copy

    def failing(*args: object) -> None:
        raise StoreError("lost before the copy")

    original = DatabaseLog.before_maintenance

    def commit_meanwhile(self: DatabaseLog, table: castable.Table) -> object:
        found = original(self, table)
        monkeypatch.setattr(dblog, "_copy", failing)
        shop.table("orders").append(events(99, 100))  # lands, its copy is not written
        monkeypatch.setattr(dblog, "_copy", real_copy)
        return found

    monkeypatch.setattr(DatabaseLog, "before_maintenance", commit_meanwhile)
    maintained.expire(retain_versions=1)
    monkeypatch.setattr(DatabaseLog, "before_maintenance", original)
    member = shop.store.child("orders")
    assert member.exists(manifest_key(read_pointer(member).version)), "the pointer names a version with a copy"
    direct = castable.open_table(f"{shop.uri}/orders", storage_options=_options(shop))
    assert direct.damage is None and 99 in ids(direct)
    direct.gc(orphan_grace=timedelta(0))
    assert 99 in ids(shop.refresh().table("orders")), "gc rolled the commit forward first and kept its file"


def test_an_old_snapshot_of_an_expired_table_version_says_so(shop: Database) -> None:
    orders = shop.table("orders")
    orders.append(events(10, 11))
    old = shop.version
    orders.append(events(11, 12))
    orders.compact(min_file_size=1 << 30)
    orders.expire(retain_versions=1)
    orders.gc(orphan_grace=timedelta(0))
    with pytest.raises(VersionNotFoundError, match="expired"):
        shop.snapshot(version=old).table("orders")


def test_a_dropped_table_leaves_the_database_in_one_version_with_its_files(shop: Database) -> None:
    before = shop.version
    version = shop.drop_table("lines", commit_id="drop-lines")
    assert version == before + 1 == shop.version and shop.tables() == ["orders"]
    entry = shop.history(limit=1)[0]
    assert (entry.operation, entry.commit_id, entry.tables) == (
        "drop_table",
        "drop-lines",
        {"lines": {"operation": "drop_table"}},
    )
    assert list(shop.store.child("lines").list()) == [], "its files went with it"
    with pytest.raises(TableNotFoundError):
        shop.table("lines")
    with pytest.raises(VersionNotFoundError, match="dropped since"):
        shop.snapshot(before).table("lines")
    assert ids(shop.snapshot(before).table("orders")) == list(range(10)), "the other tables read on"
    assert shop.drop_table("lines", commit_id="drop-lines") == version, "a repeat lands once"
    with pytest.raises(TableNotFoundError, match="no table 'lines'"):
        shop.drop_table("lines")
    with pytest.raises(InvalidInputError):
        shop.drop_table("../orders")
    assert shop.version == version and ids(shop.table("orders")) == list(range(10))

    shop.create_table("lines", LINES).append(lines([1]))  # the name is free again
    assert order_ids(shop.table("lines")) == [1]
    with pytest.raises(VersionNotFoundError, match="dropped since"):
        shop.snapshot(before).table("lines")  # the old table's version, not the new table's


def test_a_commit_to_a_dropped_table_conflicts_and_lands_nothing(shop: Database) -> None:
    tx = shop.transaction().begin()
    tx.table("lines").append(lines([99]))
    tx.table("orders").append(events(10, 11))
    stale = shop.table("lines")
    Database.load(shop.store).drop_table("lines")
    with pytest.raises(CommitConflictError, match="lines"):
        tx.commit()
    with pytest.raises(CommitConflictError, match="lines"):
        stale.append(lines([98]))
    assert ids(shop.refresh().table("orders")) == list(range(10)), "nothing of the transaction landed"
    assert shop.tables() == ["orders"]


@pytest.mark.parametrize("step", ["list", "delete"])
def test_a_drop_stopped_before_its_files_went_is_finished_by_its_repeat(shop: Database, step: str) -> None:
    key = "lines/" if step == "list" else f"lines/{manifest_key(0)}"
    crashing = Database.load(FaultyStore(shop.store, once(step, key, "crash-before")))
    with pytest.raises(SimulatedCrash):
        crashing.drop_table("lines", commit_id="drop")
    assert shop.refresh().tables() == ["orders"], "the drop committed"
    assert shop.store.child("lines").exists(manifest_key(0)), "its first manifest still names it"
    with pytest.raises(TableAlreadyExistsError):
        shop.create_table("lines", LINES)
    version = shop.version
    assert shop.drop_table("lines", commit_id="drop") == version
    assert list(shop.store.child("lines").list()) == []
    shop.create_table("lines", LINES)


def test_a_drop_repeated_after_its_name_was_taken_again_leaves_the_new_table(shop: Database) -> None:
    version = shop.drop_table("lines", commit_id="drop")
    shop.create_table("lines", LINES).append(lines([1]))
    assert shop.drop_table("lines", commit_id="drop") == version
    assert order_ids(shop.table("lines")) == [1]
