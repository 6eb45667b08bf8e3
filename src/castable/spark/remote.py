"""Committing through the deployed commit Lambda (``lambdas/commit.py``) instead of directly.

The function re-checks every file (exists, under ``data/``, the table's schema) with its own
role, so a job needs no write access to the table's manifests. Its errors come back with
their castable class names and are raised here as the same classes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from castable import errors
from castable.errors import CastableError
from castable.writes import AddMode

MAX_FILES = 10_000
"""The most paths one commit event may list (the function's event model allows no more); a
file list (:func:`castable.register.write_file_list`) has no cap."""
READ_TIMEOUT_SECONDS = 960
"""How long the caller waits for the function's answer: longer than the function may run
(infra/stack.py gives it Lambda's 900 s at most, for 10,000 footers), where boto3's default of
60 s would give up on a commit still running and invoke it again."""


class RemoteCommitError(CastableError):
    """The commit function failed with an error that is not one of castable's own."""


def lambda_client(region: str | None = None) -> Any:
    """A Lambda client (in ``region``, or the environment's) that waits as long as the commit
    function may run, with TCP keepalives so a NAT gateway does not drop the quiet connection
    (it does after 350 s idle). An invocation whose answer is lost is sent again (standard retry
    mode, 4 attempts, with backoff; the SDK's legacy default gives up after 3 lost answers in a
    row and retries throttling without jitter): every commit event carries its ``commit_id``, so
    a second invocation returns the version the first made."""
    import boto3
    from botocore.config import Config

    config = Config(
        read_timeout=READ_TIMEOUT_SECONDS, tcp_keepalive=True, retries={"mode": "standard", "max_attempts": 4}
    )
    return boto3.client("lambda", region_name=region, config=config)


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
    return _invoke(function_name, payload, client, region)


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
        "add_columns": [{"name": c.name, "type": str(c.type)} for c in columns],  # castable.types parses it
    }
    return _invoke(function_name, payload, client, region)


def _invoke(function_name: str, payload: dict[str, Any], client: Any, region: str | None) -> dict[str, Any]:
    """Invoke the function synchronously; its castable errors raised here as the same classes."""
    if client is None:
        client = lambda_client(region)
    response = client.invoke(FunctionName=function_name, Payload=json.dumps(payload).encode())
    body = json.loads(response["Payload"].read() or b"null")
    if response.get("FunctionError"):
        error_type = str((body or {}).get("errorType", "Unhandled"))
        message = f"{function_name}: {(body or {}).get('errorMessage', body)}"
        cls = getattr(errors, error_type, None)
        if cls is errors.CommitStateUnknownError:
            raise errors.CommitStateUnknownError(message, str(payload["commit_id"]))
        if isinstance(cls, type) and issubclass(cls, CastableError):
            raise cls(message)
        raise RemoteCommitError(f"{error_type}: {message}")
    return dict(body)
