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
from helpers import ROOT
from helpers.cdk import synth

from castable.deployment.invocation import lambda_client
from castable.deployment.layout import MAINTENANCE_DUE_PREFIX
from castable.format.properties import AFTER_COMMIT
from infra.emr_env import MANIFEST
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
    assert expiring == {ERASURE_RESULTS: 30, MAINTENANCE_RESULTS: 30, MAINTENANCE_DUE_PREFIX: 30}, (
        "only the workflows' results and the lists of tables due expire"
    )
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
    t = synth(tmp_path, architecture="arm64")
    functions = [
        f for f in resources(t, "AWS::Lambda::Function").values() if f["Properties"]["Handler"].startswith("lambdas.")
    ]
    assert len(functions) == 9 and all(f["Properties"]["Architectures"] == ["arm64"] for f in functions)
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
    t = synth(tmp_path, kmsKeyArn=key)
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
    assert ":s3:::my-lake/tables/*" in granted and ":s3:::my-lake/landing/*" in granted
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
            for n in (
                "commit",
                "tombstone",
                "splice",
                "maintenance",
                "erasure",
                "trigger",
                "catalog",
                "ingest",
                "route",
            )
        ]
    )
    assert all("ImageUri" in f["Code"] and "Runtime" not in f and "Handler" not in f for f in functions)
    assert len({json.dumps(f["Code"]) for f in functions}) == 1, "one image for every function"


def test_functions_run_the_handlers_with_tracing(template: dict[str, Any]) -> None:
    fns = {
        f["Properties"]["Handler"]: f["Properties"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler", "").startswith("lambdas.")
    }
    names = ("commit", "tombstone", "splice", "ingest", "route", "maintenance", "erasure", "trigger", "catalog")
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
            scoped += [f"/{ERASURE_RESULTS}", f"/{MAINTENANCE_RESULTS}", f"/{MAINTENANCE_DUE_PREFIX}"]
            assert any(p in text for p in scoped), s
    listing = [s for s in statements(template) if s["Action"] != "s3:ListBucketMultipartUploads"]
    listing = [s for s in listing if "s3:ListBucket" in json.dumps(s["Action"])]
    assert listing and all("s3:prefix" in json.dumps(s.get("Condition", {})) for s in listing)
    # s3:prefix is no condition key of ListBucketMultipartUploads: granted on the bucket, to gc only
    uploads = [s for s in statements(template) if "s3:ListBucketMultipartUploads" in json.dumps(s["Action"])]
    assert [s["Action"] for s in uploads] == ["s3:ListBucketMultipartUploads"]


def _function(t: dict[str, Any], handler: str) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (name, f["Properties"])
        for name, f in resources(t, "AWS::Lambda::Function").items()
        if f["Properties"].get("Handler") == f"lambdas.{handler}.handler"
    ]
    return found


def _granted(t: dict[str, Any], function: dict[str, Any]) -> list[dict[str, Any]]:
    """The statements of the policies attached to ``function``'s role."""
    role = {"Ref": function["Role"]["Fn::GetAtt"][0]}
    return [
        st
        for p in resources(t, "AWS::IAM::Policy").values()
        if role in p["Properties"]["Roles"]
        for st in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_files_landing_for_any_table_reach_one_ingest_function_through_a_fair_queue(template: dict[str, Any]) -> None:
    """One EventBridge rule on ``landing/`` (no per-table notification) feeds the route function,
    which sends each event to the shared ingest queue with its table as message group; the
    ingest function drains it with partial-batch failures, at most ``ingest_concurrency`` at once."""
    assert not resources(template, "Custom::S3BucketNotifications") or "QueueConfigurations" not in json.dumps(
        resources(template, "Custom::S3BucketNotifications")
    ), "no per-table S3 notifications"
    rules = resources(template, "AWS::Events::Rule")
    (landed,) = [r["Properties"] for r in rules.values() if '"landing/"' in json.dumps(r["Properties"])]
    assert landed["EventPattern"]["detail"]["object"]["key"] == [{"prefix": "landing/"}]
    assert "LandingEvents" in json.dumps(landed["Targets"])
    mappings = [m["Properties"] for m in resources(template, "AWS::Lambda::EventSourceMapping").values()]
    route_name, route = _function(template, "route")
    ingest_name, ingest = _function(template, "ingest")
    (to_route,) = [m for m in mappings if m["FunctionName"] == {"Ref": route_name}]
    (to_ingest,) = [m for m in mappings if m["FunctionName"] == {"Ref": ingest_name}]
    assert "LandingEvents" in json.dumps(to_route["EventSourceArn"])
    assert to_ingest["ScalingConfig"] == {"MaximumConcurrency": 20} and to_ingest["BatchSize"] == 50
    assert to_route["FunctionResponseTypes"] == to_ingest["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert "Landing" in json.dumps(route["Environment"]["Variables"]["CASTABLE_INGEST_QUEUE_URL"])
    assert any("sqs:SendMessage" in json.dumps(st["Action"]) for st in _granted(template, route))
    queues = resources(template, "AWS::SQS::Queue")
    for name in ("LandingEvents", "Landing"):
        ((_, q),) = [
            (k, v)
            for k, v in queues.items()
            if k.startswith(name)
            and "DeadLetters" not in k
            and (name != "Landing" or not k.startswith("LandingEvents"))
        ]
        assert "RedrivePolicy" in q["Properties"], name
    assert ingest["MemorySize"] == 1024 and ingest["Timeout"] == 900
    assert "Tables" in json.dumps(ingest["Environment"]["Variables"]["CASTABLE_BUCKET"])


def test_the_ingest_function_writes_tables_but_deletes_only_landed_files(template: dict[str, Any]) -> None:
    """It may write any table (a landed file's rows become the table's data) and read, delete
    and dead-letter landed files; it deletes nothing in a table but its store probe."""
    _, ingest = _function(template, "ingest")
    granted = _granted(template, ingest)
    deletes = json.dumps([st["Resource"] for st in granted if "s3:DeleteObject" in json.dumps(st["Action"])])
    assert "/landing/*" in deletes and "/tables/*/_castable_probe/*" in deletes
    assert '"/tables/*"' not in deletes and '"/databases/*"' not in deletes, "no table's objects"
    writes = json.dumps([st["Resource"] for st in granted if "s3:PutObject" in json.dumps(st["Action"])])
    assert "/tables/*" in writes and "/landing-failed/landing/*" in writes


@pytest.mark.parametrize(
    ("settings", "match"),
    [({"ingest_concurrency": 1}, "2 to 1000"), ({"maintenance_every_minutes": 0}, "1 to 1440")],
)
def test_bad_deployment_settings_fail_the_synth(settings: dict[str, int], match: str) -> None:
    from infra.stack import CastableConfig

    with pytest.raises(ValueError, match=match):
        CastableConfig(**settings)  # type: ignore[arg-type]


def test_state_machines_are_logged_and_invoke_the_functions(template: dict[str, Any]) -> None:
    machines = resources(template, "AWS::StepFunctions::StateMachine")
    assert len(machines) == 3
    for m in machines.values():
        props = m["Properties"]
        assert props["LoggingConfiguration"]["Level"] == "ALL" and props["TracingConfiguration"]["Enabled"]
        text, variables = props["DefinitionString"], props["DefinitionSubstitutions"]
        placeholders = {p.split("}")[0] for p in text.split("${")[1:]}
        assert placeholders and placeholders <= set(variables), "every ARN placeholder is substituted"
        assert all("Function" in json.dumps(v) for k, v in variables.items() if k.endswith("FunctionArn"))
        assert "ResultsBucket" not in variables or "Tables" in json.dumps(variables["ResultsBucket"])
    invoke = [
        s
        for s in statements(template)
        if s["Action"] == "lambda:InvokeFunction" or "lambda:InvokeFunction" in s["Action"]
    ]
    assert len(invoke) >= 3


def test_one_schedule_and_tombstone_events_start_maintenance(template: dict[str, Any]) -> None:
    """One EventBridge Scheduler schedule (it retries a failed start, then keeps it as a dead
    letter; a legacy scheduled rule drops it) starts the maintain-due workflow with its own
    time; its Distributed Map starts and waits for the maintenance workflow of each table due."""
    (schedule,) = [s["Properties"] for s in resources(template, "AWS::Scheduler::Schedule").values()]
    assert schedule["ScheduleExpression"] == "rate(15 minutes)"
    target = schedule["Target"]
    assert "MaintainDueWorkflow" in json.dumps(target["Arn"])
    assert json.loads(target["Input"]) == {"now": "<aws.scheduler.scheduled-time>", "every_minutes": 15}
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 3
    assert "MaintenanceScheduleDeadLetters" in json.dumps(target["DeadLetterConfig"])
    ((role_id, role),) = [
        (k, r["Properties"]) for k, r in resources(template, "AWS::IAM::Role").items() if "MaintenanceSchedule" in k
    ]
    trust = role["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"} and "aws:SourceAccount" in json.dumps(trust)
    policies = resources(template, "AWS::IAM::Policy").values()
    granted = json.dumps([p for p in policies if {"Ref": role_id} in p["Properties"]["Roles"]])
    assert "states:StartExecution" in granted and "sqs:SendMessage" in granted
    machines = resources(template, "AWS::StepFunctions::StateMachine")
    (due,) = [m["Properties"] for k, m in machines.items() if k.startswith("MaintainDue")]
    text = due["DefinitionString"]
    assert "states:startExecution.sync:2" in text and "MaintenanceWorkflow" in json.dumps(
        due["DefinitionSubstitutions"]["MaintenanceWorkflowArn"]
    )
    machine_role = {"Ref": due["RoleArn"]["Fn::GetAtt"][0]}
    machine_grants = json.dumps([p for p in policies if machine_role in p["Properties"]["Roles"]])
    assert "StepFunctionsGetEventsForStepFunctionsExecutionRule" in machine_grants
    assert "maintenance-due/*" in machine_grants
    rules = resources(template, "AWS::Events::Rule")
    assert not any("ScheduleExpression" in r["Properties"] for r in rules.values()), "no legacy scheduled rules"
    (tombstones,) = [r for r in rules.values() if "tombstone/" in json.dumps(r["Properties"].get("EventPattern"))]
    assert "tables/*/tombstone/*" in json.dumps(tombstones["Properties"]["EventPattern"])
    assert "TombstoneEvents" in json.dumps(tombstones["Properties"]["Targets"]), "debounced via SQS"
    _, trigger = _function(template, "trigger")
    env = trigger["Environment"]["Variables"]
    assert env["DEBOUNCE_SECONDS"] == "900" and "MaintenanceWorkflow" in json.dumps(
        env["MAINTENANCE_STATE_MACHINE_ARN"]
    )
    trigger_grants = _granted(template, trigger)
    assert not any("scheduler:" in json.dumps(st["Action"]) for st in trigger_grants)
    reads = [st for st in trigger_grants if str(st["Action"]).startswith("s3:") or "s3:" in json.dumps(st["Action"])]
    assert all(
        a in ("s3:GetObject", "s3:ListBucket")
        for st in reads
        for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    )


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


def test_the_template_does_not_grow_with_the_tables_and_stays_within_cloudformation_limits(tmp_path: Path) -> None:
    """Tables are data: nothing of the synth names one, so a deployment of 0 tables and one of
    10,000 deploy the same template. With every option that adds resources (the Iceberg REST
    catalog, alerts): one stack under 500 resources, 200 parameters, 200 outputs and 1 MB, every
    role's inline policies under IAM's 10,240 characters, every environment under Lambda's 4 KB;
    cfn-lint and cdk-nag clean (the synth fails on a nag finding)."""
    t = synth(tmp_path / "a", icebergCatalog=True, alertEmail="ops@example.com")
    again = synth(tmp_path / "b", icebergCatalog=True, alertEmail="ops@example.com")
    assert json.dumps(t, sort_keys=True) == json.dumps(again, sort_keys=True)
    stacks = list((tmp_path / "a").glob("*.template.json"))
    assert [p.name for p in stacks] == ["Castable.template.json"], "no nested stacks"
    counts = (len(t["Resources"]), len(t.get("Parameters", {})), len(t.get("Outputs", {})))
    assert counts[0] < 200 and counts[1] < 200 and counts[2] < 200, counts
    assert stacks[0].stat().st_size < 250_000
    inline: dict[str, int] = {}
    for policy in resources(t, "AWS::IAM::Policy").values():
        for role in policy["Properties"].get("Roles", []):
            key = json.dumps(role)
            inline[key] = inline.get(key, 0) + len(
                json.dumps(policy["Properties"]["PolicyDocument"], separators=(",", ":"))
            )
    assert max(inline.values()) < 10_240, max(inline.items(), key=lambda kv: kv[1])
    for f in resources(t, "AWS::Lambda::Function").values():
        assert len(json.dumps(f["Properties"].get("Environment", {}).get("Variables", {}))) < 4096
    with pytest.raises(Exception, match="tables are data"):
        synth(tmp_path / "c", tables='[{"name": "events"}]')
    cfn_lint(tmp_path / "a")


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


def test_operators_are_told_when_something_breaks(tmp_path: Path) -> None:
    """An encrypted topic (emailed when alertEmail is given) that every alarm notifies: dead
    letters of every queue, errors of every function, failed/timed-out/aborted runs of each
    workflow, unverified erasures, commit conflicts; files moved to landing-failed/; a dashboard."""
    t = synth(tmp_path, alertEmail="ops@example.com")
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
    assert len(queues) == 5, "the landing events' and landing queues, the tombstone and commit events', the schedule's"
    assert all(any(q in d for d in dead) for q in queues), "every dead-letter queue is watched"
    functions = [
        k
        for k, f in resources(t, "AWS::Lambda::Function").items()
        if f["Properties"]["Description"].startswith("castable")
    ]
    assert len(functions) == 9, "nine functions, whatever the number of tables"
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
    (dashboard,) = resources(t, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert body.count("SEARCH('{castable,service,table} MetricName=") == 3, "a line per table, whichever tables"
    assert all(m in body for m in ("RowsIngested", "FilesDeadLettered", "IngestFailures"))
    assert "AlertsTopicArn" in t["Outputs"]


def test_the_committed_configuration_file_is_what_cdk_deploys(tmp_path: Path) -> None:
    """cdk.json names castable.json; the app reads it, so every deploy deploys the same settings."""
    root = ROOT
    assert json.loads((root / "cdk.json").read_text())["context"] == {"config": "castable.json"}
    committed = json.loads((root / "castable.json").read_text())
    assert "tables" not in committed and "databases" not in committed
    t = synth(tmp_path, config=str(root / "castable.json"))
    _function(t, "ingest")


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({"tables": [{"name": "a"}]}, r"castable.json.tables: tables are data.*python -m infra.migrate castable.json"),
        ({"databases": []}, r"castable.json.databases: tables are data"),
        ({"ingest_concurrency": "4"}, r"ingest_concurrency must be int, not \"4\""),
        ({"ingest_concurrency": 1}, r"2 to 1000"),
        ({"versioned": "yes"}, r"versioned must be bool, not \"yes\""),
        ({"bucket": "x"}, r"unknown key 'bucket' \(known: .*bucket_name"),
        ({"architecture": "sparc"}, r"architecture must be one of x86_64, arm64, not 'sparc'"),
        ({"glue_database": "Sales-DB"}, r"glue_database must be lower-case letters, digits and _"),
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
    path.write_text(json.dumps({"versioned": False}))
    with pytest.raises(ConfigError, match="-c versioned and the configuration file"):
        choose({"config": str(path), "versioned": "true"})
    flags = choose({"config": "", "ingestConcurrency": "50", "versioned": "true"})
    assert flags.ingest_concurrency == 50 and flags.versioned
    with pytest.raises(ConfigError, match="tables are data"):
        choose({"config": "", "tables": '[{"name": "other"}]'})
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        choose({"config": str(tmp_path / "missing.json")})
    path.write_text("{")
    with pytest.raises(ConfigError, match="is not JSON"):
        choose({"config": str(path)})
