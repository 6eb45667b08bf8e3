"""Both state machines executed by moto's Step Functions interpreter, their Lambda tasks running
the real handler code in-process, against moto's S3 in the same process (helpers/workflows.py;
the IAM-enforced runs of every handler over HTTP are tests/integration/aws/test_iam.py's)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.aws_stubs import sqs_event
from helpers.lossy import Faults, network
from helpers.s3servers import new_bucket
from helpers.tables import EVENTS, FILES_ONLY, events, snapshot_of
from helpers.workflows import (
    ROOT,
    due_tables,
    failures,
    history,
    largest_payload,
    run,
    schedule_run,
    wide_table,
    workflows,
)

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

import castable
import castable.format.segment
import castable.maintenance.erase
from castable.errors import CorruptObjectError
from castable.format.properties import AFTER_COMMIT
from castable.iceberg import publish
from castable.table import Table
from castable.tables import load_table


@pytest.fixture
def aws(s3_endpoint: str) -> Iterator[dict[str, str]]:
    with workflows(s3_endpoint) as machines:
        yield machines


@pytest.fixture
def table(s3_bucket: str, s3_endpoint: str) -> Table:
    """Four appends of 1,000 rows, each a data file (what the erasure workflow splices)."""
    props = {"write.parquet.compression": "none", "write.target-file-size-bytes": 30_000, **FILES_ONLY}
    t = castable.create_table(
        f"s3://{s3_bucket}/events",
        EVENTS,
        primary_key="id",
        properties=props,
        storage_options={"endpoint_url": s3_endpoint, "region": "us-east-1"},
    )
    for i in range(4):
        t.append(events(i * 1000, i * 1000 + 1000))
    return t


def ids(t: Table) -> list[int]:
    return sorted(load_table(t.store).scan(["id"]).to_arrow().column("id").to_pylist())


def test_erasure_workflow_removes_rows_physically_and_returns_a_receipt(aws: dict[str, str], table: Table) -> None:
    predicate = "id IN (10, 2500, 3999)"
    d = run(aws["erasure"], {"table": table.uri, "predicate": predicate, "commit_id": "gdpr-42"})
    assert d["status"] == "SUCCEEDED", failures(d)
    receipt = json.loads(d["output"])
    assert receipt["verified"] is True and receipt["commit_id"] == "gdpr-42"
    assert receipt["rows_erased"] == 3 and receipt["files_spliced"] == 3, receipt
    assert receipt["objects_deleted"] and receipt["versions_expired"]
    # the receipt is kept with the table, the erased identifier only as a hash
    key = receipt["receipt"].removeprefix(table.uri + "/")
    assert key.startswith("receipts/") and receipt["receipt"] == f"{table.uri}/{key}"
    kept = json.loads(table.store.get(key).data)
    assert "predicate" not in kept and kept["predicate_sha256"] == hashlib.sha256(predicate.encode()).hexdigest()
    assert predicate.encode() not in table.store.get(key).data and b"2500" not in table.store.get(key).data
    assert {k: v for k, v in kept.items() if k != "predicate_sha256"} == {
        k: v for k, v in receipt.items() if k not in ("predicate", "receipt")
    }
    assert ids(table) == [i for i in range(4000) if i not in (10, 2500, 3999)]
    latest = load_table(table.store)
    for f in latest.manifest.data_files:
        data = pq.read_table(latest.store.open_input(f.path, size=f.size, etag=f.etag)).column("id").to_pylist()
        assert not {10, 2500, 3999} & set(data)


def test_an_erasure_leaves_iceberg_readers_the_table_without_the_erased_rows(
    aws: dict[str, str], table: Table, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The purge deletes the published Iceberg metadata (it names the erased rows) and publishes
    again at once, so the location a Glue table holds is readable with no commit after it."""
    from pyiceberg.table import StaticTable

    monkeypatch.setenv(AFTER_COMMIT, "false")  # as deployed: the catalog function publishes commits
    table.set_properties({"publish.iceberg": "true"})
    location = publish(table)
    d = run(aws["erasure"], {"table": table.uri, "predicate": "id IN (10, 2500)", "commit_id": "gdpr-7"})
    assert d["status"] == "SUCCEEDED", failures(d)
    latest = load_table(table.store)
    fileio = {"s3.endpoint": s3_endpoint, "s3.region": "us-east-1"}
    fileio |= {"s3.access-key-id": "testing", "s3.secret-access-key": "testing"}
    assert location.endswith(f"v{table.version}.metadata.json")
    newest = f"{table.uri}/metadata/v{latest.version}.metadata.json"
    read = StaticTable.from_metadata(newest, properties=fileio).scan().to_arrow().column("id").to_pylist()
    assert sorted(read) == ids(table) == [i for i in range(4000) if i not in (10, 2500)]


@pytest.mark.slow
def test_erasure_workflow_state_and_history_do_not_grow_with_the_files_it_splices(
    aws: dict[str, str], s3_bucket: str, s3_endpoint: str
) -> None:
    """A per-user erase on a table not sorted by user plans every file. The plan lives in S3 and
    the splices run as a Distributed Map's child executions, so neither the largest state payload
    nor the execution's history depends on the number of files: the same for 8 files and 80
    (an inline Map's list of files reached 256 KiB at ~550 files, its history 25,000 events at
    ~3,500; bench/deployment/workflow_scale.py runs 5,000)."""
    shape = []
    for files in (8, 80):
        t = wide_table(s3_bucket, s3_endpoint, f"wide{files}", files)
        d = run(aws["erasure"], {"table": t.uri, "predicate": "id = 500000", "commit_id": f"user-{files}"}, seconds=300)
        assert d["status"] == "SUCCEEDED", failures(d)
        receipt = json.loads(d["output"])
        assert receipt["verified"] is True and receipt["rows_erased"] == 1 and receipt["files_spliced"] == 1, receipt
        assert len(ids(t)) == 2 * files - 1
        shape.append((len(history(d)), largest_payload(d)))
    (events_8, largest_8), (events_80, largest_80) = shape
    assert events_80 == events_8, f"the history grew from {events_8} to {events_80} events"
    assert largest_80 <= largest_8 + 16, f"the largest payload grew from {largest_8} to {largest_80} bytes"


@pytest.mark.slow
def test_maintenance_workflow_state_and_history_do_not_grow_with_the_files_it_compacts(
    aws: dict[str, str], s3_bucket: str, s3_endpoint: str
) -> None:
    """The compaction plan lives in S3 and the groups run as a Distributed Map's child
    executions: the same history and largest payload for 10 small files and 200 (an inline
    Map reached Step Functions' limits at ~3,800; bench/deployment/workflow_scale.py runs 10,000)."""
    shape = []
    for files in (10, 200):
        t = wide_table(s3_bucket, s3_endpoint, f"small{files}", files)
        d = run(aws["maintenance"], {"table": t.uri, "retain_versions": 1, "retain_hours": None, "grace_hours": 0})
        assert d["status"] == "SUCCEEDED", failures(d)
        latest = load_table(t.store)
        assert latest.count() == 2 * files and len(latest.manifest.data_files) == 1, "compacted into one file"
        shape.append((len(history(d)), largest_payload(d)))
    (events_10, largest_10), (events_200, largest_200) = shape
    assert events_200 == events_10, f"the history grew from {events_10} to {events_200} events"
    assert largest_200 <= largest_10 + 16, f"the largest payload grew from {largest_10} to {largest_200} bytes"


def test_erasure_workflow_catch_path(aws: dict[str, str], table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise CorruptObjectError("a data file could not be read")

    monkeypatch.setattr(Table, "erase", broken)
    d = run(aws["erasure"], {"table": table.uri, "predicate": "id = 7", "commit_id": "bad"})
    assert d["status"] == "FAILED"
    failed = [e for e in history(d) if e["type"] == "ExecutionFailed"]
    assert failed and failed[0]["executionFailedEventDetails"]["error"] == "ErasureFailed"
    assert ids(table) == [i for i in range(4000) if i != 7], "the tombstone landed; the splice failed and said so"


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        ({"predicate": "id = 7", "commit_id": "x" * 201}, "InvalidEventError"),
        ({"predicate": "id = 7"}, "InvalidEventError"),
        ({"predicate": "nope = 1", "commit_id": "bad-column"}, "InvalidPredicateError"),
        (
            {"predicate": "id = 7", "commit_id": "both", "database": "s3://b/db", "tables": {"t": "id = 7"}},
            "InvalidEventError",
        ),
        ({"predicate": "id = 7", "commit_id": "stray", "extra": 1}, "InvalidEventError"),
    ],
)
def test_erasure_workflow_refuses_a_bad_request_before_anything_runs(
    aws: dict[str, str], table: Table, request_: dict[str, Any], error: str
) -> None:
    d = run(aws["erasure"], {"table": table.uri, **request_})
    assert d["status"] == "FAILED"
    events = history(d)
    failed = [e for e in events if e["type"] == "ExecutionFailed"]
    assert failed and failed[0]["executionFailedEventDetails"]["error"] == error
    entered = [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
    assert entered == ["Validate"]
    assert load_table(table.store).version == table.version


def test_erasure_workflow_refuses_a_bucket_with_object_lock(aws: dict[str, str], s3_endpoint: str) -> None:
    """Object Lock would keep the erased rows' versions past the purge: Validate refuses the
    request and no step that writes runs."""
    name = new_bucket(s3_endpoint, lock=True)
    t = castable.create_table(
        f"s3://{name}/events",
        EVENTS,
        primary_key="id",
        storage_options={"endpoint_url": s3_endpoint, "region": "us-east-1"},
    )
    t.append(events(0, 100))
    d = run(aws["erasure"], {"table": t.uri, "predicate": "id = 7", "commit_id": "locked"})
    assert d["status"] == "FAILED"
    events_ = history(d)
    failed = [e for e in events_ if e["type"] == "ExecutionFailed"]
    assert failed and failed[0]["executionFailedEventDetails"]["error"] == "ObjectLockedError"
    assert [e["stateEnteredEventDetails"]["name"] for e in events_ if "stateEnteredEventDetails" in e] == ["Validate"]
    assert load_table(t.store).version == t.version


def test_erasure_workflow_erases_rows_kept_inline_from_every_object(
    aws: dict[str, str], s3_bucket: str, s3_endpoint: str
) -> None:
    """Small appends kept inline in the version's segments: the workflow rewrites the entries,
    and its purge deletes the segments that held the rows (every version, in this versioned
    bucket too if it were one): no object of the table holds the erased value afterwards."""
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    t = castable.create_table(f"s3://{s3_bucket}/inline", EVENTS, primary_key="id", storage_options=options)
    for i in range(4):
        t.append(events(i * 10, i * 10 + 10))
    assert all(f.inline is not None for f in t.manifest.data_files)
    assert [o.key for o in t.store.list("segment/") if _holds_row(t, o.key, 17)]
    d = run(aws["erasure"], {"table": t.uri, "predicate": "id = 17", "commit_id": "inline-1"})
    assert d["status"] == "SUCCEEDED", failures(d)
    receipt = json.loads(d["output"])
    assert receipt["verified"] is True and receipt["rows_erased"] == 1, receipt
    assert ids(t) == [i for i in range(40) if i != 17]
    assert [o.key for o in t.store.list("segment/") if _holds_row(t, o.key, 17)] == []


def _holds_row(t: Table, key: str, row_id: int) -> bool:
    """Whether the segment at ``key`` is a data segment with an inline entry holding ``row_id``."""
    try:
        table = castable.format.segment.decode(t.store.get(key).data, "data", key=key)
    except CorruptObjectError:  # a tombstone or commits segment
        return False
    if castable.format.segment.INLINE not in table.column_names:
        return False
    rows = table.column(castable.format.segment.INLINE).combine_chunks().flatten()
    return row_id in rows.field("id").to_pylist()


def test_an_erasure_stopped_after_its_splices_is_finished_by_running_it_again(
    aws: dict[str, str], table: Table
) -> None:
    """The re-run plans only live files, which no longer hold the rows: its purge still deletes the
    objects the first run's splices replaced (found by the commit id), and verifies."""
    from castable.deployment import erasure

    def stopped(*args: Any, **kwargs: Any) -> None:
        raise CorruptObjectError("the purge did not run")

    request = {"table": table.uri, "predicate": "id IN (10, 2500)", "commit_id": "gdpr-rerun"}
    with pytest.MonkeyPatch.context() as first_run:
        first_run.setattr(erasure, "purge_objects", stopped)
        assert run(aws["erasure"], request)["status"] == "FAILED"
    replaced = castable.maintenance.erase.splices_of(table.store, "gdpr-rerun/splice/").old
    assert replaced and all(table.store.exists(path) for path in replaced), "spliced, not purged"
    assert not list(table.store.list("receipts/")), "no receipt for a run that did not finish"

    d = run(aws["erasure"], request)
    assert d["status"] == "SUCCEEDED", failures(d)
    receipt = json.loads(d["output"])
    assert receipt["verified"] is True and set(replaced) <= set(receipt["objects_deleted"])
    assert [o.key for o in table.store.list("receipts/")] == [receipt["receipt"].removeprefix(table.uri + "/")]
    assert not any(table.store.exists(path) for path in replaced)
    assert ids(table) == [i for i in range(4000) if i not in (10, 2500)]


def test_erasure_workflow_fails_when_the_purge_finds_a_trace(
    aws: dict[str, str], table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No row matches any more, but the byte search of a new object found an erased value: the
    execution ends in ErasureNotVerified, not in a receipt."""
    import castable.maintenance.erase

    finding = "row group 0, column key: statistics holds an erased value"
    monkeypatch.setattr(castable.maintenance.erase, "find_traces", lambda source, size, needles: [finding])
    d = run(aws["erasure"], {"table": table.uri, "predicate": "id = 10", "commit_id": "gdpr-10"})
    assert d["status"] == "FAILED"
    failed = [e for e in history(d) if e["type"] == "ExecutionFailed"]
    assert failed[0]["executionFailedEventDetails"]["error"] == "ErasureNotVerified"
    purge = [
        e for e in history(d) if e["type"] == "TaskStateExited" and e["stateExitedEventDetails"]["name"] == "Purge"
    ]
    traces = json.loads(purge[0]["stateExitedEventDetails"]["output"])["purge"]["traces"]
    assert list(traces.values()) == [[finding]]


def test_maintenance_workflow_compacts_expires_and_collects(aws: dict[str, str], table: Table) -> None:
    for i in range(6):
        table.delete(f"id = {i * 500 + 1}")
    before = ids(table)
    payload = {"table": table.uri, "retain_versions": 1, "retain_hours": None, "grace_hours": 0}
    d = run(aws["maintenance"], payload)
    assert d["status"] == "SUCCEEDED", failures(d)
    out = json.loads(d["output"])
    assert out["groups_compacted"] and out["versions_expired"] and out["objects_removed"] > 0
    latest = load_table(table.store)
    assert ids(table) == before
    assert latest.manifest.tombstones == (), "deleted rows were compacted away"
    assert out["groups_compacted"] == 3, "the three files holding deleted rows were compacted in parallel"
    execution = d["executionArn"].rpartition(":")[2]
    compactions = sorted(c for c in latest.manifest.recent_commits if c.startswith(f"{execution}/compact/"))
    assert compactions == [f"{execution}/compact/{i}" for i in range(3)], "each group commits with an id a retry reuses"


def test_maintenance_workflow_retries_a_conflict_then_succeeds(
    aws: dict[str, str], table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lambdas import maintenance

    calls = {"n": 0}
    original = maintenance.open_table

    def flaky(uri: str) -> Table:
        calls["n"] += 1
        if calls["n"] == 2:  # the first compact attempt loses to a "concurrent writer"
            raise castable.CommitConflictError("injected conflict")
        return original(uri)

    monkeypatch.setattr(maintenance, "open_table", flaky)
    for i in range(3):
        table.delete(f"id = {i * 700 + 3}")
    d = run(
        aws["maintenance"], {"table": table.uri, "retain_versions": None, "retain_hours": None, "grace_hours": None}
    )
    assert d["status"] == "SUCCEEDED", failures(d)
    execution = d["executionArn"].rpartition(":")[2]
    commits = load_table(table.store).manifest.recent_commits
    groups = json.loads(d["output"])["groups_compacted"]
    # plan, each group, the retried group, coalesce, expire, gc
    assert calls["n"] == groups + 5, "the compaction that lost was retried by the state machine"
    assert sum(c.startswith(f"{execution}/compact/") for c in commits) == groups >= 1, "and committed"


def test_tombstone_bursts_start_one_maintenance_run(
    aws: dict[str, str], s3_bucket: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst starts one run per table and window, with the table's URI as input (retention
    from its properties); a table whose schedule is ``none``, or no table at all, starts nothing."""
    import boto3

    from lambdas import trigger
    from lambdas.runtime import maintenance_input

    monkeypatch.setenv("MAINTENANCE_STATE_MACHINE_ARN", aws["maintenance"])
    monkeypatch.setenv("DEBOUNCE_SECONDS", "3600")
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    uri = f"s3://{s3_bucket}/tables/events"
    castable.create_table(uri, EVENTS, storage_options=options)
    never = {"maintenance.schedule": "none"}
    castable.create_table(f"s3://{s3_bucket}/tables/manual", EVENTS, storage_options=options, properties=never)
    sfn = boto3.client("stepfunctions", region_name="us-east-1")

    def burst(n: int) -> dict[str, Any]:
        keys = [f"tables/events/tombstone/2026/11/22/06/{i}.del" for i in range(n)]
        keys += ["tables/events/data/x.parquet", "tables/manual/tombstone/1.del", "tables/not-a-table/tombstone/1.del"]
        return sqs_event(s3_bucket, keys)

    context = type(
        "C",
        (),
        {
            "function_name": "trigger",
            "memory_limit_in_mb": 128,
            "invoked_function_arn": "arn:aws:lambda:us-east-1:1:function:trigger",
            "aws_request_id": "r",
        },
    )()
    first = trigger.handler(burst(20), context)
    second = trigger.handler(burst(5), context)
    assert first["started"] == ["events"]
    assert second["started"] + second["debounced"] == ["events"]  # AWS answers a same-name start idempotently
    executions = sfn.list_executions(stateMachineArn=aws["maintenance"])["executions"]
    (run,) = [e for e in executions if e["name"].startswith("events-tombstones-")]
    assert json.loads(sfn.describe_execution(executionArn=run["executionArn"])["input"]) == maintenance_input(uri)
    assert not any("manual" in e["name"] or "not-a-table" in e["name"] for e in executions)


@pytest.fixture
def shop(s3_bucket: str, s3_endpoint: str) -> castable.Database:
    """A database on S3 with ``orders`` and ``lines`` (two lines per order)."""

    db = castable.create_database(
        f"s3://{s3_bucket}/shop", storage_options={"endpoint_url": s3_endpoint, "region": "us-east-1"}
    )
    db.create_table("orders", EVENTS, primary_key="id").append(events(0, 200))
    lines = pa.schema([pa.field("order_id", pa.int64(), nullable=False), pa.field("qty", pa.int64())])
    db.create_table("lines", lines).append(pa.table({"order_id": [i // 2 for i in range(400)], "qty": [1] * 400}))
    return db


def test_erasure_workflow_erases_across_the_tables_of_a_database(aws: dict[str, str], shop: castable.Database) -> None:
    request = {"database": shop.uri, "tables": {"orders": "id = 42", "lines": "order_id = 42"}, "commit_id": "gdpr-db"}
    d = run(aws["erasure"], request)
    assert d["status"] == "SUCCEEDED", failures(d)
    receipt = json.loads(d["output"])
    assert receipt["database"] == shop.uri and receipt["commit_id"] == "gdpr-db"
    by_table = {r["table"].rsplit("/", 1)[1]: r for r in receipt["tables"]}
    assert set(by_table) == {"orders", "lines"} and all(r["verified"] for r in by_table.values())
    assert by_table["lines"]["rows_erased"] == 2 and by_table["orders"]["rows_erased"] == 1, by_table
    assert all(r["receipt"].startswith(f"{r['table']}/receipts/") for r in by_table.values()), "one kept per table"
    tombstoned = [h for h in shop.refresh().history() if h.commit_id == "gdpr-db/tombstone"]
    assert len(tombstoned) == 1 and set(tombstoned[0].tables) == {"orders", "lines"}, "one commit hid both"
    snap = shop.snapshot()
    assert 42 not in snap.table("orders").to_arrow().column("id").to_pylist()
    assert 42 not in snap.table("lines").to_arrow().column("order_id").to_pylist()


def test_a_dry_run_reports_what_an_erasure_would_erase_and_writes_nothing(
    aws: dict[str, str], table: Table, shop: castable.Database
) -> None:
    before = snapshot_of(table.store)
    request = {"table": table.uri, "predicate": "id IN (10, 2500, 3999)", "commit_id": "gdpr-dry", "dry_run": True}
    d = run(aws["erasure"], request)
    assert d["status"] == "SUCCEEDED", failures(d)
    assert json.loads(d["output"]) == {
        "dry_run": True,
        "commit_id": "gdpr-dry",
        "tables": [{"table": table.uri, "rows": 3, "files": 3}],
        "rows": 3,
        "files": 3,
    }
    assert snapshot_of(table.store) == before, "no tombstone, plan, splice or receipt"
    db_before = snapshot_of(shop.store)
    request = {"database": shop.uri, "tables": {"orders": "id = 42", "lines": "order_id = 42"}, "commit_id": "db-dry"}
    d = run(aws["erasure"], {**request, "dry_run": True})
    assert d["status"] == "SUCCEEDED", failures(d)
    preview = json.loads(d["output"])
    assert {t["table"].rsplit("/", 1)[1]: t["rows"] for t in preview["tables"]} == {"orders": 1, "lines": 2}
    assert snapshot_of(shop.store) == db_before
    d = run(aws["erasure"], {**request, "dry_run": "yes"})
    assert d["status"] == "FAILED" and snapshot_of(shop.store) == db_before, "a malformed flag erases nothing"


def test_erasure_workflow_refuses_a_table_name_outside_the_database(
    aws: dict[str, str], shop: castable.Database
) -> None:
    version = shop.version
    d = run(aws["erasure"], {"database": shop.uri, "tables": {"../orders": "id = 1"}, "commit_id": "bad"})
    assert d["status"] == "FAILED"
    assert "not a table name inside the database" in json.dumps(failures(d))
    assert shop.refresh().version == version


TRANSIENT = {
    "CommitConflictError",
    "CommitStateUnknownError",
    "StoreError",
    "StoreUnavailableError",
    "Lambda.TooManyRequestsException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
    "Sandbox.Timedout",
}
"""What every task retries. Step Functions matches an error's exact class name, never a base class."""
NOT_TRANSIENT = {"ObjectNotFoundError", "PreconditionFailedError", "ConcurrentModificationError", "PartTooSmallError"}


def _tasks(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in states.items():
        if state["Type"] == "Task":
            yield name, state
        if state["Type"] == "Map":
            yield from _tasks(state["ItemProcessor"]["States"])


@pytest.mark.parametrize("machine", ["erasure", "maintenance"])
def test_every_task_retries_every_transient_error_by_its_exact_name(machine: str) -> None:
    from castable.store import StoreError

    subclasses = {c.__name__ for c in StoreError.__subclasses__()}
    assert subclasses <= TRANSIENT | NOT_TRANSIENT, "decide whether a new StoreError subclass is transient"
    definition = json.loads((ROOT / "statemachines" / f"{machine}.asl.json").read_text())
    for name, task in _tasks(definition["States"]):
        retried = {e for r in task.get("Retry", []) for e in r["ErrorEquals"]}
        assert retried >= TRANSIENT, f"{name} does not retry {sorted(TRANSIENT - retried)}"


@pytest.mark.slow
def test_erasure_and_maintenance_workflows_finish_over_a_lossy_network(aws: dict[str, str], table: Table) -> None:
    """15% of S3's write answers lost after it applied the write, 5% SlowDown, 5% of GETs broken
    mid-body, in every function of both workflows (Step Functions' own reads and writes of a
    Distributed Map's items and results are spared: AWS retries those itself): each run succeeds,
    erases exactly its rows, verifies, and compacts without changing a row."""
    with network(Faults(lose=0.15, slow_down=0.05, reset_body=0.05, seed=49)) as injected:
        before = dict(injected)
        d = run(aws["erasure"], {"table": table.uri, "predicate": "id IN (7, 1500)", "commit_id": "lossy-1"})
        assert d["status"] == "SUCCEEDED", failures(d)
        receipt = json.loads(d["output"])
        assert receipt["verified"] is True and receipt["rows_erased"] == 2, receipt
        for i in range(4):
            table.delete(f"id = {i * 1000 + 3}")
        payload = {"table": table.uri, "retain_versions": 1, "retain_hours": None, "grace_hours": 0}
        m = run(aws["maintenance"], payload)
        assert m["status"] == "SUCCEEDED", failures(m)
    assert injected["lose"] > before.get("lose", 0) and injected["reset_body"] > before.get("reset_body", 0)
    gone = {7, 1500, 3, 1003, 2003, 3003}
    assert ids(table) == [i for i in range(4000) if i not in gone]
    assert load_table(table.store).manifest.tombstones == ()


def test_the_schedule_maintains_the_tables_due_and_only_those(aws: dict[str, str], s3_endpoint: str) -> None:
    """The maintain-due workflow, as the schedule starts it: tables created with no deploy are
    found by listing the bucket; those whose schedule fell due in the window get a maintenance
    run (which compacts them), the others none; a retried start of the same tick starts no run
    twice."""
    import boto3

    bucket, options = aws["bucket"], {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    hourly, never = {"maintenance.schedule": "rate(1 hour)"}, {"maintenance.schedule": "none"}
    nightly = {"maintenance.schedule": "cron(0 3 * * ? *)"}
    created = {}
    for name, props in [("hourly", hourly), ("nightly", nightly), ("never", never)]:
        created[name] = castable.create_table(
            f"s3://{bucket}/tables/{name}", EVENTS, storage_options=options, properties=props
        )
        for i in range(3):
            created[name].append(events(10 * i, 10 * i + 10))
    db = castable.create_database(f"s3://{bucket}/databases/shop", storage_options=options)
    db.create_table("orders", EVENTS, properties=hourly).append(events(0, 5))
    tick = {"now": "2026-11-29T03:00:00Z", "every_minutes": 60}
    d = run(aws["maintain-due"], tick, seconds=120)
    assert d["status"] == "SUCCEEDED", failures(d)
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    runs = {e["name"]: e for e in sfn.list_executions(stateMachineArn=aws["maintenance"])["executions"]}
    assert sorted(n.rpartition("-")[0] for n in runs) == ["hourly", "nightly", "shop--orders"]
    assert "nightly-202611290300" in runs, "a cron table is named by the minute it fell due"
    for run_ in runs.values():
        assert sfn.describe_execution(executionArn=run_["executionArn"])["status"] == "SUCCEEDED"
    assert len(load_table(created["hourly"].store).manifest.data_files) == 1, "compacted"
    assert len(load_table(created["never"].store).manifest.data_files) == 3, "not maintained"
    again = run(aws["maintain-due"], tick, seconds=120)
    assert again["status"] == "SUCCEEDED", failures(again)
    assert len(sfn.list_executions(stateMachineArn=aws["maintenance"])["executions"]) == len(runs), "none twice"


SCHEDULE_SIZES = (40, 160)


def test_the_schedules_history_and_payloads_do_not_grow_with_the_tables(aws: dict[str, str], s3_endpoint: str) -> None:
    """Copies of one due table, first 40 then 160: discovery lists and reads them all in one
    invocation, and the Distributed Map runs a child per table while the parent's history (13
    events) and its largest payload (but for the digits of two counts) stay the same at both
    sizes, so Step Functions' limits hold at any number of tables. The children run a stand-in
    for the maintenance workflow, which the tests above run for real; ``python -m bench
    workflow-scale`` runs thousands of tables."""
    runs = []
    for tables in SCHEDULE_SIZES:
        due_tables(aws["bucket"], s3_endpoint, tables)
        done = schedule_run(aws["bucket"], aws["maintenance-function"])
        assert done.served == done.due == done.children == tables
        runs.append(done)
    small, large = runs
    assert small.events == large.events == 13, "the children's histories are their own"
    digits = len(str(SCHEDULE_SIZES[1])) - len(str(SCHEDULE_SIZES[0]))
    assert large.largest == small.largest + 2 * digits, "only the two counts (served, due) grow, by their digits"
