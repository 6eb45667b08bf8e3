"""The Lambda bundle as the runtime meets it: built by infra/bundle.py, imported under python3.12
with nothing but the bundle and the standard library on ``sys.path``, and every handler invoked
once against S3 on the moto server over HTTP. A dependency the dev venv happens to provide fails here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from helpers import ROOT
from helpers.aws_stubs import api_gateway_event, sqs_event
from helpers.bundles import build_bundle, invoke
from helpers.cdk import synth
from helpers.s3servers import new_bucket
from helpers.tables import EVENTS, events, parquet_bytes

import castable
from castable.format.properties import AFTER_COMMIT
from infra.bundle import BOTOCORE_SERVICES, CONSTRAINTS

LAMBDA_LIMIT = 262_144_000
"""Lambda's limit on a function's unzipped code, in bytes (250 MiB)."""

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("bundle")]


def test_the_bundle_fits_lambda(bundle: Path) -> None:
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert size < LAMBDA_LIMIT, f"{size / 2**20:.0f} MiB unzipped"


ELF_MACHINES = {"x86_64": 62, "arm64": 183}
"""The ELF header's e_machine of each Lambda architecture (EM_X86_64, EM_AARCH64)."""


def machines(bundle: Path) -> set[int]:
    """The machines the bundle's shared libraries are built for."""
    return {
        int.from_bytes(p.read_bytes()[18:20], "little")
        for p in bundle.rglob("*.so*")
        if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"
    }


def test_the_bundle_is_built_for_x86_64(bundle: Path) -> None:
    assert machines(bundle) == {ELF_MACHINES["x86_64"]}


def test_an_arm64_bundle_has_only_aarch64_libraries_and_fits_lambda(tmp_path: Path) -> None:
    """What ``"architecture": "arm64"`` deploys: the same pinned packages, every shared library
    built for AArch64 (Graviton), under Lambda's limit. This machine cannot run it."""
    arm = build_bundle(tmp_path / "arm64", "arm64")
    assert machines(arm) == {ELF_MACHINES["arm64"]}
    assert sum(p.stat().st_size for p in arm.rglob("*") if p.is_file()) < LAMBDA_LIMIT
    assert shipped(arm) == pinned()


def test_the_container_image_is_built_from_a_context_holding_exactly_what_the_bundle_needs(
    tmp_path: Path, bundle: Path
) -> None:
    """``"function_package": "image"``: the build context CDK stages (the repository through
    .dockerignore) holds the Dockerfile and every file it copies, and nothing of a checkout's
    venvs, tests or benchmarks; the Dockerfile's one RUN step, run here in that context, makes
    the same bundle as the zip's. (The base image and docker itself cannot run on this machine.)"""
    synth(tmp_path / "cdk", functionPackage="image")
    (context,) = (p for p in (tmp_path / "cdk").glob("asset.*") if (p / "infra").is_dir())
    dockerfile = (context / "infra" / "lambda.Dockerfile").read_text()
    copied = [w for line in dockerfile.splitlines() if line.startswith("COPY ") for w in line.split()[1:-1]]
    assert copied and all((context / c).exists() for c in copied), copied
    size = sum(p.stat().st_size for p in context.rglob("*") if p.is_file())
    assert size < 5 * 2**20 and not (context / "tests").exists() and not (context / ".venv").exists()
    (run,) = [line for line in dockerfile.splitlines() if line.startswith("RUN ")]
    assert 'python infra/bundle.py "${LAMBDA_TASK_ROOT}" "${ARCHITECTURE}"' in run
    built = tmp_path / "task"
    subprocess.run(
        [sys.executable, "infra/bundle.py", str(built), "x86_64"], cwd=context, check=True, capture_output=True
    )
    files = {str(p.relative_to(built)) for p in built.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert files == {
        str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }


def test_the_bundle_ships_exactly_the_pinned_versions(bundle: Path) -> None:
    """Every package in the bundle is pinned, at the version it is pinned to: a deploy months
    later builds the bundle these tests ran, not whatever the index holds newest."""
    assert shipped(bundle) == pinned()


def shipped(bundle: Path) -> dict[str, str]:
    """The packages in a bundle and their versions."""
    names_and_versions = (d.name.removesuffix(".dist-info").split("-") for d in bundle.glob("*.dist-info"))
    return {canonical(name): version for name, version in names_and_versions}


def pinned() -> dict[str, str]:
    """The packages infra/bundle-constraints.txt pins, and their versions."""
    pins: dict[str, str] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonical(name)] = version.strip()
    return pins


def canonical(name: str) -> str:
    """A distribution name as pip compares them."""
    return name.lower().replace("_", "-").replace(".", "-")


def test_the_bundle_keeps_the_model_of_every_aws_service_the_code_calls() -> None:
    """The bundle drops botocore's models of other services (infra/bundle.py): a client of a
    service whose model is gone would fail only when first made, in production."""
    sources = [*(ROOT / "src" / "castable").rglob("*.py"), *(ROOT / "lambdas").rglob("*.py")]
    called = {m for p in sources for m in re.findall(r"""\.client\(\s*["']([a-z0-9-]+)["']""", p.read_text())}
    assert called and called <= BOTOCORE_SERVICES, called - BOTOCORE_SERVICES


def test_every_handler_runs_from_the_bundle_alone(
    bundle: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AFTER_COMMIT, "false")  # the catalog function publishes, as deployed
    bucket = new_bucket(s3_endpoint)
    uri = f"s3://{bucket}/tables/events"
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    table = castable.create_table(
        uri, EVENTS, primary_key="id", properties={"publish.iceberg": "true"}, storage_options=options
    )
    table.append(events(0, 100))
    glue = boto3.client("glue", endpoint_url=s3_endpoint, region_name="us-east-1")
    glue.create_database(DatabaseInput={"Name": f"catalog_{bucket.replace('-', '_')}"})
    table.store.put("data/ext/part-0.parquet", parquet_bytes(events(1000, 1010)))
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    s3.put_object(Bucket=bucket, Key="landing/events/a.parquet", Body=parquet_bytes(events(2000, 2005)))
    machine = boto3.client("stepfunctions", endpoint_url=s3_endpoint, region_name="us-east-1").create_state_machine(
        name=f"maintenance-{bucket}",
        definition='{"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}',
        roleArn="arn:aws:iam::123456789012:role/castable",
    )["stateMachineArn"]
    queue = boto3.client("sqs", endpoint_url=s3_endpoint, region_name="us-east-1").create_queue(
        QueueName=f"landing-{bucket}"
    )["QueueUrl"]
    sqs = sqs_event(bucket, ["landing/events/a.parquet"])
    tombstoned = sqs_event(bucket, ["tables/events/tombstone/2026/11/23/01/x.del"])
    discover = {
        "action": "discover",
        "bucket": bucket,
        "now": "2026-11-29T06:00:00Z",
        "every_minutes": 1440,
        "run": "d-1",
    }
    first = table.manifest.data_files[0].path
    calls = [
        ("lambdas.iceberg_rest.handler", api_gateway_event("GET", "/v1/namespaces/tables/tables/events")),
        ("lambdas.commit.handler", {"table": uri, "files": ["data/ext/part-0.parquet"], "commit_id": "emr-1"}),
        ("lambdas.tombstone.handler", {"table": uri, "predicate": "id < 5"}),
        ("lambdas.splice.handler", {"table": uri, "predicate": "id = 50", "file": first, "commit_id": "sp-1"}),
        (
            "lambdas.erasure.handler",
            {"action": "plan", "commit_id": "er-1", "items": [{"table": uri, "predicate": "id = 50"}]},
        ),
        ("lambdas.erasure.handler", {"action": "verify", "table": uri, "predicate": "id = 50"}),
        ("lambdas.maintenance.handler", {"action": "plan", "table": uri, "run": "m-1"}),
        ("lambdas.maintenance.handler", {"action": "gc", "table": uri, "dry_run": True}),
        ("lambdas.maintenance.handler", discover),
        ("lambdas.route.handler", sqs),
        ("lambdas.ingest.handler", sqs),
        ("lambdas.trigger.handler", tombstoned),
        ("lambdas.catalog.handler", sqs_event(bucket, ["tables/events/manifest/v1.json"])),
    ]
    env = {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "CASTABLE_BUCKET": bucket,
        "CASTABLE_INGEST_QUEUE_URL": queue,
        "MAINTENANCE_STATE_MACHINE_ARN": machine,
        "GLUE_DATABASE": f"catalog_{bucket.replace('-', '_')}",
        "CASTABLE_WAREHOUSE": f"s3://{bucket}",
        AFTER_COMMIT: "false",
    }
    answer = invoke(bundle, [{"handler": h, "event": e} for h, e in calls], env)
    assert all(not p.startswith(str(ROOT / ".venv")) and "site-packages" not in p for p in answer["path"])
    for (handler, _), outcome in zip(calls, answer["calls"], strict=True):
        assert "errorType" not in outcome, f"{handler}: {outcome.get('trace')}"
    loaded = answer["calls"][0]["result"]
    assert loaded["statusCode"] == 200 and json.loads(loaded["body"])["metadata-location"].startswith(uri)
    assert answer["calls"][-2]["result"]["started"] == ["events"], "the trigger read the table's schedule"
    assert answer["calls"][-5]["result"]["due"] == 1, "a day's window holds the table's rate(6 hours)"
    (published,) = answer["calls"][-1]["result"]["published"]
    assert published["changed"] and published["version"] == castable.open_table(uri, storage_options=options).version
    glue_table = glue.get_table(DatabaseName=f"catalog_{bucket.replace('-', '_')}", Name="events")["Table"]
    assert glue_table["Parameters"]["metadata_location"] == published["metadata_location"]
    ids = castable.open_table(uri, storage_options=options).scan(["id"]).to_arrow().column("id").to_pylist()
    assert sorted(ids) == [i for i in range(5, 100) if i != 50] + list(range(1000, 1010)) + list(range(2000, 2005))


def test_a_pip_that_checks_wheels_against_its_own_python_is_refused_with_the_fix(tmp_path: Path) -> None:
    """The pip Python 3.11 ships (23.2, from ensurepip in a fresh venv) checks the bundle's 3.12
    wheels against 3.11 and fails on numpy's Requires-Python: the build refuses it first, saying
    which pip is needed and how to get it, and installs nothing."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    shipped = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True, check=True)
    assert shipped.stdout.startswith("pip 23."), shipped.stdout
    target = tmp_path / "bundle"
    run = subprocess.run([str(python), "-m", "infra.bundle", str(target)], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode != 0
    assert "BundleBuildError" in run.stderr and "pypa/pip#12216" in run.stderr, run.stderr
    assert f"{python} -m pip install --upgrade 'pip>=24.2'" in run.stderr, run.stderr
    assert not target.exists() or not any(target.iterdir())
