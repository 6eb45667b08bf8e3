"""Committing through the deployed commit Lambda (``lambdas/commit.py``) instead of directly.

The function re-checks every file (exists, under ``data/``, the table's schema) with its own
role, so a job needs no write access to the table's manifests. Its errors come back with
their castable class names and are raised here as the same classes (:mod:`castable.deployment.invocation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from castable import errors
from castable.deployment.invocation import invoke
from castable.ops.writes import AddMode

MAX_FILES = 10_000
"""The most paths one commit event may list (the function's event model allows no more); a
file list (:func:`castable.ops.register.write_file_list`) has no cap."""


def invoke_commit(
    function_name: str,
    table_uri: str,
    paths: Sequence[str] | None,
    commit_id: str,
    *,
    file_list: str | None = None,
    mode: AddMode = "append",
    where: str | None = None,
    client: Any = None,
    region: str | None = None,
) -> dict[str, Any]:
    """Invoke the commit function synchronously; return its result (``version``, ``summary``).

    The files are ``paths`` (at most :data:`MAX_FILES`; the function reads their footers), or
    the ``file_list`` the job left under the table (any number of entries, statistics
    included; the function checks them by listing their directories). ``mode`` and ``where`` are
    ``Table.add_files``'s; an append's event leaves them out. The files were just written by
    castable's writer on the executors, so the function never decodes their pages again
    (``"verify": "footer"``). Without a ``client``, one is made in ``region`` (the table's,
    from its storage options)."""
    if (paths is None) == (file_list is None):
        raise errors.InvalidInputError("give the commit either paths or a file list")
    if paths is not None and len(paths) > MAX_FILES:
        raise errors.InvalidInputError(
            f"{len(paths)} paths exceed the {MAX_FILES} one event takes; commit a file list instead"
        )
    payload: dict[str, Any] = {"table": table_uri, "commit_id": commit_id, "verify": "footer"}
    payload |= {"files": list(paths)} if paths is not None else {"file_list": file_list}
    if mode != "append":
        payload["mode"] = mode
    if where is not None:
        payload["where"] = where
    return invoke(function_name, payload, client, region)


def invoke_add_columns(
    function_name: str,
    table_uri: str,
    columns: Sequence[pa.Field],
    commit_id: str,
    *,
    client: Any = None,
    region: str | None = None,
) -> dict[str, Any]:
    """Have the commit function add nullable ``columns`` to the table in one commit (a Spark
    write with ``mergeSchema``, before its files are written with them); return its result."""
    payload = {
        "table": table_uri,
        "commit_id": commit_id,
        "add_columns": [{"name": c.name, "type": str(c.type)} for c in columns],  # castable.inputs.types parses it
    }
    return invoke(function_name, payload, client, region)
