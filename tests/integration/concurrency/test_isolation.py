"""The isolation transactions promise, checked the way Jepsen checks databases: histories of
transactions from several processes with the defaults a user gets, on the local store, moto over
HTTP and LocalStack (the bank), read by an anomaly checker (``helpers/isolation.py``) that is itself
tested first.

- Snapshot isolation (the default): no lost update, no read skew, no aborted read; write skew
  is possible, and a test shows it.
- Serializable: none of those, and no write skew either.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/commit/test_isolation.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from helpers.isolation import INITIAL, Txn, anomalies
from helpers.processes import process_pool
from helpers.s3servers import new_bucket
from helpers.workers import ACCOUNTS, BALANCE, REGISTERS, read_totals, registers, transfer
from unit.commit.test_isolation import BANK, bank_balances, bank_database

import castable

WRITERS = 4

TRANSFERS = 12


def _location(request: pytest.FixtureRequest, tmp_path: Path, where: str) -> tuple[str, dict[str, str] | None]:
    """A fresh database location on the local store, moto over HTTP, or LocalStack."""
    if where == "local":
        return str(tmp_path / "bank"), None
    endpoint = request.getfixturevalue("s3_endpoint" if where == "moto" else "localstack_endpoint")
    return f"s3://{new_bucket(endpoint)}/dbs/bank", {"endpoint_url": endpoint, "region": "us-east-1"}


def _txns(records: list[dict]) -> list[Txn]:
    return [Txn(r["id"], r["snapshot"], dict(r["reads"]), set(r["writes"]), r["committed"]) for r in records]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("where", "style"),
    [
        ("local", "upsert"),
        ("moto", "upsert"),
        pytest.param("localstack", "upsert", marks=pytest.mark.xdist_group("localstack")),
        ("local", "update"),
        ("moto", "run"),
    ],
)
def test_bank_totals_hold_in_every_snapshot(
    request: pytest.FixtureRequest, tmp_path: Path, where: str, style: str
) -> None:
    """4 processes transfer money (12 transfers each, read then upsert, SQL update, or through
    ``db.run``) while a fifth sums every snapshot. Every retained version holds the initial total;
    the final balances are exactly the initial ones plus the committed transfers; refused
    transfers changed nothing; the history has no anomaly."""
    uri, options = _location(request, tmp_path, where)
    db = bank_database(uri, options)
    start = db.version
    with process_pool(WRITERS + 1) as pool:
        reader = pool.submit(read_totals, uri, options, 5.0)
        writers = [pool.submit(transfer, uri, options, w, TRANSFERS, style, "snapshot") for w in range(WRITERS)]
        records = [r for f in writers for r in f.result(timeout=900)]
        seen = reader.result(timeout=900)
    committed = [r for r in records if r["committed"] is not None]
    refused = [r for r in records if r["committed"] is None]
    assert len(records) == WRITERS * TRANSFERS and committed
    assert all("nothing was committed" in r["error"] for r in refused)
    if style == "run":
        assert not refused, "db.run retries every refusal"
    assert all(s["total"] == ACCOUNTS * BALANCE for s in seen), [s["total"] for s in seen]
    db.refresh()
    for version in range(start, db.version + 1):
        assert sum(bank_balances(db, version).values()) == ACCOUNTS * BALANCE, f"version {version}"
    expected = dict.fromkeys(range(ACCOUNTS), BALANCE)
    for r in committed:
        for i, delta in r["moves"].items():
            expected[int(i)] += delta
    assert bank_balances(db, db.version) == expected, "every committed transfer, and nothing else"
    assert len({r["committed"] for r in committed}) == len(committed)
    history = _txns(records) + [Txn(f"reader-{n}", s["version"], s["reads"], set()) for n, s in enumerate(seen)]
    found = anomalies(history)
    assert not any(found.values()), found


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
@pytest.mark.parametrize("where", ["local", "moto"])  # LocalStack runs the bank above
def test_register_histories_show_only_what_the_isolation_level_allows(
    request: pytest.FixtureRequest, tmp_path: Path, where: str, isolation: str
) -> None:
    """4 processes run 15 transactions each over 8 keys of two tables (reads of 2-3 keys, writes of
    0-2: a third only read); the checker finds no anomaly the level forbids."""
    uri, options = _location(request, tmp_path, where)
    db = castable.create_database(uri, storage_options=options)
    for name in ("a", "b"):
        keys = list(range(REGISTERS))
        db.create_table(name, BANK, primary_key="id").append(
            pa.table({"id": keys, "balance": [0] * REGISTERS, "stamp": [INITIAL] * REGISTERS}, schema=BANK)
        )
    with process_pool(WRITERS) as pool:
        futures = [pool.submit(registers, uri, options, w, 15, isolation) for w in range(WRITERS)]
        records = [r for f in futures for r in f.result(timeout=900)]
    committed = [r for r in records if r["committed"] is not None]
    assert committed and len(committed) < len(records), "the workload contends"
    found = anomalies(_txns(records))
    forbidden = [k for k in found if isolation == "serializable" or k != "G2"]
    assert not any(found[k] for k in forbidden), {k: found[k][:3] for k in forbidden}
