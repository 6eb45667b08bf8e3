"""Spark's pushed-down filters (Spark 4.1+) as castable predicates, where the meaning is exact."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from castable.predicate import Compare, InList, IsNull, Like, Not, Predicate, coerce_literal

_COMPARISONS = {
    "EqualTo": "=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
}
_LIKES = {"StringStartsWith": "{}%", "StringEndsWith": "%{}", "StringContains": "%{}%"}


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _literal(value: Any, target: pa.DataType) -> pa.Scalar | None:
    """``value`` as a scalar of the column type; ``None`` when the conversion is not exact.

    Spark hands over timestamps as naive datetimes in the session's zone, which castable cannot
    know, so timestamp filters stay with Spark.
    """
    if pa.types.is_timestamp(target) or isinstance(value, list | dict):
        return None
    try:
        return coerce_literal(value, target)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None


def to_predicate(spark_filter: Any, schema: pa.Schema) -> Predicate | None:
    """The castable predicate for one Spark filter, or ``None`` to leave it to Spark."""
    kind = type(spark_filter).__name__
    if kind == "Not":
        inner = to_predicate(spark_filter.child, schema)
        return None if inner is None else Not(inner)
    attribute = getattr(spark_filter, "attribute", ())
    if len(attribute) != 1 or attribute[0] not in schema.names:
        return None
    column = attribute[0]
    target = schema.field(column).type
    if kind in ("IsNull", "IsNotNull"):
        return IsNull(column, negated=kind == "IsNotNull")
    if kind in _COMPARISONS:
        value = _literal(spark_filter.value, target)
        return None if value is None else Compare(column, _COMPARISONS[kind], value)
    if kind == "In":
        values = [_literal(v, target) for v in spark_filter.value]
        if any(v is None for v in values):
            return None
        return InList(column, pa.array([v.as_py() for v in values], type=target))  # type: ignore[union-attr]
    if kind in _LIKES and (pa.types.is_string(target) or pa.types.is_large_string(target)):
        return Like(column, _LIKES[kind].format(_escape_like(str(spark_filter.value))))
    return None
