"""The CDK app synthesises offline; its resources, permissions and wiring; cfn-lint; cdk-nag."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from helpers.cdk import synth

from castable.invocation import lambda_client
from castable.properties import AFTER_COMMIT
from infra.emr_env import MANIFEST
from infra.ingest import UNITS_PER_STACK
from infra.stack import ERASURE_RESULTS, MAINTENANCE_RESULTS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("cdk")
    t = synth(out)
    t["__outdir"] = str(out)
    return t


def resources(t: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in t["Resources"].items() if v["Type"] == kind}


def statements(t: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        s for p in resources(t, "AWS::IAM::Policy").values() for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_table_bucket_is_private_encrypted_tls_only_and_cleans_uploads(template: dict[str, Any]) -> None:
    buckets = resources(template, "AWS::S3::Bucket")
    tables = next(b for b in buckets.values() if "LoggingConfiguration" in b["Properties"])["Properties"]
    assert tables["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert tables["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    assert "VersioningConfiguration" not in tables
    rules = tables["LifecycleConfiguration"]["Rules"]
    assert any(r.get("AbortIncompleteMultipartUpload", {}).get("DaysAfterInitiation") == 2 for r in rules)
    expiring = {r["Prefix"]: r["ExpirationInDays"] for r in rules if "ExpirationInDays" in r}
    assert expiring == {ERASURE_RESULTS: 30, MAINTENANCE_RESULTS: 30}, "only the workflows' results expire"
    policies = json.dumps(resources(template, "AWS::S3::BucketPolicy"))
    assert '"aws:SecureTransport": "false"' in policies


def test_the_commit_caller_waits_longer_than_the_commit_function_may_run(
    template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's synchronous invoke of the commit function must not time out and invoke it again
    while a 10,000-file commit is still reading footers."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    (commit,) = (
        f["Properties"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Description", "").startswith("castable: Register Parquet files")
    )
    assert commit["Timeout"] == 900, "Lambda's longest, for a commit of 10,000 files"
    assert lambda_client().meta.config.read_timeout > commit["Timeout"]


def test_the_commit_function_may_invoke_itself_and_no_other_function(template: dict[str, Any]) -> None:
    """It has invocations of itself check the slices of a long file list."""
    functions = resources(template, "AWS::Lambda::Function")
    (commit,) = (k for k, f in functions.items() if f["Properties"].get("Description", "").startswith("castable: Reg"))
    role = functions[commit]["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "lambda:" in json.dumps(s["Action"])
    ]
    assert statements == [
        {"Action": "lambda:InvokeFunction", "Effect": "Allow", "Resource": {"Fn::GetAtt": [commit, "Arn"]}}
    ]


def test_versioning_and_a_custom_emr_image_are_options(tmp_path: Path) -> None:
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/castable-emr:7.5.0"
    t = synth(tmp_path, versioned="true", emrImage=image)
    (tables,) = (
        b["Properties"]
        for b in resources(t, "AWS::S3::Bucket").values()
        if b["Properties"].get("VersioningConfiguration", {}).get("Status") == "Enabled"
    )
    # every commit leaves the pointer's previous version behind: they expire
    rules = tables["LifecycleConfiguration"]["Rules"]
    assert any(r.get("NoncurrentVersionExpiration", {}).get("NoncurrentDays") == 30 for r in rules)
    (app,) = resources(t, "AWS::EMRServerless::Application").values()
    assert app["Properties"]["ImageConfiguration"] == {"ImageUri": image}


def fake_environment(path: Path, glibc: str = "2.34", architecture: str = "x86_64") -> Path:
    """An environment archive holding only its manifest (what the stack reads of it)."""
    manifest = json.dumps({"python": "3.11.14", "architecture": architecture, "glibc": glibc, "castable": "0.1.0"})
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest.encode()))
    return path


def test_jobs_run_on_the_packed_environment_the_stack_uploads(tmp_path: Path) -> None:
    archive = fake_environment(tmp_path / "env.tgz")
    t = synth(tmp_path / "out", emrEnvironment=str(archive))
    (app,) = resources(t, "AWS::EMRServerless::Application").values()
    (defaults,) = app["Properties"]["RuntimeConfiguration"]
    assert defaults["Classification"] == "spark-defaults"
    spark = defaults["Properties"]
    assert "ImageConfiguration" not in app["Properties"]
    for key in ("spark.emr-serverless.driverEnv.PYSPARK_PYTHON", "spark.executorEnv.PYSPARK_PYTHON"):
        assert spark[key] == "./environment/bin/python"
    # the uploaded object keeps the .tgz Spark unpacks by, and is unpacked as ./environment
    uploaded = t["Outputs"]["EmrEnvironmentArchive"]["Value"]
    assert uploaded["Fn::Sub"].endswith(".tgz")
    assert spark["spark.archives"] == {"Fn::Join": ["", [uploaded, "#environment"]]}
    # the job role reads exactly its two assets (the script, the archive) of the asset bucket
    role = [k for k, r in resources(t, "AWS::IAM::Role").items() if "EmrJobRole" in k]
    reads = [
        s
        for p in resources(t, "AWS::IAM::Policy").values()
        if json.dumps(p["Properties"]["Roles"]).count(role[0])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "cdk-hnb659fds-assets" in json.dumps(s["Resource"])
    ]
    assert len(reads) == 1 and reads[0]["Action"] == "s3:GetObject" and len(reads[0]["Resource"]) == 2
    assert "*" not in json.dumps(reads[0]["Resource"])


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: fake_environment(p.with_suffix(".gz")), r"must be named \*\.tgz, the suffix Spark unpacks"),
        (lambda p: fake_environment(p, glibc="2.35"), r"needs glibc 2\.35; EMR 7 \(Amazon Linux 2023\) has 2\.34"),
        (lambda p: fake_environment(p, architecture="arm64"), "built for arm64, the application runs x86_64"),
        (lambda p: p, "does not exist: build it with make emr-env"),
    ],
)
def test_an_environment_emr_cannot_run_is_refused(tmp_path: Path, make: Any, match: str) -> None:
    from infra.config import ConfigError, load

    path = tmp_path / "castable.json"
    path.write_text(json.dumps({"emr_environment": str(make(tmp_path / "env.tgz"))}))
    with pytest.raises(ConfigError, match=match):
        load(path)
    path.write_text(json.dumps({"emr_environment": str(fake_environment(tmp_path / "ok.tgz")), "emr_image": "x"}))
    with pytest.raises(ConfigError, match="emr_image and emr_environment both give the jobs their Python"):
        load(path)


def test_emr_serverless_may_pull_custom_images_from_the_stacks_repository(template: dict[str, Any]) -> None:
    (repository,) = resources(template, "AWS::ECR::Repository").values()
    (pull,) = repository["Properties"]["RepositoryPolicyText"]["Statement"]
    assert pull["Principal"] == {"Service": "emr-serverless.amazonaws.com"}
    assert sorted(pull["Action"]) == ["ecr:BatchGetImage", "ecr:DescribeImages", "ecr:GetDownloadUrlForLayer"]
    assert "/applications/*" in json.dumps(pull["Condition"]["ArnLike"]["aws:SourceArn"])
    assert pull["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    assert repository["Properties"]["ImageTagMutability"] == "IMMUTABLE"
    assert {"EmrImageRepositoryUri", "EmrEntryPoint"} <= set(template["Outputs"])


def test_arm64_is_an_option_for_functions_and_emr(tmp_path: Path) -> None:
    t = synth(tmp_path, architecture="arm64", databases=[{"name": "shop"}])
    functions = [
        f for f in resources(t, "AWS::Lambda::Function").values() if f["Properties"]["Handler"].startswith("lambdas.")
    ]
    assert len(functions) == 7 + 3 and all(f["Properties"]["Architectures"] == ["arm64"] for f in functions)
    (app,) = resources(t, "AWS::EMRServerless::Application").values()
    assert app["Properties"]["Architecture"] == "ARM64"
    x86 = synth(tmp_path / "x86")
    assert all(
        f["Properties"].get("Architectures", ["x86_64"]) == ["x86_64"]
        for f in resources(x86, "AWS::Lambda::Function").values()
    )

    def bundles(outdir: Path) -> set[str]:
        files = json.loads((outdir / "Castable.assets.json").read_text())["files"]
        return {k for k, v in files.items() if v["source"]["packaging"] == "zip"}

    assert len(bundles(tmp_path)) == len(bundles(tmp_path / "x86")) == 1
    assert bundles(tmp_path) != bundles(tmp_path / "x86"), "each architecture deploys its own bundle"


def test_a_customer_managed_key_encrypts_the_bucket_and_every_role_that_touches_objects_may_use_it(
    tmp_path: Path,
) -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    t = synth(tmp_path, kmsKeyArn=key, databases=[{"name": "shop"}])
    (tables,) = (b["Properties"] for k, b in resources(t, "AWS::S3::Bucket").items() if k.startswith("Tables"))
    (rule,) = tables["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule == {
        "BucketKeyEnabled": True,
        "ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key},
    }
    by_role: dict[str, list[dict[str, Any]]] = {}
    for policy in resources(t, "AWS::IAM::Policy").values():
        for role in policy["Properties"]["Roles"]:
            by_role.setdefault(json.dumps(role), []).extend(policy["Properties"]["PolicyDocument"]["Statement"])
    touching = 0
    for role, stmts in by_role.items():
        objects = [
            s
            for s in stmts
            if {"s3:GetObject", "s3:PutObject"} & set(json.dumps(s["Action"]).strip('[]"').split('", "'))
        ]
        if not objects:
            continue
        touching += 1
        uses = [s for s in stmts if s["Resource"] == key]
        assert uses and set(uses[0]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey"}, role
        assert uses[0]["Condition"] == {"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}}
    assert touching == 6 + 3 + 1 + 2, "six table functions, three ingest functions, EMR, two workflows"


def test_an_existing_bucket_is_used_as_it_is_and_told_what_policy_to_add(tmp_path: Path) -> None:
    t = synth(tmp_path, bucketName="my-lake")
    assert not resources(t, "AWS::S3::Bucket") and not resources(t, "AWS::S3::BucketPolicy"), "the stack owns no bucket"
    (notes,) = [n["Properties"] for n in resources(t, "Custom::S3BucketNotifications").values()]
    assert notes["BucketName"] == "my-lake" and notes["Managed"] is False, "the bucket's own notifications are kept"
    assert "EventBridgeConfiguration" in notes["NotificationConfiguration"], "tombstone and landing-failed events"
    required = json.dumps(t["Outputs"]["RequiredBucketPolicyStatements"]["Value"])
    for key in ("tables/*/_latest_manifest", "databases/*/_latest_manifest", "tables/*/manifest/*"):
        assert f"my-lake/{key}" in required
    assert required.count("Deny") == 2 and "s3:if-none-match" in required and "s3:if-match" in required
    granted = json.dumps(statements(t))
    assert ":s3:::my-lake/tables/*" in granted and ":s3:::my-lake/landing/events/*" in granted
    with pytest.raises(Exception, match="versioned applies to a bucket the stack creates"):
        synth(tmp_path / "versioned", bucketName="my-lake", versioned="true")


def test_functions_can_run_from_a_container_image(tmp_path: Path) -> None:
    t = synth(tmp_path, functionPackage="image")
    functions = [
        f["Properties"] for f in resources(t, "AWS::Lambda::Function").values() if "ImageConfig" in f["Properties"]
    ]
    commands = sorted(f["ImageConfig"]["Command"][0] for f in functions)
    assert commands == sorted(
        [
            f"lambdas.{n}.handler"
            for n in ("commit", "tombstone", "splice", "maintenance", "erasure", "trigger", "catalog")
        ]
        + ["lambdas.ingest.handler"] * 2
    )
    assert all("ImageUri" in f["Code"] and "Runtime" not in f and "Handler" not in f for f in functions)
    assert len({json.dumps(f["Code"]) for f in functions}) == 1, "one image for every function"


def test_functions_run_the_handlers_with_tracing(template: dict[str, Any]) -> None:
    fns = {
        f["Properties"]["Handler"]: f["Properties"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler", "").startswith("lambdas.")
    }
    names = ("commit", "tombstone", "splice", "ingest", "maintenance", "erasure", "trigger", "catalog")
    assert set(fns) == {f"lambdas.{n}.handler" for n in names}
    for props in fns.values():
        assert props["Runtime"] == "python3.12" and props["TracingConfig"] == {"Mode": "Active"}
        assert props["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == "castable"
        # no commit of a function publishes Iceberg metadata itself: the catalog function does
        assert props["Environment"]["Variables"][AFTER_COMMIT] == "false"


BUCKET_WIDE = (
    "s3:ListBucket",
    "s3:ListBucketVersions",
    "s3:ListBucketMultipartUploads",
    "s3:GetBucketVersioning",  # whether deletes must delete every version
    "s3:GetBucketObjectLockConfiguration",  # erase refuses a bucket with Object Lock
)
"""Actions on the bucket itself: listings (conditioned on s3:prefix where S3 allows it) and two
settings castable reads; none gives an object's bytes."""


def test_permissions_are_scoped_to_table_prefixes(template: dict[str, Any]) -> None:
    for s in statements(template):
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        assert not any(a in ("s3:*", "*") for a in actions), s
        if actions == ["s3:PutBucketNotification"]:  # CDK's notification custom resource configures the bucket
            continue
        if any(a.startswith("s3:") and a not in BUCKET_WIDE for a in actions):
            text = json.dumps(s["Resource"])
            if actions == ["s3:GetObject"] and "*" not in text:  # single objects: the EMR job's assets
                continue
            # the workflows' results (file names and counts, never a row) have their own prefixes
            scoped = ["/tables/", "/databases/", "/landing/", "/landing-failed/"]
            scoped += [f"/{ERASURE_RESULTS}", f"/{MAINTENANCE_RESULTS}"]
            assert any(p in text for p in scoped), s
    listing = [s for s in statements(template) if s["Action"] != "s3:ListBucketMultipartUploads"]
    listing = [s for s in listing if "s3:ListBucket" in json.dumps(s["Action"])]
    assert listing and all("s3:prefix" in json.dumps(s.get("Condition", {})) for s in listing)
    # s3:prefix is no condition key of ListBucketMultipartUploads: granted on the bucket, to gc only
    uploads = [s for s in statements(template) if "s3:ListBucketMultipartUploads" in json.dumps(s["Action"])]
    assert [s["Action"] for s in uploads] == ["s3:ListBucketMultipartUploads"]


def test_landing_notifications_reach_an_sqs_queue_with_a_dead_letter_queue(template: dict[str, Any]) -> None:
    queues = resources(template, "AWS::SQS::Queue")
    assert any("RedrivePolicy" in q["Properties"] for q in queues.values())
    notes = json.dumps(resources(template, "Custom::S3BucketNotifications"))
    assert "landing/events/" in notes and "landing/orders/" in notes
    mappings = resources(template, "AWS::Lambda::EventSourceMapping")
    assert any(m["Properties"].get("FunctionResponseTypes") == ["ReportBatchItemFailures"] for m in mappings.values())


def test_each_table_has_its_own_ingest_queue_function_and_concurrency_cap(template: dict[str, Any]) -> None:
    """A burst of landings makes at most two ingest functions race for one table's pointer, and
    one table's ingest function cannot write another table."""
    functions = resources(template, "AWS::Lambda::Function")
    ingest = {
        name: f["Properties"]
        for name, f in functions.items()
        if f["Properties"].get("Handler") == "lambdas.ingest.handler"
    }
    targets = [json.dumps(p["Environment"]["Variables"]["CASTABLE_TABLE"]) for p in ingest.values()]
    assert sorted(t.split("/tables/")[1].split('"')[0] for t in targets) == ["events", "orders"]
    sqs_mappings = [
        m["Properties"]
        for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if "ScalingConfig" in m["Properties"] and "Ingest" in json.dumps(m["Properties"]["FunctionName"])
    ]
    assert len(sqs_mappings) == 2
    assert all(m["ScalingConfig"] == {"MaximumConcurrency": 2} for m in sqs_mappings)
    assert {json.dumps(m["FunctionName"]) for m in sqs_mappings} == {json.dumps({"Ref": n}) for n in ingest}
    policies = resources(template, "AWS::IAM::Policy")
    for name in ingest:
        role = {"Ref": functions[name]["Properties"]["Role"]["Fn::GetAtt"][0]}
        granted = json.dumps([p for p in policies.values() if role in p["Properties"]["Roles"]])
        table = "events" if "Events" in name else "orders"
        other = "orders" if table == "events" else "events"
        assert f"/tables/{table}/" in granted and f"/tables/{other}/" not in granted, name
        deletes = [
            st
            for p in policies.values()
            if role in p["Properties"]["Roles"]
            for st in p["Properties"]["PolicyDocument"]["Statement"]
            if "s3:DeleteObject" in json.dumps(st["Action"])
        ]
        deleted = json.dumps([st["Resource"] for st in deletes])
        assert f"/tables/{table}/_castable_probe/*" in deleted and f"/tables/{table}/*" not in deleted, name
        variables = ingest[name]["Environment"]["Variables"]
        assert f"landing/{table}/" in json.dumps(variables["CASTABLE_LANDING"])
        assert variables["POWERTOOLS_SERVICE_NAME"] == f"castable-ingest-{table}", "each table's logs apart"
        mode = ("upsert", "op") if table == "orders" else ("append", None)
        assert (variables["CASTABLE_INGEST_MODE"], variables.get("CASTABLE_OP_COLUMN")) == mode, name


@pytest.mark.parametrize(
    ("settings", "match"), [({"ingest_mode": "merge"}, "append or upsert"), ({"op_column": "op"}, "needs ingest_mode")]
)
def test_a_bad_ingest_mode_fails_the_synth(settings: dict[str, str], match: str) -> None:
    from infra.stack import TableConfig

    with pytest.raises(ValueError, match=match):
        TableConfig("events", **settings)  # type: ignore[arg-type]


def test_landed_data_files_of_every_format_notify_their_table_queue(template: dict[str, Any]) -> None:
    """Every key under each table's landing prefix reaches its queue (the function skips what is
    not a data file), nothing else does (the table's own objects); the function has the memory
    the streaming ingest needs."""
    (notifications,) = [n["Properties"] for n in resources(template, "Custom::S3BucketNotifications").values()]
    configs = notifications["NotificationConfiguration"]["QueueConfigurations"]
    rules = [{r["Name"]: r["Value"] for r in c["Filter"]["Key"]["FilterRules"]} for c in configs]
    assert all(c["Events"] == ["s3:ObjectCreated:*"] for c in configs)
    # S3's suffix filters are case-sensitive (a .CSV would never arrive): the function picks its files
    assert rules == [{"prefix": "landing/events/"}, {"prefix": "landing/orders/"}]
    ingest = [
        f["Properties"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "lambdas.ingest.handler"
    ]
    assert {f["MemorySize"] for f in ingest} == {1024}


def test_state_machines_are_logged_and_invoke_the_functions(template: dict[str, Any]) -> None:
    machines = resources(template, "AWS::StepFunctions::StateMachine")
    assert len(machines) == 2
    for m in machines.values():
        props = m["Properties"]
        assert props["LoggingConfiguration"]["Level"] == "ALL" and props["TracingConfiguration"]["Enabled"]
        text, variables = props["DefinitionString"], props["DefinitionSubstitutions"]
        placeholders = {p.split("}")[0] for p in text.split("${")[1:]}
        assert placeholders and placeholders <= set(variables), "every ARN placeholder is substituted"
        assert all("Function" in json.dumps(v) for k, v in variables.items() if k != "ResultsBucket")
        assert "ResultsBucket" not in variables or "Tables" in json.dumps(variables["ResultsBucket"])
    invoke = [
        s
        for s in statements(template)
        if s["Action"] == "lambda:InvokeFunction" or "lambda:InvokeFunction" in s["Action"]
    ]
    assert len(invoke) >= 3


def test_schedules_and_tombstone_events_start_maintenance(template: dict[str, Any]) -> None:
    """Maintenance runs on EventBridge Scheduler schedules, which retry a failed start and then
    keep it as a dead letter (a legacy scheduled rule drops it)."""
    schedules = [s["Properties"] for s in resources(template, "AWS::Scheduler::Schedule").values()]
    assert sorted(s["ScheduleExpression"] for s in schedules) == ["cron(0 3 * * ? *)", "rate(6 hours)"]
    targets = [s["Target"] for s in schedules]
    assert all("MaintenanceWorkflow" in json.dumps(t["Arn"]) for t in targets)
    assert all(t["RetryPolicy"]["MaximumRetryAttempts"] == 3 for t in targets)
    assert all("MaintenanceSchedulesDeadLetters" in json.dumps(t["DeadLetterConfig"]) for t in targets)
    ((role_id, role),) = [
        (k, r["Properties"]) for k, r in resources(template, "AWS::IAM::Role").items() if "MaintenanceSchedules" in k
    ]
    trust = role["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"} and "aws:SourceAccount" in json.dumps(trust)
    policies = resources(template, "AWS::IAM::Policy").values()
    granted = json.dumps([p for p in policies if {"Ref": role_id} in p["Properties"]["Roles"]])
    assert "states:StartExecution" in granted and "sqs:SendMessage" in granted
    rules = resources(template, "AWS::Events::Rule")
    assert not any("ScheduleExpression" in r["Properties"] for r in rules.values()), "no legacy scheduled rules"
    patterns = [r["Properties"]["EventPattern"] for r in rules.values() if "EventPattern" in r["Properties"]]
    assert any("tables/*/tombstone/*" in json.dumps(p) for p in patterns), (
        "every table's: one rule whatever their number"
    )
    (tombstones,) = [r for r in rules.values() if "tombstone/" in json.dumps(r["Properties"].get("EventPattern"))]
    assert "TombstoneEvents" in json.dumps(tombstones["Properties"]["Targets"]), (
        "tombstone events are debounced via SQS"
    )
    (trigger,) = [
        f
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "lambdas.trigger.handler"
    ]
    env = trigger["Properties"]["Environment"]["Variables"]
    assert env["DEBOUNCE_SECONDS"] == "900" and "MaintenanceWorkflow" in json.dumps(
        env["MAINTENANCE_STATE_MACHINE_ARN"]
    )
    (group,) = [g["Properties"]["Name"] for g in resources(template, "AWS::Scheduler::ScheduleGroup").values()]
    assert env["MAINTENANCE_SCHEDULE_GROUP"] == group and "CASTABLE_TABLES" not in env
    assert sorted(s["Name"] for s in schedules) == ["events", "orders"], "the trigger finds a schedule by its name"
    assert all(s["GroupName"] == group for s in schedules)
    assert any("scheduler:GetSchedule" in json.dumps(s["Action"]) for s in statements(template))
    assert any("states:StartExecution" in json.dumps(s["Action"]) for s in statements(template))


def test_committed_versions_reach_the_catalog_function_which_registers_them_in_glue(
    template: dict[str, Any],
) -> None:
    """Every table's manifests (a database member's too) are sent through a queue to the catalog
    function, which reports failures per record and may create and update tables of the
    deployment's Glue database only."""
    (database,) = resources(template, "AWS::Glue::Database").values()
    assert database["Properties"]["DatabaseInput"]["Name"] == "castable"
    rules = [r["Properties"] for r in resources(template, "AWS::Events::Rule").values()]
    (manifests,) = [r for r in rules if "manifest/" in json.dumps(r.get("EventPattern"))]
    keys = manifests["EventPattern"]["detail"]["object"]["key"]
    assert keys == [{"wildcard": "tables/*/manifest/*"}, {"wildcard": "databases/*/*/manifest/*"}]
    assert "CommitEvents" in json.dumps(manifests["Targets"])
    (catalog_id, catalog), *_ = [
        (k, f) for k, f in resources(template, "AWS::Lambda::Function").items() if k.startswith("CatalogFunction")
    ]
    assert catalog["Properties"]["Environment"]["Variables"]["GLUE_DATABASE"] == "castable"
    (mapping,) = [
        m["Properties"]
        for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if catalog_id in json.dumps(m["Properties"]["FunctionName"])
    ]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"] and "CommitEvents" in json.dumps(mapping)
    queues = resources(template, "AWS::SQS::Queue").items()
    queue = next(q for k, q in queues if k.startswith("CommitEvents") and "DeadLetters" not in k)
    assert queue["Properties"]["VisibilityTimeout"] >= catalog["Properties"]["Timeout"]
    assert "RedrivePolicy" in queue["Properties"]
    glue = [s for s in statements(template) if "glue:" in json.dumps(s["Action"])]
    assert [sorted(s["Action"]) for s in glue] == [["glue:CreateTable", "glue:GetTable", "glue:UpdateTable"]]
    scope = json.dumps(glue[0]["Resource"])
    assert ":catalog" in scope and "database/castable" in scope and "table/castable/*" in scope
    assert template["Outputs"]["GlueDatabase"]["Value"] == "castable"


def test_emr_job_role_writes_data_and_invokes_commit(template: dict[str, Any]) -> None:
    roles = resources(template, "AWS::IAM::Role")
    emr = [k for k, r in roles.items() if "emr-serverless" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])]
    assert len(emr) == 1
    policies = [p for p in resources(template, "AWS::IAM::Policy").values() if emr[0] in json.dumps(p["Properties"])]
    stmts = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    writes = [s for s in stmts if "s3:PutObject" in json.dumps(s["Action"])]
    assert len(writes) == 1
    targets = json.dumps(writes[0]["Resource"])
    assert "/tables/*/data/*" in targets and "/emr-logs/*" in targets and "manifest" not in targets
    assert "_latest_manifest" not in json.dumps(stmts), "the job commits through the function only"
    listing = [s for s in stmts if s["Action"] == "s3:ListBucket"]
    assert listing and listing[0]["Condition"]["StringLike"]["s3:prefix"] == [
        "tables/*",
        "databases/*",
        "landing/*",
        "artifacts/*",
    ]
    text = json.dumps(stmts)
    assert "lambda:InvokeFunction" in text and "CommitFunction" in text
    trust = roles[emr[0]]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert len(trust) == 2 and all(
        t["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        and "aws:SourceArn" in t["Condition"]["ArnLike"]
        for t in trust
    ), "only this account's EMR may assume the job role"


def test_emr_serverless_application_runs_spark_35_and_stops_when_idle(template: dict[str, Any]) -> None:
    (app,) = resources(template, "AWS::EMRServerless::Application").values()
    props = app["Properties"]
    assert props["Type"] == "Spark" and props["ReleaseLabel"].startswith("emr-7.")
    assert props["AutoStopConfiguration"] == {"Enabled": True, "IdleTimeoutMinutes": 15}
    assert "emr-logs/" in json.dumps(props["MonitoringConfiguration"]) and "ImageConfiguration" not in props
    outputs = template["Outputs"]
    for name in ("TablesBucket", "CommitFunctionName", "EmrApplicationId", "EmrJobRoleArn", "ErasureStateMachineArn"):
        assert name in outputs


def cfn_lint(outdir: Path) -> None:
    """cfn-lint on the main stack's template and every nested stack's."""
    paths = sorted(str(p) for p in outdir.glob("*.template.json"))
    # W3005 (a DependsOn also implied by a GetAtt) is how CDK writes every role; nothing else is accepted.
    result = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), "--ignore-checks", "W3005", "--", *paths],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_cfn_lint_passes(template: dict[str, Any]) -> None:
    cfn_lint(Path(template["__outdir"]))


def test_hundreds_of_tables_and_databases_stay_within_cloudformation_limits(tmp_path: Path) -> None:
    """250 tables and 3 databases of 3, with the Iceberg REST catalog (every limit below grows
    with the tables, so this holds for fewer): every stack under 500 resources, 200 parameters,
    200 outputs and 1 MB of template, every inline policy under IAM's 10,240 characters a role,
    the trigger's environment under 4 KB; cfn-lint and cdk-nag clean (the synth fails on a nag
    finding)."""
    tables = 250
    members = [{"name": f"m{k}"} for k in range(3)]
    t = synth(
        tmp_path,
        tables=[{"name": f"t{i:03d}"} for i in range(tables)],
        databases=[{"name": f"db{j}", "tables": members} for j in range(3)],
        icebergCatalog=True,
    )
    stacks = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("*.template.json")}
    assert len(stacks) == 1 + -(-(tables + 3) // UNITS_PER_STACK)
    for name, stack in stacks.items():
        counts = (len(stack["Resources"]), len(stack.get("Parameters", {})), len(stack.get("Outputs", {})))
        assert counts[0] < 500 and counts[1] < 200 and counts[2] < 200, (name, counts)
        assert (tmp_path / name).stat().st_size < 1_000_000, name
    inline: dict[str, int] = {}
    for policy in resources(t, "AWS::IAM::Policy").values():
        for role in policy["Properties"].get("Roles", []):
            key = json.dumps(role)
            inline[key] = inline.get(key, 0) + len(
                json.dumps(policy["Properties"]["PolicyDocument"], separators=(",", ":"))
            )
    assert max(inline.values()) < 10_240, max(inline.items(), key=lambda kv: kv[1])
    functions = resources(t, "AWS::Lambda::Function")
    assert len([f for f in functions if f.startswith("Ingest")]) == tables + 3
    for f in functions.values():
        variables = f["Properties"].get("Environment", {}).get("Variables", {})
        assert len(json.dumps(variables)) < 4096
    assert len(resources(t, "AWS::Scheduler::Schedule")) == tables + 9
    cfn_lint(tmp_path)


def test_cdk_nag_aws_solutions_passes(template: dict[str, Any]) -> None:
    report = json.loads((Path(template["__outdir"]) / "validation-report.json").read_text())
    (nag,) = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success", nag.get("violations")


def test_every_nag_acknowledgment_has_a_reason() -> None:
    from infra.nag import accepted_findings

    assert accepted_findings.__doc__
    import aws_cdk as cdk

    import app

    stack = app.build(cdk.App(context={"aws:cdk:bundling-stacks": []}))
    for finding, reason in accepted_findings(stack).items():
        assert finding.startswith("AwsSolutions-") and len(reason) > 40


def test_a_database_gets_a_manifest_ingest_function_and_maintenance_of_its_members(tmp_path: Path) -> None:
    databases = [{"name": "shop", "tables": [{"name": "orders"}, {"name": "lines", "schedule": "rate(1 day)"}]}]
    t = synth(tmp_path, databases=databases)
    functions = resources(t, "AWS::Lambda::Function")
    ingest = [
        f["Properties"]["Environment"]["Variables"]
        for f in functions.values()
        if f["Properties"].get("Handler") == "lambdas.ingest.handler"
        and "CASTABLE_DATABASE" in f["Properties"]["Environment"]["Variables"]
    ]
    assert len(ingest) == 1 and "/databases/shop" in json.dumps(ingest[0]["CASTABLE_DATABASE"])
    assert "landing/shop/" in json.dumps(ingest[0]["CASTABLE_LANDING"])
    notes = json.dumps(resources(t, "Custom::S3BucketNotifications"))
    assert '"landing/shop/"' in notes and '".manifest.json"' in notes
    schedules = json.dumps(resources(t, "AWS::Scheduler::Schedule"))
    assert "databases/shop/orders" in schedules and "databases/shop/lines" in schedules
    assert "databases/*/*/tombstone/*" in json.dumps(resources(t, "AWS::Events::Rule"))
    granted = json.dumps(statements(t))
    assert "/databases/shop/*" in granted


def test_operators_are_told_when_something_breaks(tmp_path: Path) -> None:
    """An encrypted topic (emailed when alertEmail is given) that every alarm notifies: dead
    letters of every queue, errors of every function, failed/timed-out/aborted runs of each
    workflow, unverified erasures, commit conflicts; files moved to landing-failed/; a dashboard."""
    t = synth(tmp_path, alertEmail="ops@example.com", databases=[{"name": "shop", "tables": [{"name": "orders"}]}])
    (topic_id, topic), *more = resources(t, "AWS::SNS::Topic").items()
    assert not more and "KmsMasterKeyId" in topic["Properties"]
    subscriptions = resources(t, "AWS::SNS::Subscription").values()
    assert [(s["Properties"]["Protocol"], s["Properties"]["Endpoint"]) for s in subscriptions] == [
        ("email", "ops@example.com")
    ]
    alarms = resources(t, "AWS::CloudWatch::Alarm")
    assert alarms and all(a["Properties"]["AlarmActions"] == [{"Ref": topic_id}] for a in alarms.values())

    def watched(alarm: dict[str, Any]) -> str:
        return json.dumps(alarm["Properties"])

    queues = [k for k, q in resources(t, "AWS::SQS::Queue").items() if "DeadLetters" in k]
    dead = [watched(a) for a in alarms.values() if "dead-letter" in a["Properties"]["AlarmDescription"]]
    assert len(queues) == 6, "three landing queues, the tombstone and commit events' queues, the schedules'"
    assert all(any(q in d for d in dead) for q in queues), "every dead-letter queue is watched"
    functions = [
        k
        for k, f in resources(t, "AWS::Lambda::Function").items()
        if f["Properties"]["Description"].startswith("castable")
    ]
    assert len(functions) == 7 + 3, "seven shared functions and an ingest function per table (2) and database (1)"
    failing = " ".join(watched(a) for a in alarms.values() if "function failed" in a["Properties"]["AlarmDescription"])
    assert all(f'"{f}"' in failing for f in functions), "every function's errors are watched"
    for machine in resources(t, "AWS::StepFunctions::StateMachine"):
        runs = [watched(a) for a in alarms.values() if machine in watched(a)]
        assert any(all(m in r for m in ("ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted")) for r in runs)
    filters = {
        f["Properties"]["MetricTransformations"][0]["MetricName"]
        for f in resources(t, "AWS::Logs::MetricFilter").values()
    }
    assert filters == {"ErasureNotVerified", "CommitConflictError"}
    for name in filters:
        assert any(name in watched(a) for a in alarms.values()), name
    rules = [r["Properties"] for r in resources(t, "AWS::Events::Rule").values()]
    failed = [r for r in rules if "landing-failed/" in json.dumps(r.get("EventPattern", {}))]
    assert len(failed) == 1 and failed[0]["Targets"][0]["Arn"] == {"Ref": topic_id}
    assert len(resources(t, "AWS::CloudWatch::Dashboard")) == 1
    assert "AlertsTopicArn" in t["Outputs"]


def test_alarms_over_many_tables_come_ten_queues_to_an_alarm(tmp_path: Path) -> None:
    """CloudWatch metric math takes ten metrics: 25 tables' dead letters make 3 alarms, not 25."""
    t = synth(tmp_path, tables=[{"name": f"t{i:02d}"} for i in range(25)])
    assert "AWS::SNS::Subscription" not in {r["Type"] for r in t["Resources"].values()}, "no email, no subscription"
    dead = [
        a["Properties"]
        for a in resources(t, "AWS::CloudWatch::Alarm").values()
        if "dead-letter" in a["Properties"]["AlarmDescription"]
    ]
    assert len(dead) == 3
    assert all(len(a["Metrics"]) <= 11 for a in dead), "ten metrics and the expression over them"
    assert sum(len(a["Metrics"]) - 1 for a in dead) == 28, (
        "25 landing queues, the tombstone and commit events', schedules'"
    )


def test_the_committed_configuration_file_is_what_cdk_deploys(tmp_path: Path) -> None:
    """cdk.json names castable.json; the app reads it, so every deploy deploys the same tables."""
    root = Path(__file__).resolve().parent.parent
    assert json.loads((root / "cdk.json").read_text())["context"] == {"config": "castable.json"}
    t = synth(tmp_path, config=str(root / "castable.json"))
    names = {
        json.dumps(f["Properties"]["Environment"]["Variables"].get("CASTABLE_TABLE"))
        for f in resources(t, "AWS::Lambda::Function").values()
        if "Environment" in f["Properties"]
    }
    assert any("/tables/events" in n for n in names)


def test_a_configuration_file_of_tables_and_a_database_synthesises(tmp_path: Path) -> None:
    config = tmp_path / "deploy.json"
    config.write_text(
        json.dumps(
            {
                "tables": [{"name": "clicks", "ingest_mode": "upsert"}, {"name": "views", "retain_hours": 48}],
                "databases": [{"name": "shop", "tables": [{"name": "orders", "schedule": "rate(1 hour)"}]}],
                "alert_email": "ops@example.com",
            }
        )
    )
    t = synth(tmp_path / "out", config=str(config))
    text = json.dumps(t)
    assert all(f"landing/{name}/" in text for name in ("clicks", "views", "shop"))
    assert "rate(1 hour)" in text and "ops@example.com" in text


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        (
            {"tables": [{"name": "a", "schedual": "rate(1 hour)"}]},
            r"tables\[0\]: unknown key 'schedual' \(known: .*schedule",
        ),
        ({"tables": [{"schedule": "rate(1 hour)"}]}, r"tables\[0\]: 'name' is required"),
        (
            {"tables": [{"name": "a", "ingest_concurrency": "4"}]},
            r"tables\[0\].ingest_concurrency must be int, not \"4\"",
        ),
        ({"tables": [{"name": "a", "retain_hours": True}]}, r"retain_hours must be float or null, not true"),
        (
            {"tables": [{"name": "a", "ingest_mode": "merge"}]},
            r"ingest_mode must be one of append, upsert, not 'merge'",
        ),
        ({"tables": [{"name": "a"}, {"name": "a"}]}, r"tables: 'a' is named more than once"),
        ({"tables": {"name": "a"}}, r"tables must be a list, not dict"),
        (
            {"databases": [{"name": "d", "tables": [{"name": "m", "op_column": "op"}]}]},
            r"databases\[0\].tables\[0\]: .*needs ingest_mode",
        ),
        ({"versioned": "yes"}, r"versioned must be bool, not \"yes\""),
        ({"bucket": "x"}, r"unknown key 'bucket'"),
        ({"glue_database": "Sales-DB"}, r"glue_database must be lower-case letters, digits and _"),
        (
            {"tables": [{"name": "shop__orders"}], "databases": [{"name": "shop", "tables": [{"name": "orders"}]}]},
            r"tables shop__orders and shop/orders share Glue table name shop__orders",
        ),
    ],
)
def test_a_bad_configuration_file_is_refused_naming_the_key(tmp_path: Path, doc: dict[str, Any], match: str) -> None:
    from infra.config import ConfigError, load

    path = tmp_path / "castable.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=match):
        load(path)


def test_a_file_and_flags_together_are_refused_and_flags_alone_still_work(tmp_path: Path) -> None:
    from infra.config import ConfigError, choose

    path = tmp_path / "castable.json"
    path.write_text(json.dumps({"tables": [{"name": "events"}]}))
    with pytest.raises(ConfigError, match="-c tables and the configuration file"):
        choose({"config": str(path), "tables": '[{"name": "other"}]'})
    flags = choose({"config": "", "tables": '[{"name": "other"}]', "versioned": "true"})
    assert [t.name for t in flags.tables] == ["other"] and flags.versioned
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        choose({"config": str(tmp_path / "missing.json")})
    path.write_text("{")
    with pytest.raises(ConfigError, match="is not JSON"):
        choose({"config": str(path)})
