"""The Lambda bundle as the runtime meets it: built by infra/bundling.py, imported under python3.12
with nothing but the bundle and the standard library on ``sys.path``, and every handler invoked
once against S3 on the moto server over HTTP. A dependency the dev venv happens to provide fails here."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest
from helpers import ROOT
from helpers.aws_stubs import sqs_event
from helpers.s3servers import new_bucket
from helpers.tables import EVENTS, events

import castable

PYTHON312 = Path(os.environ.get("CASTABLE_PYTHON312", Path.home() / ".pyenv/versions/3.12.1/bin/python3.12"))
LAMBDA_LIMIT = 262_144_000
"""Lambda's limit on a function's unzipped code, in bytes (250 MiB)."""

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("bundle")]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("bundle")
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from infra.bundling import install; install(Path(sys.argv[1]))",
            str(target),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"},
    )
    return target


def invoke(bundle: Path, calls: list[dict[str, Any]], env: dict[str, str]) -> dict[str, Any]:
    if not PYTHON312.exists():
        pytest.fail(f"python3.12 (the Lambda runtime's) is not at {PYTHON312}; set CASTABLE_PYTHON312")
    run = subprocess.run(
        [str(PYTHON312), "-I", "-S", str(ROOT / "tests" / "helpers" / "bundle_runner.py"), str(bundle)],
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=bundle,
        env={"PATH": "/usr/bin:/bin", "HOME": str(bundle), "POWERTOOLS_TRACE_DISABLED": "true", **env},
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.splitlines()[-1])


def test_the_bundle_fits_lambda(bundle: Path) -> None:
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert size < LAMBDA_LIMIT, f"{size / 2**20:.0f} MiB unzipped"


def test_every_handler_runs_from_the_bundle_alone(bundle: Path, s3_endpoint: str) -> None:
    bucket = new_bucket(s3_endpoint)
    uri = f"s3://{bucket}/tables/events"
    options = {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    table = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    table.append(events(0, 100))
    registered = io.BytesIO()
    pq.write_table(events(1000, 1010), registered)
    table.store.put("data/ext/part-0.parquet", registered.getvalue())
    landed = io.BytesIO()
    pq.write_table(events(2000, 2005), landed)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    s3.put_object(Bucket=bucket, Key="landing/events/a.parquet", Body=landed.getvalue())
    machine = boto3.client("stepfunctions", endpoint_url=s3_endpoint, region_name="us-east-1").create_state_machine(
        name=f"maintenance-{bucket}",
        definition='{"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}',
        roleArn="arn:aws:iam::123456789012:role/castable",
    )["stateMachineArn"]
    sqs = sqs_event(bucket, ["landing/events/a.parquet"])
    tombstoned = {
        "Records": [
            {
                **sqs["Records"][0],
                "body": json.dumps({"detail": {"object": {"key": "tables/events/tombstone/2026/11/23/01/x.del"}}}),
            }
        ]
    }
    first = table.manifest.data_files[0].path
    calls = [
        ("lambdas.commit.handler", {"table": uri, "files": ["data/ext/part-0.parquet"], "commit_id": "emr-1"}),
        ("lambdas.tombstone.handler", {"table": uri, "predicate": "id < 5"}),
        ("lambdas.splice.handler", {"table": uri, "predicate": "id = 50", "file": first, "commit_id": "sp-1"}),
        ("lambdas.erasure.handler", {"action": "verify", "table": uri, "predicate": "id = 50"}),
        ("lambdas.maintenance.handler", {"action": "plan", "table": uri}),
        ("lambdas.maintenance.handler", {"action": "gc", "table": uri, "dry_run": True}),
        ("lambdas.ingest.handler", sqs),
        ("lambdas.trigger.handler", tombstoned),
    ]
    env = {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "CASTABLE_TABLE": uri,
        "CASTABLE_LANDING": f"s3://{bucket}/landing/events/",
        "MAINTENANCE_STATE_MACHINE_ARN": machine,
        "CASTABLE_TABLES": json.dumps({"events": {"table": uri}}),
    }
    answer = invoke(bundle, [{"handler": h, "event": e} for h, e in calls], env)
    assert all(not p.startswith(str(ROOT / ".venv")) and "site-packages" not in p for p in answer["path"])
    for (handler, _), outcome in zip(calls, answer["calls"], strict=True):
        assert "errorType" not in outcome, f"{handler}: {outcome.get('trace')}"
    ids = castable.open_table(uri, storage_options=options).scan(["id"]).to_arrow().column("id").to_pylist()
    assert sorted(ids) == [i for i in range(5, 100) if i != 50] + list(range(1000, 1010)) + list(range(2000, 2005))
