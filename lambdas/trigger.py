"""Trigger Lambda: start table maintenance when tombstone files pile up, at most once per window.

EventBridge sends S3 "Object Created" events for ``tables/<name>/tombstone/`` (and a database
member's ``databases/<db>/<name>/tombstone/``, known as ``<db>/<name>``) to an SQS queue;
this function drains it in batches and starts the maintenance state machine once per table and
debounce window. The execution name is ``<table>-tombstones-<window>``, so Step Functions itself
refuses a second start in the same window: a burst of deletes starts one run.

Environment: ``MAINTENANCE_STATE_MACHINE_ARN``, ``CASTABLE_TABLES`` (JSON: table name ->
maintenance input), ``DEBOUNCE_SECONDS`` (default 900).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError

from lambdas.runtime import logger, metrics, tracer


def tables_in(event: dict[str, Any]) -> set[str]:
    """Tables whose tombstone prefix received an object, from SQS-wrapped EventBridge events: a
    table's name, or ``<db>/<name>`` for a database member."""
    names = set()
    for record in event.get("Records", []):
        key = json.loads(record["body"]).get("detail", {}).get("object", {}).get("key", "")
        parts = key.split("/")
        if len(parts) > 3 and parts[0] == "tables" and parts[2] == "tombstone":
            names.add(parts[1])
        elif len(parts) > 4 and parts[0] == "databases" and parts[3] == "tombstone":
            names.add(f"{parts[1]}/{parts[2]}")
    return names


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    machine = os.environ["MAINTENANCE_STATE_MACHINE_ARN"]
    inputs: dict[str, Any] = json.loads(os.environ["CASTABLE_TABLES"])
    window = int(time.time() // int(os.environ.get("DEBOUNCE_SECONDS", "900")))
    sfn = boto3.client("stepfunctions")
    started, skipped = [], []
    for name in sorted(tables_in(event)):
        if name not in inputs:
            logger.warning("tombstones under an unknown table", extra={"table": name})
            continue
        try:
            sfn.start_execution(
                stateMachineArn=machine,
                name=f"{name.replace('/', '--')}-tombstones-{window}",
                input=json.dumps(inputs[name]),
            )
            started.append(name)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
            skipped.append(name)
    metrics.add_metric(name="MaintenanceStarted", unit=MetricUnit.Count, value=len(started))
    logger.info("tombstone trigger", extra={"started": started, "debounced": skipped})
    return {"started": started, "debounced": skipped}
