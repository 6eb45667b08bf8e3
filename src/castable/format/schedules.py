"""Maintenance schedules as a table property (``maintenance.schedule``): EventBridge's ``rate()``
and ``cron()`` expressions, read and checked when the property is set.

What the deployment does with one, finding when it falls due, is
:mod:`castable.deployment.schedules`: a table needs nothing of its deployment to check its
properties.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from castable.errors import InvalidInputError

NEVER = "none"
"""The schedule of a table its deployment does not maintain."""

_RATE = re.compile(r"rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)")
_UNITS = {"minute": 60, "hour": 3600, "day": 86400}
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_FIELDS: list[tuple[str, int, int, list[str]]] = [
    ("minutes", 0, 59, []),
    ("hours", 0, 23, []),
    ("day-of-month", 1, 31, []),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 1, 7, _DAYS),
    ("year", 1970, 2199, []),
]


@dataclass(frozen=True)
class Rate:
    """``rate(N units)``: every ``seconds``."""

    seconds: int


@dataclass(frozen=True)
class Cron:
    """``cron(minutes hours day-of-month month day-of-week year)``, as EventBridge reads it (UTC;
    day-of-week 1 is Sunday; one of the two day fields is ``?``). ``L``, ``W`` and ``#`` are not taken."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int] | None
    months: frozenset[int]
    weekdays: frozenset[int] | None
    years: frozenset[int]


Schedule = Rate | Cron


def parse(expression: str) -> Schedule | None:
    """The schedule ``expression`` gives (``None`` for ``none``); ``InvalidInputError`` naming
    what is wrong if it is not one."""
    text = expression.strip()
    if text.lower() == NEVER:
        return None
    rate = _RATE.fullmatch(text)
    if rate is not None:
        count = int(rate.group(1))
        if count < 1:
            raise InvalidInputError(f"schedule {expression!r}: a rate is at least 1")
        return Rate(count * _UNITS[rate.group(2).removesuffix("s")])
    if text.startswith("cron(") and text.endswith(")"):
        return _cron(expression, text[5:-1].split())
    raise InvalidInputError(
        f"schedule {expression!r} is not rate(N minutes|hours|days), cron(min hour day month weekday year) or none"
    )


def _cron(expression: str, fields: list[str]) -> Cron:
    if len(fields) != len(_FIELDS):
        raise InvalidInputError(f"schedule {expression!r}: cron() takes 6 fields, not {len(fields)}")
    sets = [_field(expression, text, *spec) for text, spec in zip(fields, _FIELDS, strict=True)]
    days, weekdays = sets[2], sets[4]
    if (days is None) == (weekdays is None):
        raise InvalidInputError(f"schedule {expression!r}: one of day-of-month and day-of-week must be ?, not both")
    minutes, hours, months, years = sets[0], sets[1], sets[3], sets[5]
    if minutes is None or hours is None or months is None or years is None:
        raise InvalidInputError(f"schedule {expression!r}: ? is for day-of-month or day-of-week only")
    return Cron(minutes, hours, days, months, weekdays, years)


def _field(expression: str, text: str, name: str, low: int, high: int, names: list[str]) -> frozenset[int] | None:
    """One cron field's values (``None`` for ``?``)."""
    if text == "?":
        return None
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if span == "*":
                first, last = low, high
            else:
                a, _, b = span.partition("-")
                first = _value(a, names, low)
                last = _value(b, names, low) if b else (high if step_text else first)
        except ValueError:
            raise InvalidInputError(f"schedule {expression!r}: {name} field {text!r} is not readable") from None
        if not low <= first <= last <= high or step < 1:
            raise InvalidInputError(f"schedule {expression!r}: {name} field {text!r} is outside {low}-{high}")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def _value(text: str, names: list[str], low: int) -> int:
    upper = text.upper()
    return names.index(upper) + low if upper in names else int(text)
