"""Iceberg REST catalog Lambda: ``castable.catalog`` behind API Gateway, which authorizes every
request with IAM (SigV4: Iceberg clients set ``rest.sigv4-enabled``, signing name
``execute-api``).

API Gateway's proxy event is made a :class:`castable.catalog.Request` and the catalog's answer a
proxy result; nothing else happens here. The warehouse is the deployment's bucket, whose
namespaces are ``tables`` (the deployment's tables) and ``databases`` (its databases, each a
namespace whose tables commit through its log), the only prefixes the function's role may use.

Lambda answers at most 6 MB: an answer that is larger (the metadata of a table with many
thousands of retained versions) is sent gzip-compressed to a client that accepts it, and is
refused with 500 and a message saying so otherwise, never cut short.

Environment: ``CASTABLE_WAREHOUSE`` (``s3://bucket``), ``CASTABLE_NAMESPACES`` (``tables,databases``).
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import os
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from castable.catalog import Catalog, Request, Response, Warehouse
from lambdas.runtime import logger, metrics, tracer

ANSWER_LIMIT = 6 * 1024 * 1024
"""Lambda's limit on a synchronous invocation's response (the proxy result's JSON)."""
COMPRESS_OVER = 64 * 1024
"""Answers larger than this are gzip-compressed for a client that accepts it."""


@functools.cache
def catalog() -> Catalog:
    """One catalog per process, over the deployment's warehouse."""
    tops = os.environ.get("CASTABLE_NAMESPACES", "tables,databases").split(",")
    return Catalog(Warehouse.at(os.environ["CASTABLE_WAREHOUSE"], tops=tops))


def request_of(event: APIGatewayProxyEvent) -> Request:
    """The catalog's request for an API Gateway proxy event (a REST API's ``{proxy+}`` resource)."""
    body = event.body or ""
    data = base64.b64decode(body) if event.is_base64_encoded else body.encode()
    return Request(event.http_method, event.path, event.query_string_parameters or {}, event.headers or {}, data)


def proxy_result(response: Response, accepts: str) -> dict[str, Any]:
    """The proxy result of ``response``: JSON, gzip-compressed when large and ``accepts`` allows."""
    if response.body is None:
        return {"statusCode": response.status, "headers": {}, "body": ""}
    text = json.dumps(response.body)
    headers = {"Content-Type": "application/json"}
    if len(text) > COMPRESS_OVER and "gzip" in accepts.lower():
        packed = base64.b64encode(gzip.compress(text.encode(), compresslevel=6)).decode()
        headers["Content-Encoding"] = "gzip"
        result = {"statusCode": response.status, "headers": headers, "body": packed, "isBase64Encoded": True}
    else:
        result = {"statusCode": response.status, "headers": headers, "body": text}
    if len(json.dumps(result)) > ANSWER_LIMIT:
        message = (
            f"the answer is {len(text)} bytes of JSON, more than Lambda returns (6 MB"
            f"{'' if 'gzip' in accepts.lower() else ', and the client does not accept gzip'}); "
            "expire the table's old versions (castable expire) to make its metadata smaller"
        )
        error = {"error": {"message": message, "type": "ServerErrorException", "code": 500}}
        return {"statusCode": 500, "headers": {"Content-Type": "application/json"}, "body": json.dumps(error)}
    return result


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
@event_source(data_class=APIGatewayProxyEvent)
def handler(event: APIGatewayProxyEvent, context: LambdaContext) -> dict[str, Any]:
    request = request_of(event)
    response = catalog().handle(request)
    if response.status >= 400:
        metrics.add_metric(name="Failures", unit=MetricUnit.Count, value=1)
        logger.warning(
            "request refused", extra={"path": request.path, "status": response.status, "error": response.body}
        )
    return proxy_result(response, request.header("Accept-Encoding") or "")
