"""Route Lambda: give each landed file's message its table, so one ingest function serves every
table fairly.

EventBridge sends S3 "Object Created" events for ``landing/`` to a plain queue (a rule cannot set
a message group computed from the key); this function forwards each event, unchanged, to the
shared ingest queue with message group ``<name>`` from ``landing/<name>/...``. That queue is an
SQS fair queue: when one table floods it, SQS serves the other tables' messages first, so a busy
table does not starve a quiet one. Events for keys outside ``landing/<name>/`` go to group
``-``, for the ingest function to log and skip. A message SQS did not take is reported in
``batchItemFailures`` and sent again.

Environment: ``CASTABLE_INGEST_QUEUE_URL``.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from botocore.config import Config

from castable.deployment.layout import landing_name
from lambdas.events import Messages, object_created
from lambdas.runtime import InvalidEventError, lambda_handler, logger, metrics, tracer

SEND_BATCH = 10
"""SQS's SendMessageBatch takes at most 10 messages."""
UNPLACED = "-"
"""The message group of events that land for no table."""


def group(body: str) -> str:
    """The message group of an SQS message body: the name ``landing/<name>/...`` lands for
    (:func:`castable.deployment.layout.landing_name`); ``-`` for any other body, a malformed one
    too, which goes on unchanged for the ingest function to deal with."""
    try:
        created = object_created(body)
    except InvalidEventError:
        return UNPLACED
    return (landing_name(created.key) if created is not None else None) or UNPLACED


@functools.cache
def _client() -> Any:
    """One SQS client per process, made on first use (standard retries: a send whose answer was
    lost is sent again, and a duplicate message is ingested once, by the file's ETag)."""
    return boto3.client("sqs", config=Config(retries={"mode": "standard", "max_attempts": 5}))


@lambda_handler(Messages)
@tracer.capture_method
def handler(batch: Messages) -> dict[str, Any]:
    queue = os.environ["CASTABLE_INGEST_QUEUE_URL"]
    records = batch.records
    failures = []
    for start in range(0, len(records), SEND_BATCH):
        chunk = records[start : start + SEND_BATCH]
        entries = [{"Id": str(i), "MessageBody": r.body, "MessageGroupId": group(r.body)} for i, r in enumerate(chunk)]
        answer = _client().send_message_batch(QueueUrl=queue, Entries=entries)
        failures += [{"itemIdentifier": chunk[int(f["Id"])].message_id} for f in answer.get("Failed", [])]
    metrics.add_metric(name="MessagesRouted", unit=MetricUnit.Count, value=len(records) - len(failures))
    logger.info("routed", extra={"messages": len(records), "refused": len(failures)})
    return {"batchItemFailures": failures}
