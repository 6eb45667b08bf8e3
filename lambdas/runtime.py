"""What every castable Lambda shares: Powertools instrumentation, event validation, errors.

A handler is written as ``def handle(event: Model) -> dict`` and wrapped by :func:`lambda_handler`,
which adds the Logger (with the request context), Tracer and Metrics, validates the raw event
against the pydantic model, and turns a malformed event into an ``InvalidEventError`` whose
message lists every problem. castable's own errors propagate with their class names, so a
Step Functions ``Retry``/``Catch`` or a caller of ``Invoke`` can match on ``errorType``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field, RootModel, ValidationError

import castable

logger = Logger()
tracer = Tracer()
metrics = Metrics(namespace="castable")

M = TypeVar("M", bound=BaseModel)

ERASURE_COMMIT_ID_LIMIT = 200
"""The longest commit id an erasure takes: its steps commit as ``<id>/tombstone`` and
``<id>/splice/<16 hex digits>``, within the library's 256 characters."""
TableUri = Annotated[str, Field(pattern=r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")]
"""An ``s3://bucket/prefix`` table location (functions only serve tables on S3)."""


class InvalidEventError(castable.InvalidInputError):
    """The event does not have the shape this function expects; nothing was changed."""


def parse(model: type[M], event: Any) -> M:
    try:
        return model.model_validate(event)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'event'}: {err['msg']}" for err in e.errors())
        raise InvalidEventError(f"invalid {model.__name__}: {problems}") from None


def _path(uri: str) -> str:
    """The key prefix in its bucket of the table (or database) at ``s3://`` URI ``uri``."""
    return uri.removeprefix("s3://").partition("/")[2].strip("/") or "/"


def table_dimension(uri: object) -> None:
    """Give this invocation's metrics a ``table`` dimension: the table's (or database's) key
    prefix in its bucket, so each table's rows, failures and conflicts can be told apart."""
    if isinstance(uri, str) and uri.startswith("s3://"):
        metrics.add_dimension(name="table", value=_path(uri))


def count(name: str, value: float, uri: str | None) -> None:
    """Count ``value`` of metric ``name`` for the table (or database) at ``s3://`` URI ``uri``
    (its ``table`` dimension as :func:`table_dimension` gives it), in a metric of its own: one
    invocation of a shared function serves several tables, so the dimension cannot be the invocation's.
    Without ``uri``, for the invocation (its own dimensions)."""
    if uri is None:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        return
    with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace="castable") as metric:
        metric.add_dimension(name="table", value=_path(uri))


def _subject(parsed: BaseModel) -> str | None:
    """The table (or database) an event is about, inside a union event's root too."""
    request = parsed.root if isinstance(parsed, RootModel) else parsed
    found = getattr(request, "table", None) or getattr(request, "database", None)
    return found if isinstance(found, str) else None


def lambda_handler(
    model: type[M],
) -> Callable[[Callable[[M], dict[str, Any]]], Callable[[Any, LambdaContext], dict[str, Any]]]:
    """Wrap ``handle(parsed_event)`` as an instrumented Lambda entry point."""

    def decorate(handle: Callable[[M], dict[str, Any]]) -> Callable[[Any, LambdaContext], dict[str, Any]]:
        @functools.wraps(handle)
        @logger.inject_lambda_context(clear_state=True)
        @tracer.capture_lambda_handler
        @metrics.log_metrics
        def entry(event: Any, context: LambdaContext) -> dict[str, Any]:
            try:
                parsed = parse(model, event)
                subject = _subject(parsed)
                logger.append_keys(table=subject)
                table_dimension(subject)
                return handle(parsed)
            except castable.CastableError as e:
                metrics.add_metric(name="Failures", unit=MetricUnit.Count, value=1)
                logger.warning("request failed", extra={"error_type": type(e).__name__, "error": str(e)})
                raise

        return entry

    return decorate


def plan_location(root: str, key: str) -> dict[str, str]:
    """Where a work plan at ``key`` under the ``s3://`` URI ``root`` is, as a Distributed Map's
    ItemReader names it (``bucket``, ``key``) and as a later step reads it (``uri``)."""
    uri = f"{root}/{key}"
    bucket, _, full_key = uri.removeprefix("s3://").partition("/")
    return {"bucket": bucket, "key": full_key, "uri": uri}


def open_table(uri: str) -> castable.Table:
    """The table at ``uri``; S3 settings (endpoint, region, credentials) come from the environment."""
    return castable.open_table(uri)


def maintenance_input(uri: str) -> dict[str, Any]:
    """The maintenance workflow's input for the table at ``uri``: retention and grace from the
    table's own properties (``history.*``, ``gc.orphan-grace-seconds``)."""
    return {"table": uri, "retain_versions": None, "retain_hours": None, "grace_hours": None}
