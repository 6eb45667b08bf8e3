"""Tables as data: the schedules a table's properties give, the tables a deployment finds in its
bucket, where landed files go, the route function's message groups, and the migration of a
per-table deployment's file."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta

import pytest

import castable
from castable.deployment.layout import landing_name
from castable.deployment.schedules import latest
from castable.format.schedules import Cron, Rate, parse

T0 = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)


def fired(expression: str, key: str, hours: int, every_minutes: int = 15) -> list[datetime]:
    """When the schedule falls due for ``key`` over ``hours``, ticking every ``every_minutes``."""
    schedule = parse(expression)
    assert schedule is not None
    ticks = [T0 + timedelta(minutes=every_minutes * i) for i in range(hours * 60 // every_minutes + 1)]
    return [w for a, b in itertools.pairwise(ticks) if (w := latest(schedule, key, a, b)) is not None]


def test_a_rate_falls_due_once_a_period_at_an_offset_of_its_own() -> None:
    """Every tick window sees a rate() table at most once, and a day's ticks see a six-hourly
    table four times, 6 hours apart; tables with the same rate fall due at different minutes,
    so a deployment's tables do not all start at once."""
    times = fired("rate(6 hours)", "events", 24)
    assert len(times) == 4 and all(b - a == timedelta(hours=6) for a, b in itertools.pairwise(times))
    assert len(fired("rate(15 minutes)", "events", 2)) == 8
    offsets = {fired("rate(1 day)", f"t{i}", 24)[0].time() for i in range(50)}
    assert len(offsets) > 40, "spread over the day"
    retried = latest(Rate(6 * 3600), "events", T0, T0 + timedelta(hours=6))
    assert retried == latest(Rate(6 * 3600), "events", T0, T0 + timedelta(hours=6)), "a retried tick agrees"


def test_cron_reads_eventbridge_fields() -> None:
    nightly = parse("cron(0 3 * * ? *)")
    assert isinstance(nightly, Cron)
    assert fired("cron(0 3 * * ? *)", "x", 48) == [T0 + timedelta(hours=3), T0 + timedelta(hours=27)]
    # 2026-11-29 is a Sunday: day-of-week 1 in EventBridge's numbering, MON-FRI is 2-6
    weekdays = fired("cron(30 8 ? * MON-FRI *)", "x", 24 * 7)
    assert [t.strftime("%a %H:%M") for t in weekdays] == [f"{d} 08:30" for d in ("Mon", "Tue", "Wed", "Thu", "Fri")]
    assert fired("cron(0/20 * * * ? *)", "x", 1) == [T0 + timedelta(minutes=m) for m in (20, 40, 60)]
    assert fired("cron(0 12 1 JAN,JUL ? 2027)", "x", 24) == []
    assert parse("none") is None


@pytest.mark.parametrize(
    ("expression", "match"),
    [
        ("rate(0 hours)", "at least 1"),
        ("rate(6 weeks)", "not rate"),
        ("cron(0 3 * * * *)", "one of day-of-month and day-of-week must be ?"),
        ("cron(0 3 L * ? *)", "day-of-month field 'L' is not readable"),
        ("cron(0 25 * * ? *)", "outside 0-23"),
        ("cron(0 3 * * ?)", "6 fields"),
        ("cron(? 3 * * ? *)", "? is for day-of-month or day-of-week only"),
        ("daily", "not rate"),
    ],
)
def test_a_bad_schedule_is_refused_saying_why(expression: str, match: str) -> None:
    with pytest.raises(castable.InvalidInputError, match=re.escape(match)):
        parse(expression)


def test_landed_keys_name_their_table_or_nothing() -> None:
    assert landing_name("landing/events/2026/a.parquet") == "events"
    assert landing_name("landing/shop/b1/batch.manifest.json") == "shop"
    for key in ("landing/a.parquet", "landing/../tables/x/a.parquet", "landing/events/../x", "other/events/a", ""):
        assert landing_name(key) is None, key
