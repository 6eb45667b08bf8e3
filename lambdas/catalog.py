"""Catalog Lambda: publish each committed version as Iceberg metadata and keep its Glue table current.

EventBridge sends S3 "Object Created" events for castable manifests (``tables/<name>/manifest/``,
and a database member's ``databases/<db>/<name>/manifest/``) to an SQS queue; this function
drains it in batches. Each table of a batch whose ``publish.iceberg`` property is on is
published once (a publication reaches every version committed before it) and registered as
the Iceberg table ``GLUE_DATABASE.<name>`` (``castable.deployment.names.glue_table_name``), which Athena
queries. Tables without the property are skipped. A table that fails is retried through SQS
on its own: its records are returned as the batch's failures.

The deployment's other functions leave publication to this one (``CASTABLE_ICEBERG_AFTER_COMMIT``
is ``false`` for them), so no commit waits for it, whichever process made it.

Environment: ``GLUE_DATABASE``.
"""

from __future__ import annotations

import functools
import json
import os
from collections import defaultdict
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from castable.deployment.names import glue_table_name
from castable.iceberg import register_glue
from lambdas.runtime import logger, metrics, open_table, tracer


def committed(event: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    """The tables a manifest was written for, from SQS-wrapped EventBridge events: by (bucket,
    table key: a table's name or ``<db>/<member>``), the ids of the SQS records naming them."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for record in event.get("Records", []):
        detail = json.loads(record["body"]).get("detail", {})
        bucket, parts = detail.get("bucket", {}).get("name", ""), detail.get("object", {}).get("key", "").split("/")
        if len(parts) == 4 and parts[0] == "tables" and parts[2] == "manifest":
            found[bucket, parts[1]].append(record["messageId"])
        elif len(parts) == 5 and parts[0] == "databases" and parts[3] == "manifest" and parts[2] != "_database":
            found[bucket, f"{parts[1]}/{parts[2]}"].append(record["messageId"])
    return found


def table_uri(bucket: str, key: str) -> str:
    """Where the table ``key`` (a name, or ``<db>/<member>``) of the deployment's bucket lives."""
    root = "databases" if "/" in key else "tables"
    return f"s3://{bucket}/{root}/{key}"


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


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    published, skipped, failures = [], [], []
    for (bucket, key), records in sorted(committed(event).items()):
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
    metrics.add_metric(name="PublicationFailures", unit=MetricUnit.Count, value=len(failures))
    logger.info("published", extra={"published": published, "skipped": skipped})
    return {"batchItemFailures": failures, "published": published, "skipped": skipped}
