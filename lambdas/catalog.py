"""Catalog Lambda: publish each committed version as Iceberg metadata and keep its Glue table current.

EventBridge sends S3 "Object Created" events for castable manifests (``tables/<name>/manifest/``,
and a database member's ``databases/<db>/<name>/manifest/``) to an SQS queue; this function
drains it in batches. Each table of a batch whose ``publish.iceberg`` property is on is
published once (a publication reaches every version committed before it) and registered as
the Iceberg table ``GLUE_DATABASE.<name>`` (``castable.deployment.names.glue_table_name``), which Athena
queries. Tables without the property are skipped. A table that fails is retried through SQS
on its own: its records are returned as the batch's failures. Which table a manifest is of is
:func:`castable.deployment.layout.table_object`'s (never a database's own log, ``_database/``);
a message that is no S3 event is logged and returned as a failure too, so SQS keeps it in the
queue's dead letters in the end, where an alarm sees it.

The deployment's other functions leave publication to this one (``CASTABLE_ICEBERG_AFTER_COMMIT``
is ``false`` for them), so no commit waits for it, whichever process made it.

Environment: ``GLUE_DATABASE``.
"""

from __future__ import annotations

import functools
import os
from collections import defaultdict
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit

from castable.deployment.layout import table_object, table_uri
from castable.deployment.names import glue_table_name
from castable.format.layout import MANIFEST_PREFIX
from castable.iceberg import register_glue
from lambdas.events import Created, Messages, read
from lambdas.runtime import lambda_handler, logger, metrics, open_table, tracer


def committed(batch: Messages) -> tuple[dict[tuple[str, str], list[str]], list[str]]:
    """The tables a manifest was written for: by (bucket, table key: a table's name or
    ``<db>/<member>``), the ids of the messages naming them; and the ids of the malformed
    messages, logged, which are the batch's failures (SQS delivers them again, then keeps them
    in the queue's dead letters)."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    malformed = []
    for message in read(batch):
        if not isinstance(message, Created):
            logger.warning("a malformed message", extra={"message_id": message.message_id, "error": message.problem})
            malformed.append(message.message_id)
            continue
        written = table_object(message.bucket, message.key)
        if written is not None and written.folder == MANIFEST_PREFIX and "/" not in written.name:
            found[written.bucket, written.table].append(message.message_id)
    return found, malformed


@functools.cache
def _glue() -> Any:
    """One Glue client per process, made on first use."""
    return boto3.client("glue")


def publish(uri: str, key: str) -> dict[str, Any] | None:
    """Publish the table at ``uri`` and register it in Glue; ``None`` if it does not publish."""
    table = open_table(uri)
    if not table.settings.publish_iceberg:
        return None
    registered = register_glue(table, os.environ["GLUE_DATABASE"], glue_table_name(key), glue=_glue())
    return {
        "table": key,
        "version": table.version,
        "metadata_location": registered.metadata_location,
        "glue_table": f"{registered.database}.{registered.name}",
        "changed": registered.changed,
    }


@lambda_handler(Messages)
@tracer.capture_method
def handler(batch: Messages) -> dict[str, Any]:
    tables, malformed = committed(batch)
    published, skipped, failures = [], [], [{"itemIdentifier": m} for m in malformed]
    for (bucket, key), records in sorted(tables.items()):
        try:
            done = publish(table_uri(bucket, key), key)
        except Exception as e:  # this table's records are retried, the batch's other tables stand
            logger.exception("publication failed", extra={"table": key, "error_type": type(e).__name__})
            failures += [{"itemIdentifier": r} for r in records]
            continue
        if done is None:
            skipped.append(key)
        else:
            published.append(done)
    metrics.add_metric(name="TablesPublished", unit=MetricUnit.Count, value=len(published))
    metrics.add_metric(name="PublicationFailures", unit=MetricUnit.Count, value=len(failures) - len(malformed))
    logger.info("published", extra={"published": published, "skipped": skipped})
    return {"batchItemFailures": failures, "published": published, "skipped": skipped}
