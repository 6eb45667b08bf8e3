"""Trigger Lambda: start table maintenance when tombstone files pile up, at most once per window.

EventBridge sends S3 "Object Created" events for ``tables/<name>/tombstone/`` (and a database
member's ``databases/<db>/<name>/tombstone/``, known as ``<db>/<name>``) to an SQS queue;
this function drains it in batches and starts the maintenance state machine once per table and
debounce window. The execution name is ``<table>-tombstones-<window>``, so Step Functions itself
refuses a second start in the same window: a burst of deletes starts one run.

The run's input is the one the table's maintenance schedule gives (its retention settings), read
back from the schedule (``lambdas.names.schedule_name``) in the deployment's schedule group: the
deployment's tables live in no environment variable, whose 4 KB would hold about 25. Tombstones
under a table without a schedule (not in the deployment's configuration) start nothing.

Environment: ``MAINTENANCE_STATE_MACHINE_ARN``, ``MAINTENANCE_SCHEDULE_GROUP``,
``DEBOUNCE_SECONDS`` (default 900).
"""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError

from lambdas.names import schedule_name
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


def scheduled_input(table: str) -> str | None:
    """The maintenance input the schedule of ``table`` gives, or ``None`` if it has none."""
    try:
        schedule = _scheduler().get_schedule(
            GroupName=os.environ["MAINTENANCE_SCHEDULE_GROUP"], Name=schedule_name(table)
        )
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return None
        raise
    return str(schedule["Target"]["Input"])


@functools.cache
def _scheduler() -> Any:
    """One EventBridge Scheduler client per process, made on first use."""
    return boto3.client("scheduler")


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    machine = os.environ["MAINTENANCE_STATE_MACHINE_ARN"]
    window = int(time.time() // int(os.environ.get("DEBOUNCE_SECONDS", "900")))
    sfn = boto3.client("stepfunctions")
    started, skipped = [], []
    for name in sorted(tables_in(event)):
        maintenance_input = scheduled_input(name)
        if maintenance_input is None:
            logger.warning("tombstones under a table without a maintenance schedule", extra={"table": name})
            continue
        try:
            sfn.start_execution(
                stateMachineArn=machine,
                name=f"{name.replace('/', '--')}-tombstones-{window}",
                input=maintenance_input,
            )
            started.append(name)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
            skipped.append(name)
    metrics.add_metric(name="MaintenanceStarted", unit=MetricUnit.Count, value=len(started))
    logger.info("tombstone trigger", extra={"started": started, "debounced": skipped})
    return {"started": started, "debounced": skipped}
