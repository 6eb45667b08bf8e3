"""Several processes write over a lossy network, with the settings a user gets (issue 49).

In every worker, 15% of write answers are lost after S3 applied the write (botocore sends it
again), 5% of requests are answered 503 SlowDown, 5% of GETs break mid-body and 1% of answers
come half a second late (``helpers.lossy``). Every acknowledged write lands exactly once, every unacknowledged one at
most once, and every invariant holds at every retained version.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pyarrow as pa
import pytest
from helpers.isolation import INITIAL, Txn, anomalies
from helpers.lossy import Faults, run_lossy
from helpers.s3servers import new_bucket
from helpers.tables import EVENTS
from helpers.workers import (
    ACCOUNTS,
    BALANCE,
    ERASABLE,
    LEDGER,
    UPSERT_KEYS,
    account,
    append_with_commit_ids,
    compact_and_erase,
    post_to_ledger,
    transfer,
    upsert_overlapping,
)

import castable

pytestmark = pytest.mark.slow

WORKERS = 4
LOSSY = Faults(lose=0.15, slow_down=0.05, reset_body=0.05, slow=0.01)
LOSSIER = Faults(lose=0.3, slow_down=0.05, reset_body=0.05, slow=0.01)
"""For a process of few writes whose lost answers the test counts on: a compaction and erase
makes about 15 writes, which at 15% lose none about one run in eleven."""
BANK = pa.schema([("id", pa.int64()), ("balance", pa.int64()), ("stamp", pa.string())])
LEDGER_ROWS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.int64())])


def _location(s3_endpoint: str, name: str) -> tuple[str, dict[str, str]]:
    return f"s3://{new_bucket(s3_endpoint)}/{name}", {"endpoint_url": s3_endpoint, "region": "us-east-1"}


def _in_workers(fn: Any, *args: Any) -> tuple[list[Any], Counter[str]]:
    """``fn(*args, worker, ...)`` in ``WORKERS`` spawned processes over the lossy network; return
    their results and the faults injected in all of them."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(WORKERS, mp_context=ctx) as pool:
        futures = [pool.submit(run_lossy, LOSSY, fn, *args[:2], w, *args[2:]) for w in range(WORKERS)]
        done = [f.result(timeout=900) for f in futures]
    injected: Counter[str] = Counter()
    for _, counts in done:
        injected.update(counts)
    assert all(injected[kind] for kind in ("lose", "slow_down", "reset_body", "slow")), injected
    return [result for result, _ in done], injected


def test_appends_with_commit_ids_land_exactly_once(s3_endpoint: str) -> None:
    uri, options = _location(s3_endpoint, "appends")
    table = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    start = table.version
    results, _ = _in_workers(append_with_commit_ids, uri, options, 12)
    records = [r for worker in results for r in worker]
    first_try = [r for r in records if not r["errors"]]
    assert all(r["version"] is not None for r in records), [r for r in records if r["version"] is None]
    assert len(first_try) >= 0.99 * len(records), [r["errors"] for r in records if r["errors"]]
    table.refresh()
    history = {h.commit_id: h.version for h in table.history()}
    assert all(history[r["commit_id"]] == r["version"] for r in records), "acknowledged as the version it is"
    ids = table.scan(["id"]).to_arrow()["id"].to_pylist()
    expected = [i for r in records for i in range(*r["ids"])]
    assert sorted(ids) == sorted(expected), "every row exactly once"
    assert table.version == start + len(records), "one version per commit, none twice"


@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
def test_the_bank_holds_its_total_through_db_run(s3_endpoint: str, isolation: str) -> None:
    uri, options = _location(s3_endpoint, "bank")
    db = castable.create_database(uri, storage_options=options)
    for name in ("a", "b"):
        ids = [i for i in range(ACCOUNTS) if account(i)[0] == name]
        rows = {"id": ids, "balance": [BALANCE] * len(ids), "stamp": [INITIAL] * len(ids)}
        db.create_table(name, BANK, primary_key="id").append(pa.table(rows, schema=BANK))
    start = db.version
    results, _ = _in_workers(transfer, uri, options, 8, "run", isolation)
    records = [r for worker in results for r in worker]
    assert all(r["committed"] is not None for r in records), "db.run finishes every transfer"
    assert len({r["committed"] for r in records}) == len(records), "each once"
    db.refresh()
    assert db.version == start + len(records)
    expected = dict.fromkeys(range(ACCOUNTS), BALANCE)
    for r in records:
        for i, delta in r["moves"].items():
            expected[int(i)] += delta
    for version in range(start, db.version + 1):
        snap = db.snapshot(version=version)
        balances = {r["id"]: r["balance"] for n in ("a", "b") for r in snap.table(n).scan().to_arrow().to_pylist()}
        assert sum(balances.values()) == ACCOUNTS * BALANCE, f"version {version}"
    assert balances == expected
    found = anomalies([Txn(r["id"], r["snapshot"], r["reads"], set(r["writes"]), r["committed"]) for r in records])
    forbidden = [k for k in found if isolation == "serializable" or k != "G2"]
    assert not any(found[k] for k in forbidden), {k: found[k][:3] for k in forbidden}


def test_a_ledger_equals_its_balance_at_every_version(s3_endpoint: str) -> None:
    uri, options = _location(s3_endpoint, "ledger")
    db = castable.create_database(uri, storage_options=options)
    db.create_table("balances", BANK, primary_key="id").append(
        pa.table({"id": [LEDGER], "balance": [0], "stamp": [INITIAL]}, schema=BANK)
    )
    db.create_table("ledger", LEDGER_ROWS, primary_key="id")
    start = db.version
    results, _ = _in_workers(post_to_ledger, uri, options, 12)
    entries = [e for worker in results for e in worker]
    assert all(e["version"] is not None for e in entries)
    db.refresh()
    assert db.version == start + len(entries), "one database version per entry, none twice"
    for version in range(start, db.version + 1):
        snap = db.snapshot(version=version)
        [balance] = snap.table("balances").scan().to_arrow()["balance"].to_pylist()
        ledger = snap.table("ledger").scan().to_arrow()
        assert len(set(ledger["id"].to_pylist())) == ledger.num_rows
        assert balance == sum(ledger["amount"].to_pylist()), f"version {version}"
    assert sorted(ledger["id"].to_pylist()) == sorted(e["entry"] for e in entries)


def test_racing_upserts_keep_one_row_per_key_through_compaction_and_erase(s3_endpoint: str) -> None:
    """4 processes upsert overlapping keys while a fifth compacts and erases, all over the lossy
    network: every key keeps exactly the row of the last upsert that named it, erased keys stay
    gone, and each commit is one version."""
    uri, options = _location(s3_endpoint, "upserts")
    table = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    initial = [*range(UPSERT_KEYS), *ERASABLE]
    table.append(pa.table({"id": initial, "category": ["init"] * len(initial), "value": [-1.0] * len(initial)}))
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(WORKERS + 1, mp_context=ctx) as pool, ctx.Manager() as manager:
        rounds_begin = manager.Barrier(WORKERS)
        upserts = [
            pool.submit(run_lossy, LOSSY, upsert_overlapping, uri, options, w, 6, rounds_begin) for w in range(WORKERS)
        ]
        maintenance = pool.submit(run_lossy, LOSSIER, compact_and_erase, uri, options, 4)
        commits = [c for f in upserts for c in f.result(timeout=900)[0]]
        erased, injected = maintenance.result(timeout=900)
    assert injected["lose"], "the maintenance's own writes lost answers too"
    last: dict[int, float] = {}
    for _, keys, value in sorted(commits):
        last.update(dict.fromkeys(keys, value))
    table.refresh()
    rows = table.scan().to_arrow().to_pylist()
    got = {r["id"]: r["value"] for r in rows}
    assert len(rows) == len(got), "one live row per key"
    assert {k: got[k] for k in range(UPSERT_KEYS)} == {k: last.get(k, -1.0) for k in range(UPSERT_KEYS)}
    assert set(got) == set(initial) - set(erased)
    assert len({v for v, _, _ in commits}) == len(commits), "each upsert its own version"
