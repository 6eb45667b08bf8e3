"""Multi-table transactions: what one commit point for several tables costs, in one run.

1. Commit latency, taking turns round by round so the machine's noise falls on every case alike:
   a one-row append to a table of its own (the baseline), the same append to a table of a
   database, and a transaction appending one row to each of 1, 2 and 10 tables of a database.
   Requests per commit are counted. On the local store and on a moto S3 server over HTTP.
2. Throughput of concurrent writers on disjoint tables: W processes each append one-row batches
   to their own table, either W tables of their own (W logs, no contention) or W tables of one
   database (one log). Every commit must land; rows and versions are verified.
3. Read-then-write transfers under contention: P processes each make transfers between two
   random accounts of a bank split over two tables, each a transaction that reads both balances
   and upserts the new ones, run through ``db.run`` (which runs a refused transaction again), at
   both isolation levels, on 20 accounts (heavy contention) and 1,000 (little). Committed
   transactions/s and refused attempts; the bank's total is verified after every run.

Usage: python -m bench database [--rounds 30] [--writers 2 4] [--commits 60]
       [--processes 4 8] [--transfers 15] [--quick] [--out DIR]
Writes DIR/database.md (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

import castable
from bench.common.benchlib import RESULTS, fmt_s, moto_server, publish, report_header

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.int32())])
BUCKET = "bench"
STARTED = time.perf_counter()


def log(message: str) -> None:
    print(f"[{time.perf_counter() - STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


def one_row(row_id: int, writer: int = 0) -> pa.Table:
    return pa.table({"id": [row_id], "writer": [writer]}, schema=SCHEMA)


# ------------------------------------------------------------------------------------ latency


def latency_cases(
    root: str, options: dict[str, str] | None
) -> tuple[dict[str, Callable[[int], object]], castable.Table, castable.Database]:
    """The commits to time, each taking a fresh row id, and the handles whose stores count requests."""
    alone = castable.create_table(f"{root}/alone", SCHEMA, primary_key="id", storage_options=options)
    db = castable.create_database(f"{root}/db", storage_options=options)
    names = [f"t{i}" for i in range(10)]
    for name in names:
        db.create_table(name, SCHEMA, primary_key="id")
    member = db.table("t0")

    def transaction(tables: list[str]) -> Callable[[int], object]:
        def run(row_id: int) -> object:
            with db.transaction() as tx:
                for name in tables:
                    tx.table(name).append(one_row(row_id))
            return tx.version

        return run

    cases = {
        "table of its own: append": lambda i: alone.append(one_row(i)),
        "database member: append": lambda i: member.append(one_row(i)),
        "transaction over 1 table": transaction(names[:1]),
        "transaction over 2 tables": transaction(names[:2]),
        "transaction over 10 tables": transaction(names),
    }
    return cases, alone, db


def measure_latency(root: str, options: dict[str, str] | None, rounds: int) -> dict[str, tuple[float, float]]:
    """Median seconds and requests per commit of each case, the cases taking turns each round."""
    cases, alone, db = latency_cases(root, options)
    store, db_store = alone.store, db.store
    times: dict[str, list[float]] = {name: [] for name in cases}
    requests: dict[str, list[int]] = {name: [] for name in cases}
    for r in range(rounds + 1):
        for n, (name, run) in enumerate(cases.items()):
            counted = store if name.startswith("table of its own") else db_store
            counted.stats.reset()
            t0 = time.perf_counter()
            run(1_000_000 * n + r)
            elapsed = time.perf_counter() - t0
            if r:  # the first round warms up (imports, the store probe)
                times[name].append(elapsed)
                stats = counted.stats.snapshot()
                requests[name].append(sum(v for k, v in stats.items() if not k.startswith("bytes")))
    return {name: (statistics.median(times[name]), statistics.median(requests[name])) for name in cases}


# ------------------------------------------------------------------------------------ throughput


def writer(
    uri: str, options: dict[str, str] | None, table: str | None, w: int, commits: int, start: Any
) -> tuple[float, float, int]:
    """Append ``commits`` one-row batches to table ``table`` of the database at ``uri`` (or to the
    table at ``uri`` when ``table`` is None); return (start, end, failures)."""
    if table is None:
        target = castable.open_table(uri, storage_options=options)
    else:
        target = castable.open_database(uri, storage_options=options).table(table)
    start.wait()
    t0, failures = time.monotonic(), 0
    for i in range(commits):
        try:
            target.append(one_row(w * 100_000 + i, w))
        except castable.CastableError:
            failures += 1
    return t0, time.monotonic(), failures


def measure_throughput(
    root: str, options: dict[str, str] | None, writers: int, commits: int, layout: str
) -> tuple[float, int, bool]:
    """Commits/s of ``writers`` processes on disjoint tables, failures, and whether verified."""
    uris: list[tuple[str, str | None]]
    if layout == "tables":
        uris = [(f"{root}/w{w}", None) for w in range(writers)]
        for uri, _ in uris:
            castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options)
    else:
        db = castable.create_database(f"{root}/db", storage_options=options)
        for w in range(writers):
            db.create_table(f"w{w}", SCHEMA, primary_key="id")
        uris = [(f"{root}/db", f"w{w}") for w in range(writers)]
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        start = manager.Barrier(writers)
        with ctx.Pool(writers) as pool:
            results = pool.starmap(
                writer, [(uri, options, table, w, commits, start) for w, (uri, table) in enumerate(uris)]
            )
    window = max(r[1] for r in results) - min(r[0] for r in results)
    failures = sum(r[2] for r in results)
    ok = True
    for w, (uri, table) in enumerate(uris):
        t = (
            castable.open_table(uri, storage_options=options)
            if table is None
            else castable.open_database(uri, storage_options=options).table(table)
        )
        ok &= sorted(t.to_arrow().column("id").to_pylist()) == [w * 100_000 + i for i in range(commits)]
    if layout == "database":
        ok &= castable.open_database(f"{root}/db", storage_options=options).version == writers + writers * commits
    return (writers * commits - failures) / window, failures, ok


# ------------------------------------------------------------------------------------ transfers

BANK = pa.schema([("id", pa.int64()), ("balance", pa.int64())])
BALANCE = 100


def bank(uri: str, options: dict[str, str] | None, accounts: int) -> None:
    db = castable.create_database(uri, storage_options=options)
    half = accounts // 2
    for name, ids in (("a", range(half)), ("b", range(half, accounts))):
        db.create_table(name, BANK, primary_key="id").append(
            pa.table({"id": list(ids), "balance": [BALANCE] * len(ids)}, schema=BANK)
        )


def transferrer(
    uri: str, options: dict[str, str] | None, w: int, transfers: int, accounts: int, isolation: str, start: Any
) -> tuple[float, float, int, int]:
    """``transfers`` read-then-upsert transfers through ``db.run``; (start, end, committed, attempts)."""
    import random

    db = castable.open_database(uri, storage_options=options)
    rng = random.Random(w)
    attempts = committed = 0
    half = accounts // 2

    def move(tx: castable.Transaction, src: int, dst: int, amount: int) -> None:
        nonlocal attempts
        attempts += 1
        for i, delta in ((src, -amount), (dst, amount)):
            table = tx.table("a" if i < half else "b")
            [row] = table.scan(filter=f"id = {i}").to_arrow().to_pylist()
            table.upsert(pa.table({"id": [i], "balance": [row["balance"] + delta]}, schema=BANK))

    start.wait()
    t0 = time.monotonic()
    for _ in range(transfers):
        src, dst = rng.sample(range(accounts), 2)
        amount = rng.randint(1, 5)
        try:
            db.run(partial(move, src=src, dst=dst, amount=amount), isolation=isolation)
            committed += 1
        except castable.CommitConflictError:
            pass
    return t0, time.monotonic(), committed, attempts


def measure_transfers(
    root: str, options: dict[str, str] | None, processes: int, transfers: int, accounts: int, isolation: str
) -> tuple[float, float, float, bool]:
    """Committed/s, refused attempts/s, the share of attempts refused, and whether the total held."""
    bank(root, options, accounts)
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        start = manager.Barrier(processes)
        with ctx.Pool(processes) as pool:
            results = pool.starmap(
                transferrer, [(root, options, w, transfers, accounts, isolation, start) for w in range(processes)]
            )
    window = max(r[1] for r in results) - min(r[0] for r in results)
    committed, attempts = sum(r[2] for r in results), sum(r[3] for r in results)
    snap = castable.open_database(root, storage_options=options).snapshot()
    total = sum(sum(snap.table(t).to_arrow().column("balance").to_pylist()) for t in ("a", "b"))
    refused = attempts - committed
    return committed / window, refused / window, refused / max(attempts, 1), total == accounts * BALANCE


# ------------------------------------------------------------------------------------ report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--writers", type=int, nargs="+")
    parser.add_argument("--commits", type=int)
    parser.add_argument("--processes", type=int, nargs="+", help="transfer processes (default 4 8)")
    parser.add_argument("--transfers", type=int, help="transfers per process (default 15)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 rounds, 2 writers, 3 commits")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where database.md goes")
    args = parser.parse_args()
    rounds = args.rounds or (3 if args.quick else 30)
    writers = args.writers or ([2] if args.quick else [2, 4])
    commits = args.commits or (3 if args.quick else 60)
    processes = args.processes or ([2] if args.quick else [4, 8])
    per_process = args.transfers or (3 if args.quick else 15)

    work = Path(tempfile.mkdtemp(prefix="castable-database-"))
    server, endpoint = moto_server()
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    moto = {"endpoint_url": endpoint, "region": "us-east-1"}
    stores: list[tuple[str, Callable[[str], str], dict[str, str] | None]] = [
        ("local", lambda name: str(work / name), None),
        ("moto", lambda name: f"s3://{BUCKET}/{name}", moto),
    ]
    latency: dict[str, dict[str, tuple[float, float]]] = {}
    throughput: dict[tuple[str, int, str], tuple[float, int, bool]] = {}
    contention: dict[tuple[int, int, str], tuple[float, float, float, bool]] = {}
    try:
        for accounts in (20, 1000):
            for p in processes:
                for isolation in ("snapshot", "serializable"):
                    log(f"transfers on local: {p} processes, {accounts} accounts, {isolation}")
                    contention[accounts, p, isolation] = measure_transfers(
                        str(work / f"bank-{accounts}-{p}-{isolation}"), None, p, per_process, accounts, isolation
                    )
        for where, root, options in stores:
            log(f"latency on {where}")
            latency[where] = measure_latency(root("latency"), options, rounds)
            for w in writers:
                for layout in ("tables", "database"):
                    log(f"throughput on {where}: {w} writers, {layout}")
                    throughput[where, w, layout] = measure_throughput(
                        root(f"throughput-{w}-{layout}"), options, w, commits, layout
                    )
    finally:
        server.close()  # type: ignore[attr-defined]
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - STARTED

    command = " ".join(["python -m bench database", *sys.argv[1:]])
    lines = [
        *report_header("database benchmark", f"`{command}` took {elapsed / 60:.1f} min."),
        "## Commit latency",
        "",
        f"Medians of {rounds} commits per case; the cases take turns within each round. Requests count every "
        "GET, PUT, HEAD, LIST and DELETE of the commit (data file, segments, the commit point, the members' "
        "copies and pointers). *vs own table* is the baseline's median over the case's.",
        "",
        "| store | commit | median | requests | vs own table |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for where, cases in latency.items():
        base = cases["table of its own: append"][0]
        for name, (seconds, requests) in cases.items():
            lines.append(f"| {where} | {name} | {fmt_s(seconds)} | {requests:g} | {base / seconds:.2f}x |")
    lines += [
        "",
        "## Concurrent writers on disjoint tables",
        "",
        f"W processes (spawn, released together by a barrier) each append {commits} one-row batches to their own "
        "table with default settings: W tables of their own, or W tables of one database, whose one log every "
        "commit goes through. Commits/s is successful commits over the window from the first writer's start to "
        "the last writer's end. *verified*: every row present once, and the database's versions one per commit.",
        "",
        "| store | writers | tables | commits/s | failed commits | verified | database vs own tables |",
        "| --- | ---: | --- | ---: | ---: | --- | ---: |",
    ]
    for (where, w, layout), (rate, failures, ok) in throughput.items():
        ratio = rate / throughput[where, w, "tables"][0]
        shown = "" if layout == "tables" else f"{ratio:.2f}x"
        lines.append(f"| {where} | {w} | {layout} | {rate:.1f} | {failures} | {ok} | {shown} |")
    lines += [
        "",
        "## Read-then-write transfers under contention",
        "",
        f"P processes on the local store each make {per_process} transfers between two random accounts of a bank "
        "split over two tables: a transaction that scans both balances and upserts the new ones, through "
        "`db.run`, which runs a refused transaction again on a fresh snapshot. *refused* counts refused attempts "
        "(each is run again); *total kept*: the bank's total after the run is the initial one.",
        "",
        "| accounts | processes | isolation | committed/s | refused attempts/s | attempts refused | total kept |",
        "| ---: | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for (accounts, p, isolation), (rate, refused, share, kept) in contention.items():
        lines.append(f"| {accounts} | {p} | {isolation} | {rate:.1f} | {refused:.1f} | {share:.1%} | {kept} |")
    all_landed = all(failures == 0 and ok for failures, ok in ((v[1], v[2]) for v in throughput.values()))
    transfer_runs = list(contention.values())
    little = [share for (accounts, _, _), (_, _, share, _) in contention.items() if accounts == 1000]
    lines += [
        "",
        "## Targets",
        "",
        f"- Transactions on disjoint tables of one database all commit, none failing: "
        f"**{'met' if all_landed else 'missed'}**.",
        f"- Every transfer run keeps the bank's total: **{'met' if all(v[3] for v in transfer_runs) else 'missed'}**.",
        f"- Under 5% of attempts refused with 1,000 accounts: **{'met' if max(little) < 0.05 else 'missed'}** "
        f"(at most {max(little):.1%}).",
    ]
    publish("database", lines, args.out)


if __name__ == "__main__":
    main()
