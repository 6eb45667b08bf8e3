"""The isolation transactions promise, checked the way Jepsen checks databases: histories of
transactions from several processes with the defaults a user gets, on the local store, moto over
HTTP and LocalStack (the bank), read by an anomaly checker (``helpers/isolation.py``) that is itself
tested first.

- Snapshot isolation (the default): no lost update, no read skew, no aborted read; write skew
  is possible, and a test shows it.
- Serializable: none of those, and no write skew either.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from helpers.isolation import INITIAL, Txn, anomalies
from helpers.tables import snapshot_of
from helpers.workers import ACCOUNTS, BALANCE, account

import castable
from castable import CommitConflictError
from castable.database import Database

BANK = pa.schema([("id", pa.int64()), ("balance", pa.int64()), ("stamp", pa.string())])


def bank_database(uri: str, options: dict | None) -> Database:
    db = castable.create_database(uri, storage_options=options)
    for name in ("a", "b"):
        ids = [i for i in range(ACCOUNTS) if account(i)[0] == name]
        db.create_table(name, BANK, primary_key="id").append(
            pa.table({"id": ids, "balance": [BALANCE] * len(ids), "stamp": [INITIAL] * len(ids)}, schema=BANK)
        )
    return db


def bank_balances(db: Database, version: int) -> dict[int, int]:
    snap = db.snapshot(version=version)
    rows = [r for name in ("a", "b") for r in snap.table(name).scan().to_arrow().to_pylist()]
    return {r["id"]: r["balance"] for r in rows}


# ------------------------------------------------------------------ the checker itself


def test_the_checker_finds_a_lost_update() -> None:
    history = [
        Txn("t1", 0, {"x": INITIAL}, {"x"}, committed=1),
        Txn("t2", 0, {"x": INITIAL}, {"x"}, committed=2),
    ]
    found = anomalies(history)
    assert found["lost-update"] and not found["G2"] and not found["read-skew"]


def test_the_checker_finds_write_skew_as_g2_only() -> None:
    history = [
        Txn("t1", 0, {"x": INITIAL, "y": INITIAL}, {"x"}, committed=1),
        Txn("t2", 0, {"x": INITIAL, "y": INITIAL}, {"y"}, committed=2),
    ]
    found = anomalies(history)
    assert found["G2"] and not any(found[k] for k in ("lost-update", "read-skew", "G-single", "G1c", "G1a"))


def test_the_checker_finds_read_skew_and_aborted_reads() -> None:
    history = [
        Txn("w", 0, {}, {"x", "y"}, committed=1),
        Txn("r", 1, {"x": "w", "y": INITIAL}, set(), committed=None),  # half of w's commit
        Txn("a", 1, {}, {"z"}, committed=None),
        Txn("d", 1, {"z": "a"}, set(), committed=None),
    ]
    found = anomalies(history)
    assert found["read-skew"] and found["G1a"]


def test_the_checker_passes_a_serial_history() -> None:
    history = [
        Txn("t1", 0, {"x": INITIAL}, {"x"}, committed=1),
        Txn("t2", 1, {"x": "t1", "y": INITIAL}, {"y", "x"}, committed=2),
        Txn("t3", 2, {"x": "t2", "y": "t2"}, set(), committed=None),
    ]
    assert not any(anomalies(history).values())


# ----------------------------------------------------------- deterministic interleavings


def test_write_skew_is_possible_under_snapshot_isolation_and_refused_when_serializable(tmp_path: Path) -> None:
    """Two transactions each read both accounts and withdraw their total from a different one:
    under snapshot isolation both commit (the documented anomaly); serializable refuses one."""
    outcomes = {}
    for isolation in ("snapshot", "serializable"):
        db = bank_database(str(tmp_path / isolation), None)
        first = db.transaction(f"{isolation}-1", isolation=isolation).begin()  # type: ignore[arg-type]
        second = db.transaction(f"{isolation}-2", isolation=isolation).begin()  # type: ignore[arg-type]
        for tx, (name, key) in ((first, account(1)), (second, account(11))):
            total = sum(
                tx.table(t).scan(["balance"], f"id = {k}").to_arrow()["balance"][0].as_py()
                for t, k in (account(1), account(11))
            )
            tx.table(name).update({"balance": f"balance - {total}"}, where=f"id = {key}")
        first.commit()
        before = snapshot_of(db.store)
        try:
            second.commit()
            outcomes[isolation] = "committed"
        except CommitConflictError as e:
            assert "read rows" in str(e) and "(id 1)" in str(e)
            assert snapshot_of(db.store) == before, "the refused transaction wrote nothing"
            outcomes[isolation] = "refused"
        balances = bank_balances(db.refresh(), db.version)
        kept = balances[1] + balances[11] >= 0  # the constraint each transaction checked on its own
        assert kept == (outcomes[isolation] == "refused")
    assert outcomes == {"snapshot": "committed", "serializable": "refused"}


def test_a_serializable_read_only_transaction_is_refused_in_the_read_only_anomaly(tmp_path: Path) -> None:
    """Fekete, O'Neil and O'Neil's read-only anomaly (2004): ``receipt`` reads the batch number x
    and adds to that batch's total y; ``close`` reads x and moves it on, committing first; ``report``
    begins after that, reads the new x and the old batch's total, and only then does ``receipt``
    commit. The two writers (snapshot isolation) alone are serializable (receipt, then close), but a
    report that saw close and not receipt fits no serial order: a G2 cycle with a transaction that
    wrote nothing. As serializable, the read-only report is refused; under snapshot isolation it
    ends, and the checker finds the cycle it completes."""
    x, y = account(1), account(11)

    def read(tx: castable.Transaction, cell: tuple[str, int]) -> str:
        return str(tx.table(cell[0]).scan(["stamp"], f"id = {cell[1]}").to_arrow()["stamp"][0].as_py())

    def write(tx: castable.Transaction, cell: tuple[str, int]) -> None:
        row = {"id": [cell[1]], "balance": [1], "stamp": [tx.commit_id]}
        tx.table(cell[0]).upsert(pa.table(row, schema=BANK))

    outcomes = {}
    for isolation in ("snapshot", "serializable"):
        db = bank_database(str(tmp_path / isolation), None)
        receipt, close = db.transaction("receipt").begin(), db.transaction("close").begin()
        history = [Txn(t.commit_id, t.snapshot_version, {"x": read(t, x)}) for t in (receipt, close)]
        write(close, x)
        history[1].writes, history[1].committed = {"x"}, close.commit()
        report = db.transaction("report", isolation=isolation).begin()  # type: ignore[arg-type]
        seen = Txn("report", report.snapshot_version, {"x": read(report, x), "y": read(report, y)})
        write(receipt, y)
        history[0].writes, history[0].committed = {"y"}, receipt.commit()
        version = db.refresh().version
        try:
            seen.committed = report.commit()
            outcomes[isolation] = "ended"
        except CommitConflictError as e:
            assert "read rows" in str(e) and f"(id {y[1]})" in str(e)
            outcomes[isolation] = "refused"
        assert db.refresh().version == version, "the report commits no version either way"
        assert not any(anomalies(history).values()), "the writers alone are serializable"
        assert bool(anomalies([*history, seen])["G2"]) == (outcomes[isolation] == "ended")
    assert outcomes == {"snapshot": "ended", "serializable": "refused"}


def test_a_lost_update_is_refused_with_the_table_and_key(tmp_path: Path) -> None:
    db = bank_database(str(tmp_path / "bank"), None)
    txs = [db.transaction(isolation="snapshot").begin() for _ in range(2)]
    for tx, delta in zip(txs, (-3, -5), strict=True):
        [row] = tx.table("a").scan(filter="id = 4").to_arrow().to_pylist()
        tx.table("a").upsert(pa.table({"id": [4], "balance": [row["balance"] + delta], "stamp": ["x"]}, schema=BANK))
    txs[0].commit()
    before = snapshot_of(db.store)
    with pytest.raises(CommitConflictError, match=r"table 'a'.*upsert wrote rows.*\(id 4\)"):
        txs[1].commit()
    assert snapshot_of(db.store) == before
    assert bank_balances(db.refresh(), db.version)[4] == BALANCE - 3


def test_a_compaction_meanwhile_is_no_conflict(tmp_path: Path) -> None:
    """Rows are compared by value: a commit that only moved them into other files changes nothing
    a transaction read or wrote."""
    db = bank_database(str(tmp_path / "bank"), None)
    db.table("a").append(pa.table({"id": [100], "balance": [0], "stamp": [INITIAL]}, schema=BANK))
    tx = db.transaction(isolation="serializable").begin()
    [row] = tx.table("a").scan(filter="id = 4").to_arrow().to_pylist()
    tx.table("a").upsert(pa.table({"id": [4], "balance": [row["balance"] - 1], "stamp": ["c"]}, schema=BANK))
    assert len(db.table("a").compact(min_file_size=1 << 30).files_rewritten) >= 2
    tx.commit()
    assert bank_balances(db.refresh(), db.version)[4] == BALANCE - 1


def test_run_retries_a_refused_transaction_on_a_fresh_snapshot(tmp_path: Path) -> None:
    db = bank_database(str(tmp_path / "bank"), None)
    other = castable.open_database(db.uri)
    calls = []

    def withdraw(tx: castable.Transaction) -> int:
        [row] = tx.table("a").scan(filter="id = 4").to_arrow().to_pylist()
        calls.append(row["balance"])
        if len(calls) == 1:  # another process commits between this read and the commit
            with other.refresh().transaction() as meddler:
                meddler.table("a").update({"balance": "balance + 50"}, where="id = 4")
        tx.table("a").upsert(pa.table({"id": [4], "balance": [row["balance"] - 10], "stamp": ["r"]}, schema=BANK))
        return row["balance"] - 10

    assert db.run(withdraw, commit_id="withdraw-1") == BALANCE + 40
    assert calls == [BALANCE, BALANCE + 50]
    assert bank_balances(db.refresh(), db.version)[4] == BALANCE + 40
    landed = db.version
    db.run(withdraw, commit_id="withdraw-1")  # the same id again: it landed, so nothing is committed
    assert db.refresh().version == landed and db.committed_version("withdraw-1") == landed


def test_an_unknown_isolation_level_is_refused(tmp_path: Path) -> None:
    db = bank_database(str(tmp_path / "bank"), None)
    for call in (db.transaction, lambda **kw: db.run(lambda tx: None, **kw)):
        with pytest.raises(castable.InvalidInputError, match="isolation must be one of"):
            call(isolation="repeatable-read")


# ------------------------------------------------------------------ several processes


@pytest.mark.parametrize("landed", [True, False])
def test_run_reads_the_log_after_an_unknown_outcome_before_running_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, landed: bool
) -> None:
    """A commit whose outcome is unknown is looked up by its commit id: one that landed is not
    run again; one that did not is run again, and lands once."""
    db = bank_database(str(tmp_path / "bank"), None)
    start = db.version
    calls: list[int] = []
    real_commit = castable.Transaction.commit

    def unknown_once(tx: castable.Transaction) -> int:
        if len(calls) == 1:
            if landed:
                real_commit(tx)
            raise castable.CommitStateUnknownError("the response was lost", tx.commit_id)
        return real_commit(tx)

    def deposit(tx: castable.Transaction) -> None:
        calls.append(tx.snapshot_version)
        [row] = tx.table("a").scan(filter="id = 4").to_arrow().to_pylist()
        tx.table("a").upsert(pa.table({"id": [4], "balance": [row["balance"] + 1], "stamp": ["u"]}, schema=BANK))

    monkeypatch.setattr(castable.Transaction, "commit", unknown_once)
    db.run(deposit, commit_id="deposit-1")
    assert len(calls) == (1 if landed else 2)
    assert db.refresh().version == start + 1 and db.committed_version("deposit-1") == start + 1
    assert bank_balances(db, db.version)[4] == BALANCE + 1, "deposited exactly once"


@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
def test_update_and_delete_in_a_transaction_are_refused_when_a_row_they_replace_changed(
    tmp_path: Path, isolation: str
) -> None:
    """By row: an update or a delete whose rows another commit changed since the snapshot is
    refused (outside a transaction the same update would be re-planned on the newer row)."""
    db = bank_database(str(tmp_path / "bank"), None)
    for write in ("update", "delete"):
        tx = db.refresh().transaction(isolation=isolation).begin()  # type: ignore[arg-type]
        if write == "update":
            tx.table("a").update({"balance": "balance - 1"}, where="id = 4")
        else:
            tx.table("a").delete("id = 4")
        db.table("a").update({"balance": "balance + 10"}, where="id = 4")  # committed meanwhile
        before = snapshot_of(db.store)
        with pytest.raises(CommitConflictError, match=rf"table 'a'.*{write} replaced rows.*\(id 4\)"):
            tx.commit()
        assert snapshot_of(db.store) == before


def test_a_serializable_update_is_refused_when_a_matching_row_was_added(tmp_path: Path) -> None:
    """Under snapshot isolation a row added meanwhile is no conflict for an update; serializable
    also judges what the update selected, so it is."""
    outcomes = {}
    for isolation in ("snapshot", "serializable"):
        db = bank_database(str(tmp_path / isolation), None)
        tx = db.transaction(isolation=isolation).begin()  # type: ignore[arg-type]
        tx.table("a").update({"stamp": "'big'"}, where="balance >= 100")
        db.table("a").append(pa.table({"id": [50], "balance": [500], "stamp": [INITIAL]}, schema=BANK))
        try:
            tx.commit()
            outcomes[isolation] = "committed"
        except CommitConflictError as e:
            assert "update read rows" in str(e) and "(id 50)" in str(e)
            outcomes[isolation] = "refused"
    assert outcomes == {"snapshot": "committed", "serializable": "refused"}
