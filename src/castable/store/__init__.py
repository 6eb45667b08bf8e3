"""Object stores: one small interface, a local-directory backend and an S3 backend."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from castable.errors import InvalidInputError
from castable.store.base import (
    MAX_PART_SIZE,
    MIN_PART_SIZE,
    Blob,
    MultipartUpload,
    ObjectInfo,
    ObjectStore,
    RequestStats,
    StagedObject,
    UploadedPart,
)
from castable.store.errors import (
    ConcurrentModificationError,
    ObjectNotFoundError,
    PartTooSmallError,
    PreconditionFailedError,
    StoreError,
    StoreUnavailableError,
)
from castable.store.local import LocalStore
from castable.store.s3 import S3Store
from castable.store.s3client import make_s3_client, shared_s3_client, single_writer_option

__all__ = [
    "MAX_PART_SIZE",
    "MIN_PART_SIZE",
    "Blob",
    "ConcurrentModificationError",
    "LocalStore",
    "MultipartUpload",
    "ObjectInfo",
    "ObjectNotFoundError",
    "ObjectStore",
    "PartTooSmallError",
    "PreconditionFailedError",
    "RequestStats",
    "S3Store",
    "StagedObject",
    "StoreError",
    "StoreUnavailableError",
    "UploadedPart",
    "canonical_location",
    "make_s3_client",
    "shared_s3_client",
    "store_from_uri",
]


def canonical_location(location: str) -> str:
    """``location`` spelled as a store spells its URI: Hadoop's ``file:/path`` (what Java
    engines write) is ``file:///path``."""
    if location.startswith("file:/") and not location.startswith("file://"):
        return f"file://{location.removeprefix('file:')}"
    return location


def store_from_uri(uri: str, storage_options: Mapping[str, Any] | None = None) -> ObjectStore:
    """The store for a table URI: ``s3://bucket/prefix``, ``file:///path`` or a plain path."""
    parsed = urlparse(uri)
    if parsed.scheme in ("s3", "s3a"):
        if not parsed.netloc:
            raise InvalidInputError(f"{uri!r} names no bucket")
        try:
            client = shared_s3_client(storage_options)
        except ValueError as e:
            raise InvalidInputError(str(e)) from None
        return S3Store(parsed.netloc, parsed.path, client, single_writer=single_writer_option(storage_options))
    if storage_options:
        raise InvalidInputError(f"storage_options apply to s3:// URIs only, not {uri!r}")
    if parsed.scheme == "file":
        return LocalStore(Path(unquote(parsed.path)))
    if parsed.scheme and len(parsed.scheme) > 1:
        raise InvalidInputError(f"unsupported URI scheme {parsed.scheme!r} in {uri!r}")
    return LocalStore(Path(uri))
