"""Ingest Lambda: append files landing in S3 (Parquet, CSV, JSON Lines, gzipped or not), one
commit per table a batch of SQS messages; one function for every table of the deployment.

Each SQS message carries EventBridge's S3 "Object Created" event for a key under
``landing/<name>/`` (the route function gave it the message group ``<name>``, so the queue shares
this function fairly among tables). What is done with each file, and with each table's share of
the batch, is :mod:`castable.deployment.ingest`'s; this function reads the messages, counts and
logs with Powertools, and answers SQS: a message whose body is not JSON, or whose file could not
be read for a reason that may pass, is reported in ``batchItemFailures``, and so are the messages
of a table whose commit failed (S3 unreachable while it commits, say); the other tables' files
still land. Any other event (an ``s3:TestEvent``) is taken and ignored.

Environment: ``CASTABLE_BUCKET`` (the deployment's bucket), ``CASTABLE_DEAD_LETTER_PREFIX``
(default ``landing-failed/``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes import S3EventBridgeNotificationEvent
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from castable.deployment.ingest import Intake, S3LandingArea
from castable.deployment.layout import FAILED_LANDING_PREFIX
from castable.store import shared_s3_client
from lambdas.runtime import count, logger, metrics, tracer


def _s3() -> Any:
    """The process's S3 client (settings from the environment): castable's, whose standard retry
    mode sends a request whose answer was lost up to 8 times (the SDK's legacy default gives up
    after 3 lost answers in a row)."""
    return shared_s3_client()


def _created(record: SQSRecord) -> tuple[str, str] | None:
    """The bucket and key of the object a message says was created (``None`` for any other
    event); a body that is not JSON is a ``ValueError``, so the message is retried and then
    kept in the queue's dead letters."""
    event = S3EventBridgeNotificationEvent(json.loads(record.body))
    if event.get("detail-type") != "Object Created" or not isinstance(event.get("detail"), dict):
        return None
    return event.detail.bucket.name, event.detail.object.key


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    metrics.add_metric(name="Messages", unit=MetricUnit.Count, value=len(event.get("Records", [])))
    prefix = os.environ.get("CASTABLE_DEAD_LETTER_PREFIX", FAILED_LANDING_PREFIX)
    intake = Intake(S3LandingArea(os.environ["CASTABLE_BUCKET"], _s3(), prefix), log=logger, count=count)

    def receive(record: SQSRecord) -> None:
        found = _created(record)
        if found is not None:
            intake.receive(record.message_id, *found)

    response = process_partial_response(event, receive, BatchProcessor(event_type=EventType.SQS), context)
    failed = [str(f["itemIdentifier"]) for f in response["batchItemFailures"]]
    failed += intake.commit(set(failed))
    return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}
