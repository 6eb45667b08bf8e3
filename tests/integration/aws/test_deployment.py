"""Tables as data: the schedules a table's properties give, the tables a deployment finds in its
bucket, where landed files go, the route function's message groups, and the migration of a
per-table deployment's file.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/deployment/test_deployment.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import boto3
import pytest
from helpers.aws_stubs import sqs_event
from helpers.tables import EVENTS, events
from unit.deployment.test_deployment import T0

import castable
from castable.deployment.layout import landing, served_tables
from castable.store import S3Store


def test_the_deployment_finds_its_tables_and_their_schedules_as_they_come_and_go(
    s3_bucket: str, s3_endpoint: str
) -> None:
    """Tables and database members anywhere under the bucket's roots, with their properties; a
    folder holding no table (a create that did not commit, a table dropped) is not one."""
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    bucket = S3Store(s3_bucket, "", boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1"))
    assert list(served_tables(bucket)) == []
    castable.create_table(f"s3://{s3_bucket}/tables/a", EVENTS, storage_options=options)
    hourly = {"maintenance.schedule": "rate(1 hour)"}
    castable.create_table(f"s3://{s3_bucket}/tables/b", EVENTS, storage_options=options, properties=hourly)
    db = castable.create_database(f"s3://{s3_bucket}/databases/shop", storage_options=options)
    db.create_table("orders", EVENTS, properties={"maintenance.schedule": "none"})
    db.create_table("lines", EVENTS)
    bucket.put("tables/stray/data/x.parquet", b"not a table")
    found = {t.key: t for t in served_tables(bucket)}
    assert sorted(found) == ["a", "b", "shop/lines", "shop/orders"]
    assert found["b"].uri == f"s3://{s3_bucket}/tables/b"
    assert found["shop/orders"].due(T0, T0 + timedelta(days=30)) is None
    assert found["b"].due(T0, T0 + timedelta(hours=1)) is not None
    db.drop_table("orders")
    assert sorted(t.key for t in served_tables(bucket)) == ["a", "b", "shop/lines"]
    assert landing(bucket, "a") is not None and landing(bucket, "a").table is not None  # type: ignore[union-attr]
    assert landing(bucket, "shop").database is not None  # type: ignore[union-attr]
    assert landing(bucket, "stray") is None


def test_the_route_function_gives_each_message_its_table_as_group(
    s3_bucket: str, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every event goes on, unchanged, with message group ``<name>``; events for no table go to
    group ``-`` (the ingest function skips them)."""
    from lambdas import route

    sqs = boto3.client("sqs", endpoint_url=s3_endpoint, region_name="us-east-1")
    queue = sqs.create_queue(QueueName=f"ingest-{s3_bucket}")["QueueUrl"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("CASTABLE_INGEST_QUEUE_URL", queue)
    route._client.cache_clear()
    keys = [f"landing/t{i % 3}/f{i}.parquet" for i in range(23)] + ["tables/x/_latest_manifest"]
    event = sqs_event(s3_bucket, keys, bodies=["not json"])
    context = type("C", (), {"function_name": "route", "memory_limit_in_mb": 256, "aws_request_id": "r"})()
    context.invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:route"  # type: ignore[attr-defined]
    assert route.handler(event, context) == {"batchItemFailures": []}
    got = []
    while messages := sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
    ).get("Messages", []):
        got += [(m["Attributes"]["MessageGroupId"], m["Body"]) for m in messages]
        sqs.delete_message_batch(
            QueueUrl=queue,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )
    sent = {r["body"]: r for r in event["Records"]}
    assert len(got) == len(sent) and {body for _, body in got} == set(sent), "every body, unchanged"
    groups = {json.loads(body)["detail"]["object"]["key"] if body != "not json" else body: g for g, body in got}
    assert all(groups[k] == k.split("/")[1] for k in keys[:-1])
    assert groups["tables/x/_latest_manifest"] == groups["not json"] == "-"
    route._client.cache_clear()


def test_the_migration_moves_a_per_table_files_settings_into_its_tables(
    s3_bucket: str,
    s3_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each listed table gets the properties its entry gave; the file loses its tables and keeps
    the rest, with the ingest concurrency the tables had together; a run with a table missing
    changes the tables it can and leaves the file; running it again changes nothing more."""
    from infra.config import load
    from infra.migrate import main

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    events_table = castable.create_table(
        f"s3://{s3_bucket}/tables/events", EVENTS, primary_key="id", storage_options=options
    )
    events_table.append(events(0, 3))
    db = castable.create_database(f"s3://{s3_bucket}/databases/shop", storage_options=options)
    db.create_table("orders", EVENTS, primary_key="id")
    doc = {
        "tables": [
            {"name": "events", "schedule": "cron(0 3 * * ? *)", "retain_versions": 50, "grace_hours": 2},
            {"name": "orders", "ingest_mode": "upsert", "op_column": "op", "ingest_concurrency": 4},
        ],
        "databases": [{"name": "shop", "tables": [{"name": "orders", "retain_hours": 48}], "ingest_memory_mb": 2048}],
        "versioned": True,
    }
    path = tmp_path / "castable.json"
    path.write_text(json.dumps(doc))
    assert main([str(path), s3_bucket]) == 1, "tables/orders is missing"
    assert json.loads(path.read_text()) == doc, "the file is kept until every table is migrated"
    assert "orders: no table at" in capsys.readouterr().out
    castable.create_table(f"s3://{s3_bucket}/tables/orders", EVENTS, primary_key="id", storage_options=options)
    assert main([str(path), s3_bucket]) == 0
    props = castable.open_table(f"s3://{s3_bucket}/tables/events", storage_options=options).properties
    assert props == {
        "maintenance.schedule": "cron(0 3 * * ? *)",
        "history.retain-versions": "50",
        "gc.orphan-grace-seconds": "7200",
    }
    orders = castable.open_table(f"s3://{s3_bucket}/tables/orders", storage_options=options).settings
    assert (orders.ingest_mode, orders.ingest_op_column) == ("upsert", "op")
    member = castable.open_database(f"s3://{s3_bucket}/databases/shop", storage_options=options).table("orders")
    assert member.properties == {"history.retain-for-seconds": str(48 * 3600), "maintenance.schedule": "rate(6 hours)"}
    migrated = json.loads(path.read_text())
    assert migrated == {"versioned": True, "ingest_concurrency": 2 + 4 + 2, "ingest_memory_mb": 2048}
    assert load(path).ingest_concurrency == 8
    version = castable.open_table(f"s3://{s3_bucket}/tables/events", storage_options=options).version
    path.write_text(json.dumps(doc))
    assert main([str(path), s3_bucket]) == 0
    assert castable.open_table(f"s3://{s3_bucket}/tables/events", storage_options=options).version == version
