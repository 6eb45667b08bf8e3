"""Iceberg REST catalog Lambda: castable's catalog application (``castable.catalog.application``,
the same ASGI object ``castable catalog serve`` runs on uvicorn) behind API Gateway, which
authorizes every request with IAM (SigV4: Iceberg clients set ``rest.sigv4-enabled``, signing
name ``execute-api``), through Mangum, which makes the proxy event an ASGI request and the
answer a proxy result. The warehouse is the deployment's bucket, whose namespaces are ``tables``
(the deployment's tables) and ``databases`` (its databases, each a namespace whose tables commit
through its log), the only prefixes the function's role may use.

Lambda answers at most 6 MB: the application gzip-compresses large answers for a client that
accepts it, and an answer still larger (the metadata of a table with many thousands of retained
versions) is refused with 500 and a message saying so, never cut short.

Environment: ``CASTABLE_WAREHOUSE`` (``s3://bucket``), ``CASTABLE_NAMESPACES`` (``tables,databases``).
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from mangum import Mangum

from castable.catalog import Catalog, Warehouse, application
from lambdas.runtime import logger, metrics, tracer

ANSWER_LIMIT = 6 * 1024 * 1024
"""Lambda's limit on a synchronous invocation's response (the proxy result's JSON)."""


@functools.cache
def adapter() -> Mangum:
    """One catalog application per process, over the deployment's warehouse."""
    tops = os.environ.get("CASTABLE_NAMESPACES", "tables,databases").split(",")
    catalog = Catalog(Warehouse.at(os.environ["CASTABLE_WAREHOUSE"], tops=tops))
    return Mangum(application(catalog), lifespan="off")


def within_limit(result: dict[str, Any]) -> dict[str, Any]:
    """``result``, or a 500 saying why when it is more than Lambda returns."""
    size = len(json.dumps(result))
    if size <= ANSWER_LIMIT:
        return result
    compressed = "gzip" in str(result.get("headers", {}).get("content-encoding", ""))
    message = (
        f"the answer is {size} bytes, more than Lambda returns (6 MB"
        f"{'' if compressed else ', and the client does not accept gzip'}); "
        "expire the table's old versions (castable expire) to make its metadata smaller"
    )
    error = {"error": {"message": message, "type": "ServerErrorException", "code": 500}}
    return {"statusCode": 500, "headers": {"Content-Type": "application/json"}, "body": json.dumps(error)}


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    result = within_limit(adapter()(event, context))  # type: ignore[arg-type]
    if result["statusCode"] >= 400:
        metrics.add_metric(name="Failures", unit=MetricUnit.Count, value=1)
        logger.warning(
            "request refused",
            extra={"path": event.get("path"), "status": result["statusCode"], "error": result["body"][:2000]},
        )
    return result
