"""Times as castable writes and reads them: UTC ISO 8601 in manifests and logs, and ``as_of``."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

from castable.errors import InvalidInputError


def format_time(t: datetime) -> str:
    """A commit time as manifests and database logs store it (UTC, microseconds, ``Z``)."""
    return t.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_time(s: str) -> datetime:
    """A stored commit time; ``ValueError`` if it has no time zone."""
    t = datetime.fromisoformat(s.replace("Z", "+00:00"))
    if t.tzinfo is None:
        raise ValueError(f"created_at {s!r} has no time zone")
    return t


def now() -> datetime:
    """The commit time of a version written now."""
    return datetime.now(UTC)


def as_datetime(value: datetime | str) -> datetime:
    """``as_of`` as a datetime: one already, or an ISO 8601 string such as ``2026-11-22T04:00:00Z``."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value)
    raise InvalidInputError(f"as_of must be a datetime or an ISO 8601 time such as 2026-11-22T04:00:00Z, not {value!r}")
