"""The boto3 clients S3 stores talk through: made from castable's ``storage_options`` and the
usual AWS environment, shared by every store of a process, and their errors translated into the
store errors every backend raises.

boto3 is imported on the first client, not with this module: importing it costs about half a
second, which every command on a local table would otherwise pay.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from castable.store.errors import (
    ConcurrentModificationError,
    ObjectNotFoundError,
    PartTooSmallError,
    PreconditionFailedError,
    StoreError,
    StoreUnavailableError,
)
from castable.store.process import ProcessCache

_CONNECTIONS = 96
"""Connections a client keeps: one client serves a process's reader threads (32) and fetch
threads (32, ``castable.store.ranges``) and its writers; a request beyond the pool opens (and
drops) a new one."""
_SESSION_OPTIONS = {
    "aws_access_key_id": "aws_access_key_id",
    "aws_secret_access_key": "aws_secret_access_key",
    "aws_session_token": "aws_session_token",
    "region": "region_name",
    "region_name": "region_name",
    "profile": "profile_name",
    "profile_name": "profile_name",
}
_KNOWN_OPTIONS = {*_SESSION_OPTIONS, "endpoint_url", "max_attempts", "single_writer"}
_MAX_ATTEMPTS = 8
"""The ``max_attempts`` storage option's default: botocore's retries after a request's first send."""


def translate_error(error: ClientError | BotoCoreError, key: str) -> Exception:
    """Map a botocore error to the store error with the same meaning on every backend."""
    if isinstance(error, BotoCoreError):  # no credentials, endpoint unreachable, connection lost, ...
        return StoreUnavailableError(
            f"could not reach the store for {key}: {error}. Check the AWS credentials (environment, profile "
            "or role), the region, and endpoint_url if the store is not AWS S3."
        )
    code = str(error.response.get("Error", {}).get("Code", ""))
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in ("PreconditionFailed", "412") or status == 412:
        return PreconditionFailedError(f"{key}: precondition failed")
    if code == "ConditionalRequestConflict" or status == 409:
        return ConcurrentModificationError(f"{key}: conflicting conditional request")
    if code in ("NoSuchKey", "NoSuchUpload", "404", "NotFound") or status == 404:
        return ObjectNotFoundError(key)
    if code == "EntityTooSmall":
        return PartTooSmallError(f"{key}: a part but the last is under 5 MiB")
    return StoreError(f"{key}: {code or status}: {error}")


def body_attempts(client: Any) -> int:
    """How often a GET's body is read before its error surfaces: as often as the client's retry
    budget lets it send a request (``max_attempts``), since the SDK retries a request only until
    its headers arrive."""
    config = getattr(client.meta, "config", None)  # a client not made by botocore has none
    retries = (config.retries if config is not None else None) or {}
    return max(1, int(retries.get("total_max_attempts") or retries.get("max_attempts") or _MAX_ATTEMPTS + 1))


def make_s3_client(storage_options: Mapping[str, Any] | None = None) -> Any:
    """A boto3 S3 client from castable ``storage_options`` and the usual AWS environment."""
    import boto3.session
    from botocore.config import Config

    options = dict(storage_options or {})
    unknown = set(options) - _KNOWN_OPTIONS
    if unknown:
        raise ValueError(f"unknown storage options {sorted(unknown)}; known: {sorted(_KNOWN_OPTIONS)}")
    session = boto3.session.Session(**{_SESSION_OPTIONS[k]: v for k, v in options.items() if k in _SESSION_OPTIONS})
    config = Config(
        retries={"mode": "standard", "max_attempts": int(options.get("max_attempts", _MAX_ATTEMPTS))},
        max_pool_connections=_CONNECTIONS,
    )
    return session.client("s3", endpoint_url=options.get("endpoint_url"), config=config)


_CLIENTS: ProcessCache[Any] = ProcessCache(kept=64)
"""Clients by storage options and the AWS environment they were made under (see ``shared_s3_client``)."""
_ENVIRONMENT = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)
"""The environment variables a new boto3 session reads for credentials, region and endpoint."""


def shared_s3_client(storage_options: Mapping[str, Any] | None = None) -> Any:
    """This process's client for ``storage_options`` and the current AWS environment, made on
    first use and shared by every store after it: making a boto3 client costs 50-300 ms of CPU,
    more than the requests of opening a table. Clients are thread-safe and refresh temporary
    credentials themselves; a changed environment variable gets a new client, and a forked
    child makes its own for the stores it opens (a client's connections must not be shared
    across processes; a store opened before the fork keeps the parent's)."""
    options = dict(storage_options or {})
    key = (tuple(sorted((k, repr(v)) for k, v in options.items())), tuple(os.environ.get(n) for n in _ENVIRONMENT))
    return _CLIENTS.get(key, lambda: make_s3_client(options))


def single_writer_option(storage_options: Mapping[str, Any] | None) -> bool:
    """The ``single_writer`` storage option as a bool (``True``/``"true"``/``"1"``)."""
    value = (storage_options or {}).get("single_writer", False)
    return value is True or str(value).lower() in ("true", "1", "yes")
