"""Trigger Lambda: start table maintenance when tombstone files pile up, at most once per window.

EventBridge sends S3 "Object Created" events for ``tables/<name>/tombstone/`` (and a database
member's ``databases/<db>/<name>/tombstone/``, known as ``<db>/<name>``) to an SQS queue;
this function drains it in batches and starts the maintenance state machine once per table and
debounce window. The execution name is ``<table>-tombstones-<window>``, so Step Functions itself
refuses a second start in the same window: a burst of deletes starts one run.

A table whose ``maintenance.schedule`` property is ``none`` is not maintained by the deployment,
so its tombstones start nothing; retention and grace come from the table's properties too. Which
table an object is of is :func:`castable.deployment.layout.table_object`'s; a message that is
no S3 event is logged, counted (``RecordsSkipped``) and skipped.

Environment: ``MAINTENANCE_STATE_MACHINE_ARN``, ``DEBOUNCE_SECONDS`` (default 900).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError

import castable
from castable.deployment.layout import table_object
from castable.deployment.names import execution_name
from castable.format.layout import TOMBSTONE_PREFIX
from lambdas.events import Created, Messages, read
from lambdas.runtime import lambda_handler, logger, maintenance_input, metrics, open_table, tracer


def tables_in(batch: Messages) -> dict[str, str]:
    """Tables whose tombstone folder received an object: by key (a table's name, or
    ``<db>/<name>`` for a database member), the table's URI. A malformed message is logged and
    skipped: the function reports no batch failures, so failing it would send every table of
    the batch back to the queue with it, to the dead letters in the end, and start no run."""
    tables = {}
    for message in read(batch):
        if not isinstance(message, Created):
            metrics.add_metric(name="RecordsSkipped", unit=MetricUnit.Count, value=1)
            logger.warning(
                "skipped: a malformed message", extra={"message_id": message.message_id, "error": message.problem}
            )
            continue
        found = table_object(message.bucket, message.key)
        if found is not None and found.folder == TOMBSTONE_PREFIX:
            tables[found.table] = found.uri
    return tables


def maintained(uri: str) -> bool:
    """Whether the deployment maintains the table at ``uri`` (its ``maintenance.schedule`` is not
    ``none``); a table dropped meanwhile is not."""
    try:
        return open_table(uri).settings.maintenance_schedule is not None
    except castable.TableNotFoundError:
        return False


@lambda_handler(Messages)
@tracer.capture_method
def handler(batch: Messages) -> dict[str, Any]:
    machine = os.environ["MAINTENANCE_STATE_MACHINE_ARN"]
    window = int(time.time() // int(os.environ.get("DEBOUNCE_SECONDS", "900")))
    sfn = boto3.client("stepfunctions")
    started, skipped = [], []
    for name, uri in sorted(tables_in(batch).items()):
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
