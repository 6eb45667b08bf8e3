"""Names the stack gives and the functions look up: one place, so both spell them alike."""

from __future__ import annotations

import hashlib
import re

SCHEDULE_NAME_LIMIT = 64
"""EventBridge Scheduler's longest schedule name."""


def schedule_name(table: str) -> str:
    """The maintenance schedule of ``table`` (a table's name, or ``<db>/<member>``) in the
    deployment's schedule group: the key with ``/`` as ``.``, or, over 64 characters, its start
    and a digest of the whole."""
    name = table.replace("/", ".")
    if len(name) <= SCHEDULE_NAME_LIMIT:
        return name
    digest = hashlib.sha256(table.encode()).hexdigest()[:16]
    return f"{name[: SCHEDULE_NAME_LIMIT - 17]}-{digest}"


def glue_table_name(table: str) -> str:
    """The Glue table (and Athena table) of ``table`` (a table's name, or ``<db>/<member>``):
    lower case, ``/`` as ``__``, any other character Athena does not take in a name as ``_``."""
    return re.sub(r"[^a-z0-9_]", "_", table.lower().replace("/", "__"))
