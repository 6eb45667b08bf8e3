"""When a table's maintenance schedule falls due: the deployment's side of ``maintenance.schedule``
(the property's value, read and checked, is :mod:`castable.format.schedules`).

A deployment does not give each table a schedule of its own: one tick (every 15 minutes, say)
asks which tables fell due since the tick before. The answer is a pure function of the
expression, the table and the window, so a tick that is retried, or two ticks that overlap,
agree on it. A ``rate()`` table falls due at a fixed offset within its period, derived from its
name, so tables with the same rate spread over the period instead of all falling due at once.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from castable.format.schedules import Cron, Rate, Schedule


def latest(schedule: Schedule, key: str, start: datetime, end: datetime) -> datetime | None:
    """The last time in ``(start, end]`` that ``schedule`` falls due for the table ``key`` (a
    table's name, or ``<db>/<member>``), if it does."""
    if isinstance(schedule, Rate):
        return _rate_latest(schedule, key, start, end)
    return _cron_latest(schedule, start, end)


def _rate_latest(rate: Rate, key: str, start: datetime, end: datetime) -> datetime | None:
    """The last time in ``(start, end]`` the rate fires for ``key``: every period, at an offset
    (whole minutes) that the key's digest gives."""
    period = rate.seconds
    offset = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % period // 60 * 60
    at = int(end.timestamp()) // 60 * 60
    fired = at - (at - offset) % period
    when = datetime.fromtimestamp(fired, UTC)
    return when if when > start else None


def _matches(cron: Cron, t: datetime) -> bool:
    weekday = (t.isoweekday() % 7) + 1  # Sunday 1 ... Saturday 7
    day = cron.days is None or t.day in cron.days
    on_weekday = cron.weekdays is None or weekday in cron.weekdays
    return (
        t.minute in cron.minutes
        and t.hour in cron.hours
        and t.month in cron.months
        and t.year in cron.years
        and day
        and on_weekday
    )


def _cron_latest(cron: Cron, start: datetime, end: datetime) -> datetime | None:
    """The last minute in ``(start, end]`` that matches (the table plays no part)."""
    t = end.replace(second=0, microsecond=0)
    while t > start:
        if _matches(cron, t):
            return t
        t -= timedelta(minutes=1)
    return None
