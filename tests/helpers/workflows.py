"""The state machines executed by moto's Step Functions interpreter, their Lambda tasks
running the real handler code in-process, against moto's S3 in the same process (``mock_aws``
takes every botocore request, one addressed to the moto server's endpoint included, so the
tables are made inside the context too), and what a test or a benchmark reads of an execution:
its history, its largest state payload, its failures, checked against Step Functions' limits,
which moto does not enforce."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

import castable
from castable.table import Table

from . import ROOT
from .aws_stubs import (
    fail_distributed_maps_as_aws_does,
    function_code,
    run_handler_in_process,
    start_executions_as_aws_does,
)
from .s3servers import new_bucket, seed_moto_objects
from .tables import EVENTS, events, parquet_bytes

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

FUNCTIONS = {
    "TombstoneFunctionArn": "lambdas.tombstone.handler",
    "ErasureFunctionArn": "lambdas.erasure.handler",
    "SpliceFunctionArn": "lambdas.splice.handler",
    "MaintenanceFunctionArn": "lambdas.maintenance.handler",
}


@contextmanager
def workflows(s3_endpoint: str) -> Iterator[dict[str, str]]:
    """In-process Step Functions, Lambda and S3 (moto); the workflows write their results to a
    bucket of their own, which is also the deployment's bucket the maintain-due workflow finds
    tables in. Yields each state machine's ARN by name, that bucket as ``bucket``, and the
    maintenance function's ARN as ``maintenance-function``."""
    import boto3
    from moto import mock_aws
    from moto.awslambda.models import LambdaFunction

    logging.getLogger("moto.stepfunctions").setLevel(logging.CRITICAL)
    if str(ROOT) not in sys.path:  # the tasks import their handlers (lambdas.*) by name
        sys.path.insert(0, str(ROOT))
    with (
        pytest.MonkeyPatch.context() as monkeypatch,
        mock_aws(config={"stepfunctions": {"execute_state_machine": True}}),
    ):
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
        monkeypatch.setattr(LambdaFunction, "_invoke_lambda", run_handler_in_process)
        fail_distributed_maps_as_aws_does(monkeypatch)
        start_executions_as_aws_does(monkeypatch)
        iam = boto3.client("iam", region_name="us-east-1")
        role = iam.create_role(RoleName="castable", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        lam = boto3.client("lambda", region_name="us-east-1")
        arns = {}
        for placeholder, handler in FUNCTIONS.items():
            name = handler.split(".")[1]
            arns[placeholder] = lam.create_function(
                FunctionName=name, Runtime="python3.12", Role=role, Handler=handler, Code={"ZipFile": function_code()}
            )["FunctionArn"]
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        results = new_bucket(s3_endpoint)
        machines: dict[str, str] = {}
        for name in ("erasure", "maintenance", "maintain-due"):
            definition = (ROOT / "statemachines" / f"{name}.asl.json").read_text()
            substitutions = {
                **arns,
                "ResultsBucket": results,
                "MaintenanceWorkflowArn": machines.get("maintenance", ""),
            }
            for placeholder, value in substitutions.items():
                definition = definition.replace("${" + placeholder + "}", value)
            machines[name] = sfn.create_state_machine(name=name, definition=definition, roleArn=role)["stateMachineArn"]
        yield {**machines, "bucket": results, "maintenance-function": arns["MaintenanceFunctionArn"]}


STATE_PAYLOAD_LIMIT = 262_144
"""Step Functions' limit on a state's input or output, a task's result included (256 KiB)."""
HISTORY_LIMIT = 25_000
"""Step Functions' limit on the events of one execution's history."""


def run(machine: str, payload: dict[str, Any], *, seconds: float = 60) -> dict[str, Any]:
    """Start an execution and wait up to ``seconds`` for it to end; then check it stayed within
    Step Functions' payload and history limits, which moto does not enforce."""
    import boto3

    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    execution = sfn.start_execution(stateMachineArn=machine, name=str(uuid.uuid4()), input=json.dumps(payload))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        d = sfn.describe_execution(executionArn=execution["executionArn"])
        if d["status"] != "RUNNING":
            events = history(d)
            assert len(events) <= HISTORY_LIMIT, f"{len(events)} history events"
            for e in events:
                for details in (v for k, v in e.items() if k.endswith("Details") and isinstance(v, dict)):
                    for field in ("input", "output", "parameters"):
                        size = len(str(details.get(field, "")).encode())
                        assert size <= STATE_PAYLOAD_LIMIT, f"{e['type']} {field} of {size} bytes"
            return d
        time.sleep(0.1)
    raise TimeoutError("execution did not finish")


def failures(execution: dict[str, Any]) -> list[Any]:
    """The error details of failed tasks and of the execution, for assertion messages."""
    keys = ("taskFailedEventDetails", "executionFailedEventDetails", "lambdaFunctionFailedEventDetails")
    return [e[k] for e in history(execution) for k in keys if k in e]


def history(execution: dict[str, Any]) -> list[dict[str, Any]]:
    import boto3

    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    pages = sfn.get_paginator("get_execution_history").paginate(executionArn=execution["executionArn"])
    return [e for page in pages for e in page["events"]]


def wide_table(bucket: str, endpoint: str, name: str, files: int) -> Table:
    """A table of ``files`` two-row files whose id ranges all span id 500000 (a table not sorted
    by user, as a per-user erase meets it); file 7 holds that id."""
    import boto3

    options = {"endpoint_url": endpoint, "region": "us-east-1"}
    t = castable.create_table(f"s3://{bucket}/{name}", EVENTS, primary_key="id", storage_options=options)
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    keys = []
    for i in range(files):
        first = events(i, i + 1) if i != 7 else events(500_000, 500_001)
        key = f"data/ext/part-{i:04d}.parquet"
        s3.put_object(
            Bucket=bucket,
            Key=f"{name}/{key}",
            Body=parquet_bytes(pa.concat_tables([first, events(10**6 + i, 10**6 + i + 1)])),
        )
        keys.append(key)
    t.add_files(keys, commit_id="load", verify="footer")  # files this test just wrote
    return t


def largest_payload(execution: dict[str, Any]) -> int:
    return max(
        len(str(details.get(f, "")).encode())
        for e in history(execution)
        for details in (v for k, v in e.items() if k.endswith("Details") and isinstance(v, dict))
        for f in ("input", "output", "parameters")
    )


@dataclass(frozen=True)
class ScheduleRun:
    """One run of the maintain-due workflow: its execution, what discovery found, the children
    it started, and how long discovery (one Lambda invocation) took."""

    execution: dict[str, Any]
    served: int
    due: int
    children: int
    discovery_seconds: float

    @property
    def events(self) -> int:
        return len(history(self.execution))

    @property
    def largest(self) -> int:
        return largest_payload(self.execution)


def due_tables(bucket: str, endpoint: str, count: int) -> None:
    """Make ``bucket`` hold ``count`` tables (``tables/t00000`` on), each due every 15 minutes:
    the first is created, the rest are its objects stored straight into the in-process moto
    server under their own names; tables already there are kept."""
    import boto3

    options = {"endpoint_url": endpoint, "region": "us-east-1"}
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    first = "tables/t00000/"
    if not s3.list_objects_v2(Bucket=bucket, Prefix=first).get("Contents"):
        castable.create_table(
            f"s3://{bucket}/{first.rstrip('/')}",
            EVENTS,
            storage_options=options,
            properties={"maintenance.schedule": "rate(15 minutes)"},
        )
    there = sum(
        len(p.get("CommonPrefixes", []))
        for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="tables/", Delimiter="/")
    )
    objects = [
        (o["Key"], s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())
        for o in s3.list_objects_v2(Bucket=bucket, Prefix=first)["Contents"]
    ]
    seed_moto_objects(
        bucket, ((key.replace("t00000", f"t{i:05d}"), data) for i in range(there, count) for key, data in objects)
    )


def schedule_run(bucket: str, maintenance_function: str) -> ScheduleRun:
    """Run the maintain-due workflow over the tables of ``bucket`` once, its discovery the real
    handler (``maintenance_function``) and each child a stand-in for the maintenance workflow
    (a state machine that succeeds at once, made for this run so that its executions are this
    run's children)."""
    import boto3

    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    role = "arn:aws:iam::123456789012:role/castable"
    stand_in = sfn.create_state_machine(
        name=f"maintenance-stand-in-{uuid.uuid4().hex[:8]}",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
        roleArn=role,
    )["stateMachineArn"]
    definition = (ROOT / "statemachines" / "maintain-due.asl.json").read_text()
    for placeholder, value in {
        "MaintenanceFunctionArn": maintenance_function,
        "ResultsBucket": bucket,
        "MaintenanceWorkflowArn": stand_in,
    }.items():
        definition = definition.replace("${" + placeholder + "}", value)
    machine = sfn.create_state_machine(
        name=f"maintain-due-{uuid.uuid4().hex[:8]}", definition=definition, roleArn=role
    )["stateMachineArn"]
    d = run(machine, {"now": "2026-11-29T03:00:00Z", "every_minutes": 15}, seconds=3600)
    assert d["status"] == "SUCCEEDED", failures(d)
    events = history(d)
    (discovered,) = [
        json.loads(e["taskSucceededEventDetails"]["output"])["Payload"] for e in events if e["type"] == "TaskSucceeded"
    ]
    stamps = {e["type"]: e["timestamp"] for e in events}
    children = sum(
        len(page["executions"]) for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=stand_in)
    )
    return ScheduleRun(
        execution=d,
        served=discovered["served"],
        due=discovered["due"],
        children=children,
        discovery_seconds=(stamps["TaskSucceeded"] - stamps["TaskStarted"]).total_seconds(),
    )
