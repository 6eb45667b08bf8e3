"""Every Lambda handler from the bundle, run under the IAM policies the synthesised template gives
its role, against S3 that enforces them (helpers/iam.py): each path works under its own role,
and each role is refused what it must not do."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pytest
from botocore.exceptions import ClientError
from helpers.aws_stubs import api_gateway_event, sqs_event
from helpers.bundles import invoke
from helpers.cdk import synth
from helpers.iam import IamFront, Need, Principal, Template, principal_of, role_principal
from helpers.rest_catalog import Served, held_commit
from helpers.s3servers import new_bucket
from helpers.tables import EVENTS, events, parquet_bytes

import castable
from castable.format.layout import manifest_key
from castable.format.properties import AFTER_COMMIT
from castable.format.segment import data_table, encode
from castable.ops.register import describe_data_file
from infra.stack import ERASURE_RESULTS, MAINTENANCE_RESULTS

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("bundle")]


@dataclass
class Deployment:
    """The synthesised stack resolved for one bucket on the moto server, behind an IAM front."""

    template: Template
    front: IamFront
    bucket: str
    moto: str

    @property
    def admin(self) -> dict[str, str]:
        """Storage options that reach moto directly (setup, as an administrator would)."""
        return {"endpoint_url": self.moto, "region": "us-east-1"}

    def run(self, bundle: Path, function: str, *events: dict[str, Any]) -> list[dict[str, Any]]:
        """Invoke the function whose logical id starts with ``function`` on each event, in one
        bundle process with the function's deployed environment and its role's credentials."""
        fn = self.template.function(function)
        handler = self.template.resources[fn]["Properties"]["Handler"]
        env = {**self.template.environment(fn), **self.front.add(principal_of(self.template, function))}
        outcomes: list[dict[str, Any]] = invoke(bundle, [{"handler": handler, "event": e} for e in events], env)[
            "calls"
        ]
        for outcome in outcomes:
            assert "errorType" not in outcome, f"{function}: {outcome.get('trace')}"
        return [o["result"] for o in outcomes]

    def s3_as(self, who: str | Principal) -> Any:
        """An S3 client calling through the front as a function's role, a role by logical id, or
        any principal."""
        if isinstance(who, Principal):
            principal = who
        elif who in self.template.resources:
            principal = role_principal(self.template, who)
        else:
            principal = principal_of(self.template, who)
        env = self.front.add(principal)
        return boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            region_name="us-east-1",
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )

    def refused(self) -> list[str]:
        """The refusals so far, readable, and forget them."""
        out = [
            f"{r.principal}: {r.method} {r.path} needs {r.need.action} on {r.need.resource}"
            for r in self.front.refusals
        ]
        self.front.refusals.clear()
        return out


@pytest.fixture(scope="module")
def synthesised(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return synth(tmp_path_factory.mktemp("cdk"), icebergCatalog=True)


def deploy(raw: dict[str, Any], s3_endpoint: str, *, versioned: bool) -> Iterator[Deployment]:
    """The template resolved for a new bucket (with versioning turned on if ``versioned``), served
    behind an IAM front."""
    bucket = new_bucket(s3_endpoint, versioning="Enabled" if versioned else None)
    machine_id = next(
        k
        for k, v in raw["Resources"].items()
        if v["Type"] == "AWS::StepFunctions::StateMachine" and k.startswith("MaintenanceWorkflow")
    )
    machine = boto3.client("stepfunctions", endpoint_url=s3_endpoint, region_name="us-east-1").create_state_machine(
        name=f"maintenance-{bucket}",
        definition='{"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}',
        roleArn="arn:aws:iam::123456789012:role/castable",
    )["stateMachineArn"]
    template = Template(raw, bucket, {machine_id: machine})
    front = IamFront(s3_endpoint, bucket, template.bucket_policy())
    with front.serving():
        yield Deployment(template, front, bucket, s3_endpoint)


@pytest.fixture(scope="module")
def deployment(synthesised: dict[str, Any], s3_endpoint: str) -> Iterator[Deployment]:
    yield from deploy(synthesised, s3_endpoint, versioned=False)


@pytest.fixture(scope="module")
def versioned(synthesised: dict[str, Any], s3_endpoint: str) -> Iterator[Deployment]:
    """The same stack on a bucket with versioning: deletes take every version, which needs more of IAM."""
    yield from deploy(synthesised, s3_endpoint, versioned=True)


def events_table(d: Deployment) -> str:
    """The ``events`` table of the deployment, with 200 rows in two files."""
    uri = f"s3://{d.bucket}/tables/events"
    table = castable.create_table(uri, EVENTS, primary_key="id", storage_options=d.admin)
    table.append(events(0, 100))
    table.append(events(100, 200))
    return uri


@pytest.fixture(scope="module")
def events_uri(deployment: Deployment) -> str:
    return events_table(deployment)


@pytest.fixture(scope="module")
def shop(deployment: Deployment) -> castable.Database:
    """The ``shop`` database of the deployment, with its member table ``orders``."""
    uri = f"s3://{deployment.bucket}/databases/shop"
    db = castable.create_database(uri, storage_options=deployment.admin)
    db.create_table("orders", EVENTS, primary_key="id")
    return db


def _ids(uri: str, options: dict[str, str]) -> list[int]:
    return sorted(castable.open_table(uri, storage_options=options).scan(["id"]).to_arrow().column("id").to_pylist())


def _planned(d: Deployment, workflow: str, plan: dict[str, Any], results: str) -> list[dict[str, Any]]:
    """What a workflow's Distributed Map does with a work plan, under the state machine's role:
    read the plan object (its ItemReader) and write a result (its ResultWriter)."""
    (role,) = [r for r in d.template.resources if r.startswith(f"{workflow}WorkflowRole") and "Policy" not in r]
    s3 = d.s3_as(role)
    items: list[dict[str, Any]] = json.loads(s3.get_object(Bucket=plan["bucket"], Key=plan["key"])["Body"].read())
    s3.put_object(Bucket=plan["bucket"], Key=f"{results}run-1/manifest.json", Body=b"{}")
    assert d.refused() == []
    return items


def run_table_functions(bundle: Path, d: Deployment, uri: str) -> None:
    """Commit, tombstone, then the erasure steps, then the maintenance steps, as the workflows
    chain them, each under its own role: nothing refused, every row where it should be."""
    table = castable.open_table(uri, storage_options=d.admin)
    before = _ids(uri, d.admin)
    table.store.put("data/ext/part-0.parquet", parquet_bytes(events(1000, 1010)))

    d.run(bundle, "CommitFunction", {"table": uri, "files": ["data/ext/part-0.parquet"], "commit_id": "emr-1"})
    (tombstoned,) = d.run(
        bundle, "TombstoneFunction", {"table": uri, "predicate": "id = 50 or id < 5", "commit_id": "er-1/tombstone"}
    )
    step = {"table": uri, "predicate": "id = 50"}
    (plan,) = d.run(bundle, "ErasureFunction", {"action": "plan", "commit_id": "er-1", "items": [step]})
    planned = _planned(d, "Erasure", plan, ERASURE_RESULTS)
    assert len(planned) == plan["files"]
    d.run(bundle, "SpliceFunction", *({**step, "commit_id": "er-1", "file": f["file"]} for f in planned))
    purge = {"action": "purge", **step, "plan_uri": plan["uri"], "version": tombstoned["version"], "commit_id": "er-1"}
    _, verified = d.run(bundle, "ErasureFunction", purge, {"action": "verify", **step})
    assert verified["verified"], verified
    receipt = {"action": "receipt", "table": uri, "commit_id": "er-1", "receipt": {**step, **verified}}
    (kept,) = d.run(bundle, "ErasureFunction", receipt)
    assert kept["receipt"].startswith(f"{uri}/receipts/")
    (plan,) = d.run(bundle, "MaintenanceFunction", {"action": "plan", "table": uri, "run": "m-1"})
    groups = _planned(d, "Maintenance", plan, MAINTENANCE_RESULTS)
    assert len(groups) == plan["groups"]
    d.run(
        bundle,
        "MaintenanceFunction",
        *({"action": "compact", "table": uri, "files": g["files"]} for g in groups),
        {"action": "coalesce", "table": uri},
        {"action": "expire", "table": uri, "retain_versions": 1, "retain_hours": 0},
        {"action": "gc", "table": uri, "grace_hours": 0},
    )
    assert d.refused() == []
    assert _ids(uri, d.admin) == sorted({*before, *range(1000, 1010)} - {50, *range(5)})


def test_table_functions_work_under_their_own_roles(bundle: Path, deployment: Deployment, events_uri: str) -> None:
    run_table_functions(bundle, deployment, events_uri)


def test_table_functions_work_under_their_own_roles_in_a_versioned_bucket(bundle: Path, versioned: Deployment) -> None:
    """Deletes there list and delete every version of an object, so no noncurrent copy is left."""
    run_table_functions(bundle, versioned, events_table(versioned))
    s3 = boto3.client("s3", endpoint_url=versioned.moto, region_name="us-east-1")
    pages = s3.get_paginator("list_object_versions").paginate(Bucket=versioned.bucket, Prefix="tables/events/")
    left = {
        v["Key"]
        for page in pages
        for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        if not v["IsLatest"] and not v["Key"].endswith("_latest_manifest")
    }
    assert left == set()


def test_ingest_of_a_table_under_its_role_with_duplicate_and_missing_keys(
    bundle: Path, deployment: Deployment, events_uri: str
) -> None:
    d, uri = deployment, events_uri
    before = _ids(uri, d.admin)
    s3 = boto3.client("s3", endpoint_url=d.moto, region_name="us-east-1")
    s3.put_object(Bucket=d.bucket, Key="landing/events/a.parquet", Body=parquet_bytes(events(5000, 5005)))
    landed = sqs_event(d.bucket, ["landing/events/a.parquet"])
    never = sqs_event(d.bucket, ["landing/events/never-landed.parquet"])
    results = d.run(bundle, "IngestFunction", landed, landed, never)
    assert results == [{"batchItemFailures": []}] * 3, "a duplicate delivery and a vanished key are not failures"
    assert d.refused() == []
    assert _ids(uri, d.admin) == sorted({*before, *range(5000, 5005)})


def test_ingest_of_a_database_batch_under_its_role(
    bundle: Path, deployment: Deployment, shop: castable.Database
) -> None:
    d, db = deployment, shop
    before = db.refresh().snapshot().table("orders").count()
    s3 = boto3.client("s3", endpoint_url=d.moto, region_name="us-east-1")
    s3.put_object(Bucket=d.bucket, Key="landing/shop/b1/orders.parquet", Body=parquet_bytes(events(1, 4)))
    manifest = {"tables": {"orders": ["orders.parquet"]}}
    s3.put_object(Bucket=d.bucket, Key="landing/shop/b1/batch.manifest.json", Body=json.dumps(manifest).encode())
    batch = sqs_event(d.bucket, ["landing/shop/b1/batch.manifest.json"])
    assert d.run(bundle, "IngestFunction", batch, batch) == [{"batchItemFailures": []}] * 2
    assert d.refused() == []
    assert db.refresh().snapshot().table("orders").count() == before + 3


def test_tables_created_after_the_stack_are_ingested_and_maintained_under_the_roles(
    bundle: Path, deployment: Deployment, events_uri: str
) -> None:
    """No deploy between: tables the library creates now are ingested from ``landing/<name>/``
    by the shared function, as their properties say, and fall due on their schedules. A flood
    of bad files for one table, and files for a name that is no table, leave another table's
    file to land in the same batch."""
    d = deployment
    schedule = {"maintenance.schedule": "rate(1 hour)"}
    late = castable.create_table(
        f"s3://{d.bucket}/tables/late", EVENTS, primary_key="id", storage_options=d.admin, properties=schedule
    )
    unmaintained = {"maintenance.schedule": "none"}
    castable.create_table(f"s3://{d.bucket}/tables/flooded", EVENTS, storage_options=d.admin, properties=unmaintained)
    s3 = boto3.client("s3", endpoint_url=d.moto, region_name="us-east-1")
    s3.put_object(Bucket=d.bucket, Key="landing/late/a.parquet", Body=parquet_bytes(events(7000, 7005)))
    bad = [f"landing/flooded/bad-{i}.parquet" for i in range(20)] + ["landing/nosuch/x.parquet"]
    for key in bad:
        s3.put_object(Bucket=d.bucket, Key=key, Body=b"not parquet")
    (result,) = d.run(bundle, "IngestFunction", sqs_event(d.bucket, [*bad[:10], "landing/late/a.parquet", *bad[10:]]))
    assert result == {"batchItemFailures": []}
    assert d.refused() == []
    assert _ids(late.uri, d.admin) == list(range(7000, 7005))
    failed = {o["Key"] for o in s3.list_objects_v2(Bucket=d.bucket, Prefix="landing-failed/")["Contents"]}
    assert {f"landing-failed/{k}" for k in bad} <= failed
    reason = s3.get_object(Bucket=d.bucket, Key="landing-failed/landing/nosuch/x.parquet.reason.json")["Body"].read()
    assert b"no table tables/nosuch nor database databases/nosuch" in reason
    tick = {"action": "discover", "bucket": d.bucket, "now": "2026-11-29T06:00:00Z", "every_minutes": 60}
    (found,) = d.run(bundle, "MaintenanceFunction", {**tick, "run": "tick-1"})
    due = _planned(d, "MaintainDue", found, MAINTENANCE_RESULTS)
    names = {item["table"].rpartition("/")[2] for item in due}
    assert "late" in names and "flooded" not in names, names
    assert all("202611290501" <= item["name"][-12:] <= "202611290600" for item in due), "named when due"


def test_trigger_starts_maintenance_under_its_role(bundle: Path, deployment: Deployment, events_uri: str) -> None:
    d = deployment
    event = sqs_event(d.bucket, ["tables/events/tombstone/2026/11/24/01/x.del"])
    (result,) = d.run(bundle, "TriggerFunction", event)
    assert result == {"started": ["events"], "debounced": []}
    assert d.refused() == []


def test_catalog_publishes_and_registers_in_glue_under_its_role(
    bundle: Path, deployment: Deployment, shop: castable.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalog function publishes a table with ``publish.iceberg`` on and registers it in the
    deployment's Glue database; it skips a table without it; its role writes Iceberg metadata
    and nothing else of a table."""
    d = deployment
    monkeypatch.setenv(AFTER_COMMIT, "false")  # as every function of the deployment: the catalog publishes
    uri = f"s3://{d.bucket}/tables/catalogued"
    table = castable.create_table(uri, EVENTS, primary_key="id", storage_options=d.admin)
    table.append(events(0, 10))
    table.set_properties({"publish.iceberg": "true"})
    table.delete("id < 4")
    glue = boto3.client("glue", endpoint_url=d.moto, region_name="us-east-1")
    database = d.template.environment(d.template.function("CatalogFunction"))["GLUE_DATABASE"]
    with contextlib.suppress(glue.exceptions.AlreadyExistsException):
        glue.create_database(DatabaseInput={"Name": database})
    crm = castable.create_database(f"s3://{d.bucket}/databases/crm", storage_options=d.admin)
    people = crm.create_table("people", EVENTS, primary_key="id", properties={"publish.iceberg": True})
    people.append(events(0, 5))
    keys = [f"tables/catalogued/{manifest_key(v)}" for v in (2, 3)] + ["databases/shop/orders/manifest/v1.json"]
    keys.append(f"databases/crm/people/{manifest_key(1)}")
    (result,) = d.run(bundle, "CatalogFunction", sqs_event(d.bucket, keys))
    assert result["batchItemFailures"] == [] and result["skipped"] == ["shop/orders"]
    assert [(p["table"], p["version"], p["glue_table"]) for p in result["published"]] == [
        ("catalogued", 3, f"{database}.catalogued"),
        ("crm/people", 1, f"{database}.crm__people"),
    ]
    assert d.refused() == []
    held = glue.get_table(DatabaseName=database, Name="catalogued")["Table"]["Parameters"]["metadata_location"]
    assert held == f"{uri}/metadata/v3.metadata.json"
    catalog = d.s3_as("CatalogFunction")
    with pytest.raises(ClientError, match="AccessDenied"):
        catalog.put_object(Bucket=d.bucket, Key="tables/catalogued/data/x.parquet", Body=b"x")
    with pytest.raises(ClientError, match="AccessDenied"):
        catalog.delete_object(Bucket=d.bucket, Key="tables/catalogued/metadata/v3.metadata.json")
    assert len(d.refused()) == 2


def test_the_iceberg_rest_catalog_serves_engines_under_its_role(bundle: Path, deployment: Deployment) -> None:
    """The Iceberg REST catalog function, sent API Gateway's proxy events: its namespaces are the
    deployment's tables and databases; it creates a table and commits an engine's append (the
    commit pyiceberg built, its files written as the engine's own) under its own role, which S3
    refuses nothing; castable reads the rows."""
    d = deployment
    fn = "IcebergCatalogIcebergRestFunction"
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    create = {"name": "ice", "schema": schema, "stage-create": False}
    config, tops, created, missing = d.run(
        bundle,
        fn,
        api_gateway_event("GET", "/v1/config"),
        api_gateway_event("GET", "/v1/namespaces"),
        api_gateway_event("POST", "/v1/namespaces/tables/tables", create),
        api_gateway_event("GET", "/v1/namespaces/landing/tables"),
    )
    assert (
        config["statusCode"] == 200
        and "POST /v1/{prefix}/transactions/commit" in json.loads(config["body"])["endpoints"]
    )
    assert json.loads(tops["body"]) == {"namespaces": [["tables"], ["databases"]]}
    assert created["statusCode"] == 200, (created["body"], d.refused())
    assert missing["statusCode"] == 404
    engine = Served(f"s3://{d.bucket}", d.admin)  # the engine's side: it writes its files with its own rights
    try:
        commit = held_commit(engine.client().load_table("tables.ice"), lambda t: t.append(pa.table({"id": [1, 2, 3]})))
    finally:
        engine.close()
    (landed, loaded) = d.run(
        bundle,
        fn,
        api_gateway_event("POST", "/v1/namespaces/tables/tables/ice", commit),
        api_gateway_event("GET", "/v1/namespaces/tables/tables/ice"),
    )
    assert landed["statusCode"] == 200, landed["body"]
    assert json.loads(loaded["body"])["metadata"]["current-snapshot-id"] == 1
    table = castable.open_table(f"s3://{d.bucket}/tables/ice", storage_options=d.admin)
    assert sorted(table.to_arrow()["id"].to_pylist()) == [1, 2, 3]
    assert d.refused() == []


def test_a_large_catalog_answer_is_compressed_or_refused_whole() -> None:
    """Lambda returns at most 6 MB: a larger answer goes gzip-compressed to a client that
    accepts it, and is refused with a clear 500 to one that does not, never cut short: the
    catalog's application through Mangum, as the handler runs it."""
    from mangum import Mangum

    from castable.catalog import Catalog, Request, Response, Warehouse, application
    from lambdas.iceberg_rest import ANSWER_LIMIT, within_limit

    answers: dict[str, Any] = {
        "big": {"snapshots": [{"snapshot-id": i, "manifest-list": f"s3://b/t/{i}.avro"} for i in range(120_000)]},
        "small": {"a": 1},
    }

    class Answering(Catalog):
        def handle(self, request: Request) -> Response:
            return Response(200, answers[request.path.rsplit("/", 1)[-1]])

    adapter = Mangum(application(Answering(Warehouse.at("/nowhere"))), lifespan="off")

    def run(name: str, encodings: str) -> dict[str, Any]:
        event = api_gateway_event("GET", f"/v1/namespaces/t/tables/{name}")
        event["headers"]["Accept-Encoding"] = encodings
        return within_limit(adapter(event, object()))  # type: ignore[arg-type]

    assert len(json.dumps(answers["big"])) > ANSWER_LIMIT
    packed = run("big", "gzip, deflate")
    assert packed["headers"]["content-encoding"] == "gzip" and len(json.dumps(packed)) < ANSWER_LIMIT
    assert packed["isBase64Encoded"] and json.loads(gzip.decompress(base64.b64decode(packed["body"]))) == answers["big"]
    refused = run("big", "identity")
    assert refused["statusCode"] == 500 and "6 MB" in json.loads(refused["body"])["error"]["message"]
    small = run("small", "gzip")
    assert (small["statusCode"], json.loads(small["body"]), small["isBase64Encoded"]) == (200, {"a": 1}, False)


ADMINISTRATOR = Principal(
    "Administrator",
    {"admin": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}},
)


@pytest.mark.parametrize(
    ("role", "log", "kind"),
    [
        ("IngestFunction", "tables/events/", "pointer"),
        ("IngestFunction", "tables/events/", "manifest"),
        ("CommitFunction", "tables/events/", "pointer"),
        ("TombstoneFunction", "tables/events/", "manifest"),
        ("MaintenanceFunction", "tables/events/", "pointer"),
        ("IngestFunction", "databases/shop/_database/", "pointer"),
        ("IngestFunction", "databases/shop/orders/", "manifest"),
        (ADMINISTRATOR, "tables/events/", "pointer"),
        (ADMINISTRATOR, "databases/shop/orders/", "manifest"),
    ],
)
def test_pointers_and_manifests_are_written_only_by_compare_and_swap(
    deployment: Deployment, events_uri: str, shop: castable.Database, role: str | Principal, log: str, kind: str
) -> None:
    """Every role may write these keys conditionally (the stale condition below fails with 412,
    after IAM let it through) and none may overwrite them unconditionally: the bucket policy
    refuses it to every principal, an administrator included."""
    d = deployment
    admin = boto3.client("s3", endpoint_url=d.moto, region_name="us-east-1")
    if kind == "pointer":
        key, stale = f"{log}_latest_manifest", {"IfMatch": '"0"'}
    else:
        key = admin.list_objects_v2(Bucket=d.bucket, Prefix=f"{log}manifest/")["Contents"][-1]["Key"]
        stale = {"IfNoneMatch": "*"}
    s3 = d.s3_as(role)
    with pytest.raises(ClientError) as conditional:
        s3.put_object(Bucket=d.bucket, Key=key, Body=b"{}", **stale)
    assert conditional.value.response["Error"]["Code"] == "PreconditionFailed"
    assert d.refused() == []
    with pytest.raises(ClientError, match="AccessDenied"):
        s3.put_object(Bucket=d.bucket, Key=key, Body=b"{}")
    with pytest.raises(ClientError, match="AccessDenied"):
        s3.copy_object(Bucket=d.bucket, Key=key, CopySource={"Bucket": d.bucket, "Key": key})
    assert len(d.refused()) == 2


def test_the_emr_job_role_writes_data_files_and_commits_only_through_the_commit_function(
    bundle: Path, deployment: Deployment, events_uri: str
) -> None:
    d = deployment
    role = next(
        k for k, v in d.template.resources.items() if v["Type"] == "AWS::IAM::Role" and k.startswith("EmrJobRole")
    )
    s3 = d.s3_as(role)
    body = parquet_bytes(events(5000, 5002))
    keys = [f"data/emr/run-1/part-{i}.parquet" for i in range(100)]
    for key in keys:
        s3.put_object(Bucket=d.bucket, Key=f"tables/events/{key}", Body=body)
    # the job's file list, written as the job role, read by the commit function under its own,
    # which checks the 100 entries of one directory by listing it
    table = castable.open_table(events_uri, storage_options=d.admin)
    entry, _ = describe_data_file(table.store, keys[0], table.schema)
    entries = [replace(entry, path=key) for key in keys]
    listed = "data/_file_lists/emr-1.arrow"
    s3.put_object(
        Bucket=d.bucket, Key=f"tables/events/{listed}", Body=encode(data_table(entries, table.schema), "data")
    )
    event = {"table": events_uri, "file_list": listed, "commit_id": "emr-list-1", "verify": "footer"}
    (committed,) = d.run(bundle, "CommitFunction", event)
    assert committed["summary"]["files_added"] == 100
    assert s3.list_objects_v2(Bucket=d.bucket, Prefix="tables/events/manifest/")["KeyCount"] > 0
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket=d.bucket, Key="tables/events/manifest/v99999999999999999999.json")
    assert missing.value.response["Error"]["Code"] == "NoSuchKey", "the probe for a newer version sees a 404"
    assert d.refused() == []
    for write in (
        lambda: s3.put_object(Bucket=d.bucket, Key="tables/events/_latest_manifest", Body=b"{}", IfMatch='"0"'),
        lambda: s3.put_object(Bucket=d.bucket, Key="tables/events/tombstone/x.del", Body=b""),
        lambda: s3.put_object(Bucket=d.bucket, Key="landing/events/x.parquet", Body=b""),
        lambda: s3.delete_object(Bucket=d.bucket, Key="tables/events/data/emr/run-1/part-0.parquet"),
    ):
        with pytest.raises(ClientError, match="AccessDenied"):
            write()
    principal = role_principal(d.template, role)
    functions = {f: d.template.arn(d.template.function(f)) for f in ("CommitFunction", "MaintenanceFunction")}
    assert d.front.allows(principal, Need("lambda:InvokeFunction", functions["CommitFunction"]))
    assert not d.front.allows(principal, Need("lambda:InvokeFunction", functions["MaintenanceFunction"]))


def test_the_commit_function_may_invoke_itself_and_no_other_function(deployment: Deployment) -> None:
    """It has invocations of itself check the slices of a long file list (lambdas/commit.py)."""
    d = deployment
    principal = principal_of(d.template, "CommitFunction")
    functions = {f: d.template.arn(d.template.function(f)) for f in ("CommitFunction", "MaintenanceFunction")}
    assert d.front.allows(principal, Need("lambda:InvokeFunction", functions["CommitFunction"]))
    assert not d.front.allows(principal, Need("lambda:InvokeFunction", functions["MaintenanceFunction"]))
    assert not d.front.allows(
        principal_of(d.template, "MaintenanceFunction"), Need("lambda:InvokeFunction", functions["CommitFunction"])
    )
