"""Code run in worker processes by the multi-process tests (helpers/processes.py), importable by name."""

from __future__ import annotations

import os
from threading import Barrier

import castable

from .tables import events


def _test_credentials() -> None:
    """The dummy credentials moto and LocalStack accept (a worker may start without them)."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")


def append_and_delete(uri: str, options: dict | None, worker: int, rounds: int) -> list[tuple[str, int, str]]:
    """Append a block of this worker's own ids per round, then delete part of it two ways.

    Returns (operation, version, commit_id) for every commit this worker made.
    """
    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    done = []
    for r in range(rounds):
        start = worker * 10_000 + r * 100
        cid = f"w{worker}-r{r}"
        done.append(
            ("append", table.append(events(start, start + 100), commit_id=f"{cid}-append").version, f"{cid}-append")
        )
        v = table.delete(f"id BETWEEN {start} AND {start + 9}", commit_id=f"{cid}-range").version
        done.append(("delete", v, f"{cid}-range"))
        v = table.delete(
            f"id IN ({start + 50}, {start + 77}) OR (id > {start + 90} AND id < {start + 95})",
            commit_id=f"{cid}-scatter",
        ).version
        done.append(("delete", v, f"{cid}-scatter"))
    return done


def append_rows(uri: str, options: dict | None, worker: int, commits: int) -> list[int]:
    """Append ``commits`` one-row batches with one handle and default settings; return the versions."""
    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    return [table.append(events(worker * 1000 + i, worker * 1000 + i + 1)).version for i in range(commits)]


def expected_ids(worker: int, rounds: int) -> set[int]:
    keep = set()
    for r in range(rounds):
        start = worker * 10_000 + r * 100
        gone = {*range(start, start + 10), start + 50, start + 77, *range(start + 91, start + 95)}
        keep |= set(range(start, start + 100)) - gone
    return keep


def erase_or_delete(uri: str, options: dict | None, worker: int) -> list[int]:
    """Even workers erase ids, odd workers soft-delete ids, all in the same data file."""
    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    targets = [worker * 10_000 + k * 97 for k in range(3)]
    for target in targets:
        if worker % 2:
            table.delete(f"id = {target}")
        else:
            table.erase(f"id = {target}", mode="splice")
    return targets


def maintain(uri: str, options: dict | None, seconds: float) -> dict[str, int]:
    """Compact, expire and collect garbage in a loop while other processes write."""
    import time
    from datetime import timedelta

    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    done = {"compactions": 0, "expired": 0, "swept": 0}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        table.refresh()
        if table.compact(min_file_size=10**9).files_rewritten:
            done["compactions"] += 1
        done["expired"] += len(table.expire(retain_versions=5).versions_expired)
        done["swept"] += len(table.gc(orphan_grace=timedelta(seconds=20)).objects)
    return done


# ---------------------------------------------------------------- racing upserts (test_concurrency.py)

UPSERT_KEYS = 40
"""Upserting workers draw their keys from ``range(UPSERT_KEYS)``, so their batches overlap."""
ERASABLE = range(1000, 1100)
"""Keys no upsert touches: the maintenance worker erases some of them."""


def upsert_overlapping(
    uri: str, options: dict | None, worker: int, rounds: int, rounds_begin: Barrier
) -> list[tuple[int, list[int], float]]:
    """Upsert ``rounds`` batches of 10 keys from the shared pool, every worker starting each round
    together (so they race); return (version, keys, value) per commit."""
    import random

    import pyarrow as pa

    from .tables import EVENTS

    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    rng = random.Random(worker)
    done = []
    for r in range(rounds):
        keys = sorted(rng.sample(range(UPSERT_KEYS), 10))
        value = float(worker * 1000 + r)
        rounds_begin.wait(timeout=120)
        batch = pa.table(
            {"id": keys, "category": [f"w{worker}"] * len(keys), "value": [value] * len(keys)}, schema=EVENTS
        )
        done.append((table.upsert(batch, commit_id=f"upsert-{worker}-{r}").version, keys, value))
    return done


def compact_and_erase(uri: str, options: dict | None, rounds: int) -> list[int]:
    """Compact everything and erase one key outside the upserted pool, ``rounds`` times; return the erased keys."""
    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    erased = []
    for r in range(rounds):
        table.refresh().compact(min_file_size=10**9)
        key = ERASABLE[r * 7]
        table.erase(f"id = {key}")
        erased.append(key)
    return erased


INCREMENTED = 20
"""Rows ``range(INCREMENTED)`` that every incrementing worker adds 1 to, once per round."""


def increment(uri: str, options: dict | None, worker: int, rounds: int, rounds_begin: Barrier) -> int:
    """Add 1 to the value of every incremented row ``rounds`` times, by update (even workers) or
    by merge (odd workers), every worker starting each round together (so they race); return how
    many commits it made."""
    import pyarrow as pa

    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    for r in range(rounds):
        rounds_begin.wait(timeout=120)
        if worker % 2:
            source = pa.table({"id": list(range(INCREMENTED)), "step": [1.0] * INCREMENTED})
            merge = table.merge(source).when_matched_update({"value": "t.value + s.step"})
            merge.execute(commit_id=f"merge-{worker}-{r}")
        else:
            table.update({"value": "value + 1"}, where=f"id < {INCREMENTED}", commit_id=f"update-{worker}-{r}")
    return rounds


# ---------------------------------------------------------------- mixed load (test_mixed_load.py)

MIXED_WRITER_ROWS = 25
"""Rows per append of ``append_blocks``; writer ``w``'s ids start at ``(w + 1) * 1_000_000``."""


LOAD_CAP_SECONDS = 150.0
"""The longest a mixed load waits for its ``until`` file after its own ``seconds`` have passed."""


def _load_goes_on(began: float, seconds: float, until: str | None) -> bool:
    """A mixed load's loop condition: ``seconds`` have not passed since ``began`` (monotonic), or
    they have but the file ``until`` does not exist yet (up to :data:`LOAD_CAP_SECONDS`). The
    maintainer creates that file after its first sweep, so the load outlasts it on any machine."""
    import time

    elapsed = time.monotonic() - began
    return elapsed < seconds or (until is not None and not os.path.exists(until) and elapsed < LOAD_CAP_SECONDS)


def append_blocks(
    uri: str, options: dict | None, worker: int, seconds: float, pause: float, until: str | None = None
) -> dict:
    """Append blocks of this worker's own ids, each with its own commit id and ``pause`` seconds
    apart, for ``seconds`` and then until the file ``until`` exists.

    Every fifth commit is retried once with the same commit id from a fresh handle, as a client
    that lost the response would; that retry must return the version and write nothing.
    Returns the acknowledged id ranges, the versions, the longest append and the active window.
    """
    import time

    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    done: dict = {"ranges": [], "versions": [], "retries": [], "max_seconds": 0.0, "start": time.time()}
    began = time.monotonic()
    i = 0
    while _load_goes_on(began, seconds, until):
        start = (worker + 1) * 1_000_000 + i * MIXED_WRITER_ROWS
        sent = time.monotonic()
        version = table.append(events(start, start + MIXED_WRITER_ROWS), commit_id=f"mixed-w{worker}-{i}").version
        done["max_seconds"] = max(done["max_seconds"], time.monotonic() - sent)
        done["ranges"].append((start, start + MIXED_WRITER_ROWS))
        done["versions"].append(version)
        if i % 5 == 0:
            again = castable.open_table(uri, storage_options=options)
            retried = again.append(events(start, start + MIXED_WRITER_ROWS), commit_id=f"mixed-w{worker}-{i}").version
            done["retries"].append((version, retried))
        i += 1
        time.sleep(pause)
    done["end"] = time.time()
    return done


class _LambdaContext:
    function_name = "castable-ingest"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:castable-ingest"
    aws_request_id = "mixed-load"


def _sqs_batch(records: list[tuple[str, str]], bodies: list[str]) -> dict:
    """One SQS batch of S3 notifications for (bucket, key) pairs from any buckets, plus raw bodies."""
    from .aws_stubs import sqs_event

    messages = []
    for bucket, key in records:
        messages += sqs_event(bucket, [key])["Records"]
    messages += sqs_event("unused", ["unused"], bodies=bodies)["Records"][1:]
    for n, message in enumerate(messages):
        message["messageId"] = f"m{n}"
    return {"Records": messages}


def ingest_batches(
    endpoint: str,
    table_uri: str,
    bucket: str,
    worker: int,
    seconds: float,
    misrouted: list[tuple[str, str]],
    until: str | None = None,
) -> dict:
    """Act as S3 + SQS + the ingest Lambda for ``seconds`` and then until the file ``until``
    exists: land files under ``landing/<table>/``, then
    invoke ``lambdas.ingest.handler`` (in this process, environment as deployed) with a batch
    mixing valid files (this worker's own ids), one bad file (not Parquet, wrong schema or NULL
    keys, in turn), the ``misrouted`` records, redeliveries of files already ingested or
    dead-lettered, and an ``s3:TestEvent``. Every third batch is delivered twice in a row.

    Returns the acknowledged valid files and ids, the bad files, the responses, the longest
    invocation and the active window.
    """
    import io
    import time

    import boto3
    import pyarrow as pa
    import pyarrow.parquet as pq
    from botocore.config import Config

    from .lossy import spared

    os.environ["AWS_ACCESS_KEY_ID"] = os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    os.environ["CASTABLE_BUCKET"] = bucket
    landing = f"landing/{table_uri.rstrip('/').rpartition('/')[2]}"
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "castable-test")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    from lambdas import ingest

    s3 = boto3.client("s3", config=Config(retries={"mode": "standard"}))

    def land(key: str, data: pa.Table | bytes) -> str:
        """What the producer lands: outside the lossy network, which lies between castable and S3."""
        if isinstance(data, pa.Table):
            buf = io.BytesIO()
            pq.write_table(data, buf)
            data = buf.getvalue()
        with spared():
            s3.put_object(Bucket=bucket, Key=key, Body=data)
        return key

    nullable = pa.schema([f.with_nullable(True) for f in events(0, 1).schema])
    done: dict = {"valid": {}, "bad": {}, "responses": [], "max_seconds": 0.0, "start": time.time()}
    began = time.monotonic()
    previous: list[str] = []
    j = 0
    while j < 3 or _load_goes_on(began, seconds, until):
        base = 10_000_000 + worker * 1_000_000 + j * 1000
        valid = {
            land(f"{landing}/k{worker}/b{j}/part {i}.parquet", events(base + 100 * i, base + 100 * i + 40)): (
                base + 100 * i,
                base + 100 * i + 40,
            )
            for i in range(2)
        }
        bad_key, bad_data, why = (
            (f"{landing}/k{worker}/bad-{j}.parquet", b"PAR1 not really", "not a readable"),
            (f"{landing}/k{worker}/wrong-{j}.parquet", pa.table({"id": pa.array([99_000_000 + j], pa.int32())}), "id"),
            (
                f"{landing}/k{worker}/nulls-{j}.parquet",
                pa.table({"id": [None, 98_000_000 + j], "category": ["a", "b"], "value": [1.0, 2.0]}, nullable),
                "NULL",
            ),
        )[j % 3]
        land(bad_key, bad_data)
        records = [(bucket, k) for k in valid] + [(bucket, bad_key)] + misrouted + [(bucket, k) for k in previous]
        event = _sqs_batch(records, bodies=['{"Service":"Amazon S3","Event":"s3:TestEvent"}'])
        for _ in range(2 if j % 3 == 1 else 1):
            sent = time.monotonic()
            done["responses"].append(ingest.handler(event, _LambdaContext()))
            done["max_seconds"] = max(done["max_seconds"], time.monotonic() - sent)
        done["valid"].update(valid)
        done["bad"][bad_key] = why
        previous = [next(iter(valid)), bad_key]
        j += 1
    done["batches"] = j
    done["end"] = time.time()
    return done


def maintain_and_read(
    uri: str, options: dict | None, seconds: float, grace_seconds: float, retain_versions: int, swept: str
) -> dict:
    """Compact (default settings), expire to ``retain_versions`` and gc with ``grace_seconds`` in
    a loop while other processes write, for ``seconds`` and until gc has swept once; create the
    file ``swept`` after the first sweep (the writers wait for it). After every sweep, read the
    oldest and the newest version of the table's history and check neither holds an id twice.
    Returns when each compaction and sweep happened, and what was swept."""
    import time
    from datetime import timedelta

    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    done: dict = {"compactions": [], "expired": 0, "sweeps": [], "swept": [], "versions_read": 0}
    began = time.monotonic()
    while _load_goes_on(began, seconds, None if done["sweeps"] else swept):
        table.refresh()
        compacted = table.compact()
        if compacted.files_rewritten:
            done["compactions"].append((time.time(), compacted.version))
        done["expired"] += len(table.expire(retain_versions=retain_versions).versions_expired)
        objects = table.gc(orphan_grace=timedelta(seconds=grace_seconds)).objects
        if not objects:
            continue
        done["sweeps"].append(time.time())
        done["swept"] += objects
        with open(swept, "a"):
            pass
        history = table.history()
        for version in {history[-1].version, history[0].version}:  # the oldest has the oldest files
            ids = table.scan(["id"], version=version).to_arrow().column("id").to_pylist()
            assert len(ids) == len(set(ids)), f"version {version} holds an id twice after a sweep"
            done["versions_read"] += 1
    return done


def append_rows_merging(uri: str, options: dict | None, worker: int, commits: int) -> list[int]:
    """Like :func:`append_rows`, with ``schema_mode="merge"``: rows of the original columns keep
    appending while another process adds columns (they read NULL there)."""
    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    rows = [events(worker * 1000 + i, worker * 1000 + i + 1) for i in range(commits)]
    return [table.append(r, schema_mode="merge").version for r in rows]


def add_columns(uri: str, options: dict | None, count: int) -> list[int]:
    """Add ``count`` nullable columns, one commit each, with default settings; return the versions."""
    import pyarrow as pa

    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    return [table.alter().add_column(f"c{i}", pa.int64(), default=i).commit().version for i in range(count)]


MOVER_IDS = 10
"""Each mover owns this many ids, which it moves between tables ``a`` and ``b``."""


def move_rows(uri: str, options: dict | None, worker: int, moves: int) -> int:
    """Move this worker's rows between tables ``a`` and ``b``, one transaction per move: delete
    from the table that holds the row, upsert into the other. Return the moves committed."""
    import random

    _test_credentials()
    db = castable.open_database(uri, storage_options=options)
    rng = random.Random(worker)
    for _ in range(moves):
        key = worker * 1000 + rng.randrange(MOVER_IDS)
        with db.transaction() as tx:
            a, b = tx.table("a"), tx.table("b")
            source, target = (a, b) if a.count(filter=f"id = {key}") else (b, a)
            row = source.to_arrow(filter=f"id = {key}")
            source.delete(f"id = {key}")
            target.upsert(row)
    return moves


def append_until_dropped(uri: str, options: dict | None, worker: int, appends: int) -> list[dict]:
    """Append rows to table ``a`` of the database, each under its own commit id, from a handle
    opened per append, until the table is gone. Return per append its commit id, ids and how
    it ended: ``landed`` (with the table version), ``conflict`` or ``gone``."""
    _test_credentials()
    done: list[dict] = []
    for n in range(appends):
        start = 100_000 + worker * 1000 + n
        record: dict = {"commit_id": f"w{worker}-a{n}", "id": start}
        try:
            table = castable.open_database(uri, storage_options=options).table("a")
            record["version"] = table.append(events(start, start + 1), commit_id=record["commit_id"]).version
            record["ended"] = "landed"
        except castable.CommitConflictError:
            record["ended"] = "conflict"
        except castable.TableNotFoundError:
            record["ended"] = "gone"
        done.append(record)
        if record["ended"] == "gone":
            break
    return done


def drop_once_appended(uri: str, options: dict | None, appends: int) -> int:
    """Drop table ``a`` of the database once ``appends`` appends have landed on it since the
    first one (so the drop falls mid-race however slowly the writers start); the database
    version of the drop."""
    import time

    _test_credentials()
    db = castable.open_database(uri, storage_options=options)
    first = db.table("a").version
    while db.refresh().table("a").version < first + appends:
        time.sleep(0.05)
    return db.drop_table("a", commit_id="drop-a")


def check_snapshots(uri: str, options: dict | None, expected: list[int], seconds: float) -> int:
    """Read both tables at one database version, again and again for ``seconds``: every row
    must be in exactly one of them. Return how many snapshots were checked."""
    import time

    _test_credentials()
    db = castable.open_database(uri, storage_options=options)
    checked, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline or checked < 3:
        snap = db.refresh().snapshot()
        a = snap.table("a").scan(["id"]).to_arrow().column("id").to_pylist()
        b = snap.table("b").scan(["id"]).to_arrow().column("id").to_pylist()
        assert sorted(a + b) == expected, f"database version {snap.version}: a={sorted(a)} b={sorted(b)}"
        checked += 1
    return checked


ACCOUNTS = 20
"""Bank accounts, split over tables ``a`` (ids 0-9) and ``b`` (ids 10-19)."""
BALANCE = 100


def account(i: int) -> tuple[str, int]:
    """The table holding account ``i``, and its id."""
    return ("a" if i < ACCOUNTS // 2 else "b"), i


def _move(tx: castable.Transaction, record: dict, style: str) -> None:
    """One transfer inside ``tx``: the moves of ``record``, read then upserted, or by SQL update."""
    import pyarrow as pa

    record["snapshot"], record["reads"], record["writes"] = tx.snapshot_version, {}, []
    for i, delta in record["moves"].items():
        name, key = account(i)
        table = tx.table(name)
        if style == "update":
            table.update({"balance": f"balance + {delta}", "stamp": f"'{record['id']}'"}, where=f"id = {key}")
        else:
            [row] = table.scan(filter=f"id = {key}").to_arrow().to_pylist()
            record["reads"][f"{name}/{key}"] = row["stamp"]
            new = {"id": [key], "balance": [row["balance"] + delta], "stamp": [record["id"]]}
            table.upsert(pa.table(new, schema=table.schema))
        record["writes"].append(f"{name}/{key}")


def transfer(uri: str, options: dict | None, worker: int, transfers: int, style: str, isolation: str) -> list[dict]:
    """Move money between two random accounts, one transaction per transfer, with the defaults a
    user gets. ``style``: ``update`` (SQL ``balance + n``), ``upsert`` (read, then upsert the
    balance computed from the read), or ``run`` (the upsert style through ``db.run``, which
    retries refusals). Return each transaction's record (see ``isolation.Txn``) and its moves."""
    import functools
    import random

    _test_credentials()
    db = castable.open_database(uri, storage_options=options)
    rng = random.Random(worker)
    records = []
    for n in range(transfers):
        src, dst = rng.sample(range(ACCOUNTS), 2)
        amount = rng.randint(1, 5)
        record: dict = {"id": f"w{worker}-t{n}", "moves": {src: -amount, dst: amount}}
        move = functools.partial(_move, record=record, style="upsert" if style == "run" else style)
        try:
            if style == "run":
                db.run(move, isolation=isolation, commit_id=record["id"])  # type: ignore[arg-type]
                record["committed"] = db.committed_version(record["id"])
            else:
                with db.transaction(record["id"], isolation=isolation) as tx:  # type: ignore[arg-type]
                    move(tx)
                record["committed"] = tx.version
        except castable.CommitConflictError as e:
            record["committed"], record["error"] = None, str(e)
        records.append(record)
    return records


def read_totals(uri: str, options: dict | None, seconds: float) -> list[dict]:
    """Sum every account at each newest database snapshot for ``seconds``; return what each read."""
    import time

    _test_credentials()
    db = castable.open_database(uri, storage_options=options)
    seen: list[dict] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or len(seen) < 3:
        snap = db.refresh().snapshot()
        rows = {f"{name}/{r['id']}": r for name in ("a", "b") for r in snap.table(name).scan().to_arrow().to_pylist()}
        seen.append(
            {
                "version": snap.version,
                "total": sum(r["balance"] for r in rows.values()),
                "reads": {k: r["stamp"] for k, r in rows.items()},
            }
        )
    return seen


REGISTERS = 4
"""Keys per table in the register workload (tables ``a`` and ``b``)."""


def registers(uri: str, options: dict | None, worker: int, transactions: int, isolation: str) -> list[dict]:
    """Random transactions that read two or three keys and write none (a third of them: read-only
    transactions are judged too), one or two (each write stores the transaction's id, so a read
    says which write it saw). Return the records."""
    import random

    import pyarrow as pa

    _test_credentials()
    db = castable.open_database(uri, storage_options=options)
    rng = random.Random(1000 + worker)
    keys = [(t, k) for t in ("a", "b") for k in range(REGISTERS)]
    records = []
    for n in range(transactions):
        commit_id = f"r{worker}-{n}"
        record: dict = {"id": commit_id, "reads": {}, "writes": []}
        try:
            with db.transaction(commit_id, isolation=isolation) as tx:  # type: ignore[arg-type]
                record["snapshot"] = tx.snapshot_version
                for name, key in rng.sample(keys, rng.randint(2, 3)):
                    [row] = tx.table(name).scan(filter=f"id = {key}").to_arrow().to_pylist()
                    record["reads"][f"{name}/{key}"] = row["stamp"]
                for name, key in rng.sample(keys, rng.randint(0, 2)):
                    row = {"id": [key], "balance": [n], "stamp": [commit_id]}
                    tx.table(name).upsert(pa.table(row, schema=tx.table(name).schema))
                    record["writes"].append(f"{name}/{key}")
            record["committed"] = tx.version
        except castable.CommitConflictError as e:
            record["committed"], record["error"] = None, str(e)
        records.append(record)
    return records


# ---------------------------------------------------------------- a lossy network (test_lossy_network.py)

CALLER_ATTEMPTS = 6
"""How often a caller sends one commit (with the same ``commit_id``) before giving up."""


def append_with_commit_ids(uri: str, options: dict | None, worker: int, commits: int) -> list[dict]:
    """Append ``commits`` blocks of this worker's ids, each under its own ``commit_id``, sending a
    commit again (same id) after any castable error, up to ``CALLER_ATTEMPTS`` times. Return per
    commit its id, the version it was acknowledged as (``None`` if the caller gave up) and the
    errors met on the way. Each attempt opens the table anew, as each invocation of the commit
    Lambda does (so its reads meet the network's faults too, not only its writes)."""
    _test_credentials()
    done = []
    for n in range(commits):
        start = worker * 10_000 + n * 10
        record: dict = {"commit_id": f"w{worker}-c{n}", "ids": [start, start + 10], "version": None, "errors": []}
        for _ in range(CALLER_ATTEMPTS):
            try:
                table = castable.open_table(uri, storage_options=options)
                record["version"] = table.append(events(start, start + 10), commit_id=record["commit_id"]).version
                break
            except castable.CastableError as e:
                record["errors"].append(type(e).__name__)
        done.append(record)
    return done


LEDGER = 0
"""The account whose balance the ledger workload keeps."""


def post_to_ledger(uri: str, options: dict | None, worker: int, entries: int) -> list[dict]:
    """Through ``db.run``, post ``entries`` amounts: read the balance, append a ledger row, upsert
    the balance (old + amount). Return per entry its id, amount and the database version it
    committed as."""
    import random

    import pyarrow as pa

    _test_credentials()
    db = castable.open_database(uri, storage_options=options)
    rng = random.Random(worker)
    done = []
    for n in range(entries):
        entry, amount = worker * 1000 + n, rng.randint(1, 9)

        def post(tx: castable.Transaction, entry: int = entry, amount: int = amount) -> None:
            balances, ledger = tx.table("balances"), tx.table("ledger")
            [row] = balances.scan(filter=f"id = {LEDGER}").to_arrow().to_pylist()
            ledger.append(pa.table({"id": [entry], "amount": [amount]}, schema=ledger.schema))
            new = {"id": [LEDGER], "balance": [row["balance"] + amount], "stamp": [str(entry)]}
            balances.upsert(pa.table(new, schema=balances.schema))

        commit_id = f"ledger-{entry}"
        db.run(post, commit_id=commit_id)
        done.append({"entry": entry, "amount": amount, "version": db.committed_version(commit_id)})
    return done


ENFORCED_KEYS = 40
"""The pool of keys the enforced appends draw from (small, so that their batches overlap)."""


def append_enforced(
    uri: str, options: dict | None, worker: int, rounds: int, rounds_begin: Barrier
) -> list[tuple[str, list[int], int | None, list[int]]]:
    """Append ``rounds`` batches of 4 keys from a small shared pool to a table that enforces its
    key, every worker starting each round together; return (commit id, keys, version or None,
    keys the refusal named) per append."""
    import random

    import pyarrow as pa

    from castable.errors import DuplicateKeyError

    from .tables import EVENTS

    _test_credentials()
    table = castable.open_table(uri, storage_options=options)
    rng = random.Random(worker)
    done: list[tuple[str, list[int], int | None, list[int]]] = []
    for r in range(rounds):
        keys = sorted(rng.sample(range(ENFORCED_KEYS), 4))
        commit_id = f"enforced-{worker}-{r}"
        batch = pa.table({"id": keys, "category": [f"w{worker}"] * 4, "value": [float(r)] * 4}, schema=EVENTS)
        rounds_begin.wait(timeout=120)
        try:
            done.append((commit_id, keys, table.append(batch, commit_id=commit_id).version, []))
        except DuplicateKeyError as e:
            done.append((commit_id, keys, None, [k for k in e.keys if isinstance(k, int)]))
    return done
