"""The names a deployment gives what it makes for its tables: Step Functions executions (a
maintenance run per table and reason) and Glue tables (Athena's name for a published table). One
place, so the functions that start, register and look them up spell them alike."""

from __future__ import annotations

import hashlib
import re

EXECUTION_NAME_LIMIT = 80
"""Step Functions' longest execution name."""


def execution_name(table: str, tag: str) -> str:
    """The name of a maintenance run of ``table`` (a table's name, or ``<db>/<member>``) that
    ``tag`` tells apart (``tombstones-<window>``, ``<yyyymmddHHMM>``): ``/`` as ``--``, and
    over 80 characters the key's start and a digest of the whole. Step Functions refuses a
    second execution of one name, so a run started twice for one reason runs once."""
    name = f"{table.replace('/', '--')}-{tag}"
    if len(name) <= EXECUTION_NAME_LIMIT:
        return name
    digest = hashlib.sha256(table.encode()).hexdigest()[:16]
    return f"{name[: EXECUTION_NAME_LIMIT - len(tag) - 18]}-{digest}-{tag}"


def glue_table_name(table: str) -> str:
    """The Glue table (and Athena table) of ``table`` (a table's name, or ``<db>/<member>``):
    lower case, ``/`` as ``__``, any other character Athena does not take in a name as ``_``."""
    return re.sub(r"[^a-z0-9_]", "_", table.lower().replace("/", "__"))
