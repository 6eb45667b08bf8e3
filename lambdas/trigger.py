"""Trigger Lambda: start table maintenance when tombstone files pile up, at most once per window.

EventBridge sends S3 "Object Created" events for ``tables/<name>/tombstone/`` (and a database
member's ``databases/<db>/<name>/tombstone/``, known as ``<db>/<name>``) to an SQS queue;
this function drains it in batches and starts the maintenance state machine once per table and
debounce window. The execution name is ``<table>-tombstones-<window>``, so Step Functions itself
refuses a second start in the same window: a burst of deletes starts one run.

A table whose ``maintenance.schedule`` property is ``none`` is not maintained by the deployment,
so its tombstones start nothing; retention and grace come from the table's properties too.

Environment: ``MAINTENANCE_STATE_MACHINE_ARN``, ``DEBOUNCE_SECONDS`` (default 900).
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

import castable
from castable.deployment.layout import DATABASES, TABLES
from castable.deployment.names import execution_name
from lambdas.runtime import logger, maintenance_input, metrics, open_table, tracer


def tables_in(event: dict[str, Any]) -> dict[str, str]:
    """Tables whose tombstone prefix received an object, from SQS-wrapped EventBridge events: by
    key (a table's name, or ``<db>/<name>`` for a database member), the table's URI."""
    tables = {}
    for record in event.get("Records", []):
        detail = json.loads(record["body"]).get("detail", {})
        bucket, key = detail.get("bucket", {}).get("name", ""), detail.get("object", {}).get("key", "")
        parts = key.split("/")
        if len(parts) > 3 and parts[0] == TABLES and parts[2] == "tombstone":
            tables[parts[1]] = f"s3://{bucket}/{TABLES}/{parts[1]}"
        elif len(parts) > 4 and parts[0] == DATABASES and parts[3] == "tombstone":
            tables[f"{parts[1]}/{parts[2]}"] = f"s3://{bucket}/{DATABASES}/{parts[1]}/{parts[2]}"
    return tables


def maintained(uri: str) -> bool:
    """Whether the deployment maintains the table at ``uri`` (its ``maintenance.schedule`` is not
    ``none``); a table dropped meanwhile is not."""
    try:
        return open_table(uri).settings.maintenance_schedule is not None
    except castable.TableNotFoundError:
        return False


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    machine = os.environ["MAINTENANCE_STATE_MACHINE_ARN"]
    window = int(time.time() // int(os.environ.get("DEBOUNCE_SECONDS", "900")))
    sfn = boto3.client("stepfunctions")
    started, skipped = [], []
    for name, uri in sorted(tables_in(event).items()):
        if not maintained(uri):
            logger.info("tombstones under a table the deployment does not maintain", extra={"table": name})
            continue
        try:
            sfn.start_execution(
                stateMachineArn=machine,
                name=execution_name(name, f"tombstones-{window}"),
                input=json.dumps(maintenance_input(uri)),
            )
            started.append(name)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
            skipped.append(name)
    metrics.add_metric(name="MaintenanceStarted", unit=MetricUnit.Count, value=len(started))
    logger.info("tombstone trigger", extra={"started": started, "debounced": skipped})
    return {"started": started, "debounced": skipped}
