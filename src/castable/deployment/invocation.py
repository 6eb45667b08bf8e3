"""Invoking castable's deployed functions synchronously, their errors raised as castable's own.

A Spark job commits through the commit function (``castable.spark.remote``), and the commit
function has invocations of itself check the slices of a long file list (``lambdas/commit.py``):
both wait as long as the function may run, retry a lost answer and map its errors back here.
"""

from __future__ import annotations

import json
from typing import Any

from castable import errors
from castable.errors import CastableError

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


def invoke(
    function_name: str, payload: dict[str, Any], client: Any = None, region: str | None = None
) -> dict[str, Any]:
    """Invoke a castable function synchronously with ``payload`` (which carries a ``commit_id``);
    return its result. Its castable errors are raised here as the same classes, others as
    :class:`RemoteCommitError`. Without a ``client``, :func:`lambda_client` makes one in ``region``."""
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
