"""Values as castable's SQL means them, without a parser: a literal coerced to a column's type
(lossless or refused), a column name resolved as SQL resolves it, and the operand helpers that
compiled expressions evaluate with on Arrow columns (:mod:`castable.read.sql_value`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import time
from decimal import Decimal
from typing import Any, TypeAlias

import pyarrow as pa

Datum: TypeAlias = pa.Array | pa.ChunkedArray | pa.Scalar
"""What an expression gives for a table of rows: one value per row, or one for all of them."""
Evaluate: TypeAlias = Callable[[pa.Table], Datum]
"""A compiled expression: rows in, its value for them out."""


def columns_named(name: str, names: list[str]) -> list[str]:
    """The columns SQL's ``name`` may mean: itself, else those equal to it ignoring case."""
    if name in names:
        return [name]
    return [n for n in names if n.lower() == name.lower()]


def _timestamp_literal(value: str, target: pa.TimestampType) -> pa.Scalar:
    """An ISO 8601 text as a timestamp of the column's type: parsed in the column's unit, else
    in microseconds (Arrow's parser refuses more fraction digits than the unit has, even zeros:
    ``12:00:00.500000`` for a milliseconds column) and cast exactly, a finer value refused; a
    text without a zone in a zoned column read as UTC, as Arrow stores zoned timestamps."""
    for unit in dict.fromkeys((target.unit, "ns" if target.unit == "ns" else "us")):
        for zone in dict.fromkeys((target.tz, None)):
            try:
                return pa.scalar(value).cast(pa.timestamp(unit, zone)).cast(target)
            except pa.ArrowInvalid:
                continue
    raise ValueError(f"{value!r} is not a {target} value")


def coerce_literal(value: Any, target: pa.DataType) -> pa.Scalar:
    """A Python literal as a scalar of the column type, refusing lossy conversions."""
    if isinstance(value, Decimal) and not pa.types.is_decimal(target):
        value = int(value) if value == value.to_integral_value() and not pa.types.is_floating(target) else float(value)
    if isinstance(value, float) and pa.types.is_integer(target):
        if not value.is_integer():
            raise ValueError("not an integer")
        value = int(value)
    if isinstance(value, str) and not (pa.types.is_string(target) or pa.types.is_large_string(target)):
        if pa.types.is_decimal(target):
            return pa.scalar(Decimal(value), type=target)
        if pa.types.is_time(target):  # Arrow casts no text to a time of day
            parsed = time.fromisoformat(value)
            scalar = pa.scalar(parsed, type=target)
            if scalar.as_py() != parsed:
                raise ValueError(f"{value!r} is finer than {target} holds")
            return scalar
        if pa.types.is_timestamp(target):
            return _timestamp_literal(value, target)
        return pa.scalar(value).cast(target)
    return pa.scalar(value, type=target)


def cast_like(value: Datum, target: pa.DataType) -> Datum:
    """``value`` as ``target``: a text literal parsed as the type, anything else cast."""
    if isinstance(value, pa.Scalar) and pa.types.is_string(value.type) and not pa.types.is_string(target):
        return coerce_literal(value.as_py(), target)
    if isinstance(value, pa.Scalar) and pa.types.is_null(value.type):
        return pa.scalar(None, type=target)
    return value.cast(target)


def aligned(values: list[Datum]) -> list[Datum]:
    """Text literals and NULLs among ``values`` typed as the first value that is neither."""
    typed = [v.type for v in values if not loose(v)]
    if not typed:
        return values
    return [cast_like(v, typed[0]) if loose(v) else v for v in values]


def loose(value: Datum) -> bool:
    """Whether ``value`` takes its type from its neighbours: a NULL or a text literal."""
    return isinstance(value, pa.Scalar) and (pa.types.is_null(value.type) or pa.types.is_string(value.type))


def as_text(value: Datum) -> Datum:
    """``value`` as text, for ``||`` and ``CONCAT``."""
    return value if pa.types.is_string(value.type) or pa.types.is_large_string(value.type) else value.cast(pa.string())


def as_array(value: Datum, rows: int) -> pa.Array:
    """``value`` as one array of ``rows`` values (a scalar repeated)."""
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, rows)
    return value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
