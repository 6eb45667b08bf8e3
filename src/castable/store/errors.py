"""Errors every object store raises for the same conditions, whatever the backend."""

from __future__ import annotations

from castable.errors import CastableError


class StoreError(CastableError):
    """An object-store request failed."""


class StoreUnavailableError(StoreError):
    """The store could not be reached or would not accept the request's identity: no or bad
    credentials, an unreachable endpoint, a dropped connection. The cause is kept."""


class ObjectNotFoundError(StoreError):
    """The key does not exist (HTTP 404)."""


class PreconditionFailedError(StoreError):
    """A conditional request lost: the key exists (If-None-Match) or changed (If-Match); HTTP 412."""


class ConcurrentModificationError(StoreError):
    """Another conditional write to the same key was in flight (S3's 409 ConditionalRequestConflict).

    Retryable: the caller re-reads and tries again.
    """


class PartTooSmallError(StoreError):
    """A multipart upload has a non-last part under the 5 MiB minimum (S3's EntityTooSmall)."""
