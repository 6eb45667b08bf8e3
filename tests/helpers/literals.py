"""SQL literals for values of a table, so a test can filter on any column it did not write."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

UNITS = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def _clock(count: int, unit: str) -> tuple[int, str]:
    """Whole seconds, and the fraction as the unit's digits (empty for seconds)."""
    seconds, fraction = divmod(count, UNITS[unit])
    digits = len(str(UNITS[unit])) - 1
    return seconds, f".{fraction:0{digits}d}" if digits else ""


def literal(value: pa.Scalar) -> str | None:
    """``value`` as castable's SQL reads it back exactly (timestamps and times to the unit's
    last digit, in UTC), or ``None`` for a NULL, a NaN, binary or a nested value."""
    t = value.type
    if not value.is_valid:
        return None
    if pa.types.is_integer(t) or pa.types.is_decimal(t):
        return str(value.as_py())
    if pa.types.is_floating(t):
        x = float(value.cast(pa.float64()).as_py())
        return None if x != x else repr(x)
    if pa.types.is_boolean(t):
        return "TRUE" if value.as_py() else "FALSE"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "'" + str(value.as_py()).replace("'", "''") + "'"
    if pa.types.is_timestamp(t):
        seconds, fraction = _clock(value.cast(pa.int64()).as_py(), t.unit)
        return f"TIMESTAMP '{datetime.fromtimestamp(seconds, UTC):%Y-%m-%d %H:%M:%S}{fraction}'"
    if pa.types.is_date(t):
        return f"DATE '{value.as_py().isoformat()}'"
    if pa.types.is_time(t):
        seconds, fraction = _clock(value.cast(pa.int32() if pa.types.is_time32(t) else pa.int64()).as_py(), t.unit)
        return f"'{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{fraction}'"
    return None
