"""Amazon S3 (or any S3-compatible service) through boto3, with conditional writes.

``If-None-Match: *`` and ``If-Match`` map to ``PreconditionFailedError`` on HTTP 412 and
``ConcurrentModificationError`` on HTTP 409; throttling and transient failures are retried by
botocore's standard retry mode before they surface.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import itertools
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from castable.errors import CorruptObjectError, UnsafeStoreError
from castable.store.base import Blob, MultipartUpload, ObjectInfo, ObjectStore, StagedObject, UploadedPart
from castable.store.errors import (
    ConcurrentModificationError,
    ObjectNotFoundError,
    PartTooSmallError,
    PreconditionFailedError,
    StoreError,
    StoreUnavailableError,
)
from castable.store.probe import ConditionalWrites, settle_conditional_writes

log = logging.getLogger(__name__)

_SINGLE_PUT_LIMIT = 64 * 1024 * 1024
_COALESCE_GAP = 1024 * 1024
"""Ranges to be read closer than this are fetched in one GET: a request costs S3 about as much
time as transferring a MiB."""
_PIECE = 8 * 1024 * 1024
"""A range longer than this is fetched as parallel GETs of about this size: one S3 connection
gives tens of MB/s, so a large range read in one GET waits on a single connection."""
_FETCHERS = 32
_CONNECTIONS = 96
"""Connections a client keeps: one client serves a process's reader threads (32) and fetch
threads (``_FETCHERS``) and its writers; a request beyond the pool opens (and drops) a new one."""
_fetchers: ThreadPoolExecutor | None = None
_fetchers_lock = threading.Lock()


def _fetch_pool() -> ThreadPoolExecutor:
    """The process's threads for the pieces of ranged reads (they only wait on GETs)."""
    global _fetchers
    with _fetchers_lock:
        if _fetchers is None:
            _fetchers = ThreadPoolExecutor(_FETCHERS, thread_name_prefix="castable-fetch")
        return _fetchers


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
_PROBED: dict[tuple[str, str], ConditionalWrites] = {}
"""Probe verdicts per (endpoint, bucket), so each process probes a store once; only a verdict of
clean probes is kept (``settle_conditional_writes``), never one a lost answer could have formed."""
_CONTENT_ETAGS: dict[tuple[str, str], bool] = {}
"""By endpoint and bucket: whether a single PUT's ETag is the MD5 of its bytes (S3 with no
encryption or SSE-S3, and most S3-compatible servers; not SSE-KMS or SSE-C), learned from the
first PUT's response and unlearned by any ETag that differs."""
_PROBE_LOCK = threading.Lock()
_BUCKET_FACTS: dict[tuple[str, str, str], tuple[float, bool]] = {}
"""Bucket settings (versioning, object lock) per (endpoint, bucket, setting): when asked, and the answer."""
_BUCKET_FACT_SECONDS = 300.0
_NO_VERSIONING = {"NotImplemented", "MethodNotAllowed", "501", "405"}
"""What an S3-compatible store without versioning answers GetBucketVersioning with."""
_BODY_ERRORS = (ResponseStreamingError, IncompleteReadError, ReadTimeoutError, ConnectionClosedError)
"""Errors of a GET whose connection broke after the headers, while its body was read."""
_MAX_ATTEMPTS = 8
"""The ``max_attempts`` storage option's default: botocore's retries after a request's first send."""
_DELETE_BATCH = 1000
"""S3's most keys (or versions) in one DeleteObjects request."""


class _Version(NamedTuple):
    """One version (or delete marker) of an object in a versioned bucket."""

    full_key: str
    version_id: str
    latest: bool
    marker: bool


def _quoted(etag: str | None) -> str:
    """An ETag in S3's canonical form, in double quotes (some stores return it bare)."""
    bare = (etag or "").strip().strip('"')
    return f'"{bare}"' if bare else ""


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
    """A boto3 S3 client from castable ``storage_options`` and the usual AWS environment.

    boto3 is imported here, on the first client, not with the module: importing it costs about
    half a second, which every command on a local table would otherwise pay."""
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


_CLIENTS: dict[tuple[tuple[tuple[str, str], ...], tuple[str | None, ...]], Any] = {}
"""Clients by storage options and the AWS environment they were made under (see ``shared_s3_client``)."""
_CLIENTS_KEPT = 64
_CLIENTS_LOCK = threading.Lock()
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
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = make_s3_client(options)
            if len(_CLIENTS) >= _CLIENTS_KEPT:
                del _CLIENTS[next(iter(_CLIENTS))]
            _CLIENTS[key] = client
        return client


def _forget_clients_after_fork() -> None:
    global _CLIENTS_LOCK, _fetchers, _fetchers_lock
    _CLIENTS.clear()
    _CLIENTS_LOCK = threading.Lock()
    _fetchers, _fetchers_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_clients_after_fork)


def single_writer_option(storage_options: Mapping[str, Any] | None) -> bool:
    """The ``single_writer`` storage option as a bool (``True``/``"true"``/``"1"``)."""
    value = (storage_options or {}).get("single_writer", False)
    return value is True or str(value).lower() in ("true", "1", "yes")


def _md5_etag(data: bytes) -> str:
    return f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'


def _multipart_etag(parts: Sequence[UploadedPart]) -> str:
    """The ETag S3 gives an object completed from ``parts``: the MD5 of their MD5s, then the count."""
    digests = b"".join(bytes.fromhex(p.etag.strip('"')) for p in parts)
    return f'"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(parts)}"'


def _resent(error: ClientError | BotoCoreError) -> bool:
    """Whether the SDK sent the request that ended in ``error`` more than once (its retries of a
    lost answer or a throttled attempt): a conditional write can then have landed on an earlier send."""
    if not isinstance(error, ClientError):
        return False
    return int(error.response.get("ResponseMetadata", {}).get("RetryAttempts") or 0) > 0


class S3Store(ObjectStore):
    """Objects under ``s3://bucket/prefix``.

    ETags are kept in S3's quoted form whatever the server returns; a server whose
    ``If-Match`` wants them bare (found by the probe) gets them bare. ``single_writer`` lets a
    table be written on a store that ignores conditional writes, at the caller's word that
    no other process writes it.
    """

    def __init__(self, bucket: str, prefix: str, client: Any, *, single_writer: bool = False) -> None:
        super().__init__()
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = client
        self.single_writer = single_writer
        self._bare_if_match = False
        self._body_attempts = body_attempts(client)

    def check_conditional_writes(self) -> None:
        endpoint = self._endpoint
        with _PROBE_LOCK:
            found = _PROBED.get(endpoint)
            if found is None:
                found = _PROBED[endpoint] = settle_conditional_writes(self)
        self._bare_if_match = not found.if_match_quoted and found.if_match_unquoted
        if found.safe:
            return
        problems = "; ".join(found.problems())
        if self.single_writer:
            log.warning("%s does not honour conditional writes (%s); single-writer mode", self.uri, problems)
            return
        raise UnsafeStoreError(
            f"{self.uri} does not honour the conditional writes castable's commits rely on: {problems}. "
            "Concurrent writers would lose commits. If only one process ever writes this table, pass "
            "storage_options={'single_writer': True}."
        )

    def _match(self, etag: str) -> str:
        """An ETag as this store's ``If-Match`` wants it."""
        return etag.strip('"') if self._bare_if_match else etag

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def parents(self) -> list[ObjectStore]:
        parts = self.prefix.split("/") if self.prefix else []
        return [
            S3Store(self.bucket, "/".join(parts[:n]), self.client, single_writer=self.single_writer)
            for n in reversed(range(len(parts)))
        ]

    def child(self, name: str) -> ObjectStore:
        store = S3Store(self.bucket, self._key(name), self.client, single_writer=self.single_writer)
        store.stats = self.stats
        store._bare_if_match = self._bare_if_match
        return store

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _relative(self, full_key: str) -> str:
        return full_key[len(self.prefix) + 1 :] if self.prefix else full_key

    def put(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> ObjectInfo:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key), "Body": data}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = self._match(if_match)
        self.stats.record("PUT", bytes_out=len(data))
        try:
            response = self.client.put_object(**kwargs)
        except (ClientError, BotoCoreError) as e:
            error = translate_error(e, key)
            own = self._own_put(key, data) if isinstance(error, PreconditionFailedError) and _resent(e) else None
            if own is None:
                raise error from e
            return own
        etag = _quoted(response.get("ETag"))
        if self._endpoint not in _CONTENT_ETAGS:
            _CONTENT_ETAGS[self._endpoint] = etag == _md5_etag(data)
        return ObjectInfo(key=key, size=len(data), etag=etag) if etag else self.head(key)

    def _own_put(self, key: str, data: bytes) -> ObjectInfo | None:
        """After a 412 to a conditional PUT the SDK sent more than once: the object at ``key`` if
        it holds exactly ``data``, since then an earlier send landed and only its answer was lost
        (``None`` if it holds anything else: the condition really failed). The ETag tells where
        it is the MD5 of the bytes; otherwise the object is read back and compared."""
        log.info("%s: 412 to a resent conditional PUT; checking whether the first send landed", key)
        try:
            found = self.head(key)
            if found.size != len(data):
                return None
            if found.etag != _md5_etag(data) and self.get(key, if_match=found.etag).data != data:
                return None
        except (ObjectNotFoundError, PreconditionFailedError):  # gone, or changed since the HEAD: not ours
            return None
        return ObjectInfo(key=key, size=len(data), etag=found.etag)

    @property
    def _endpoint(self) -> tuple[str, str]:
        return str(self.client.meta.endpoint_url), self.bucket

    def content_etag(self, data: bytes) -> str | None:
        return _md5_etag(data) if _CONTENT_ETAGS.get(self._endpoint) else None

    def forget_content_etags(self) -> None:
        _CONTENT_ETAGS[self._endpoint] = False

    @contextmanager
    def staged_write(self, key: str) -> Iterator[StagedObject]:
        fd, name = tempfile.mkstemp(prefix="castable-", suffix=".part")
        os.close(fd)
        staged = StagedObject(key=key, path=Path(name))
        try:
            yield staged
            size = staged.path.stat().st_size
            if size <= _SINGLE_PUT_LIMIT:
                staged.info = (staged.put or self.put)(key, staged.path.read_bytes())
            else:
                self.stats.record("MULTIPART_UPLOAD", bytes_out=size)
                from boto3.exceptions import S3UploadFailedError

                try:
                    self.client.upload_file(str(staged.path), self.bucket, self._key(key))
                except (ClientError, BotoCoreError) as e:
                    raise translate_error(e, key) from e
                except S3UploadFailedError as e:  # boto3's transfer manager wraps the cause in its own error
                    raise StoreError(f"{key}: upload failed: {e}") from e
                staged.info = self.head(key)
        finally:
            staged.path.unlink(missing_ok=True)

    def get(self, key: str, *, byte_range: tuple[int, int] | None = None, if_match: str | None = None) -> Blob:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self._key(key)}
        if byte_range is not None:
            kwargs["Range"] = f"bytes={byte_range[0]}-{byte_range[1] - 1}"
        if if_match is not None:
            kwargs["IfMatch"] = self._match(if_match)
        for attempt in range(1, self._body_attempts + 1):
            try:
                response = self.client.get_object(**kwargs)
                data = response["Body"].read()
                break
            except _BODY_ERRORS as e:  # the SDK retries a request until its headers, not its body
                self.stats.record("GET")
                if attempt == self._body_attempts:
                    raise translate_error(e, key) from e
                log.info("%s: the connection broke while reading the body (%s); reading it again", key, e)
            except (ClientError, BotoCoreError) as e:
                self.stats.record("GET")
                raise translate_error(e, key) from e
        self.stats.record("GET", bytes_in=len(data))
        return Blob(data=data, etag=_quoted(response.get("ETag")))

    def head(self, key: str) -> ObjectInfo:
        self.stats.record("HEAD")
        try:
            r = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as e:
            raise translate_error(e, key) from e
        return ObjectInfo(key, r["ContentLength"], _quoted(r.get("ETag")), r.get("LastModified"))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        paginator = self.client.get_paginator("list_objects_v2")
        full_prefix = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        for page in self._pages(paginator.paginate(Bucket=self.bucket, Prefix=full_prefix), prefix):
            self.stats.record("LIST")
            for item in page.get("Contents", []):
                yield ObjectInfo(
                    key=self._relative(item["Key"]),
                    size=item["Size"],
                    etag=_quoted(item.get("ETag")),
                    last_modified=item["LastModified"],
                )

    def folders(self, prefix: str = "") -> builtins.list[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        full_prefix = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        names: list[str] = []
        pages = paginator.paginate(Bucket=self.bucket, Prefix=full_prefix, Delimiter="/")
        for page in self._pages(pages, prefix):
            self.stats.record("LIST")
            names += [p["Prefix"][len(full_prefix) :].rstrip("/") for p in page.get("CommonPrefixes", [])]
        return sorted(names)

    def delete(self, key: str) -> None:
        if self._versioned():
            self._delete_versions(self._versions_of([key]))
            return
        self.stats.record("DELETE")
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as e:
            raise translate_error(e, key) from e

    def delete_many(self, keys: builtins.list[str]) -> None:
        if self._versioned():
            self._delete_versions(self._versions_of(keys))
            return
        for start in range(0, len(keys), _DELETE_BATCH):
            batch = keys[start : start + _DELETE_BATCH]
            self._delete_batch(batch[0], [{"Key": self._key(k)} for k in batch])

    def purge(self, key: str) -> int:
        versions = self._versions_of([key])
        if versions:
            self._delete_versions(versions)
        else:  # a store that lists no versions for what it holds
            self.delete(key)
        return len(versions)

    def noncurrent_copies(self, prefix: str) -> builtins.list[str]:
        return sorted({self._relative(v.full_key) for v in self._noncurrent(prefix)})

    def delete_noncurrent(self, prefix: str) -> int:
        versions = self._noncurrent(prefix)
        self._delete_versions(versions)
        return len(versions)

    def object_lock_enabled(self) -> bool:
        return self._bucket_setting(
            "get_object_lock_configuration",
            {"ObjectLockConfigurationNotFoundError"},
            lambda r: r.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled") == "Enabled",
        )

    def _versioned(self) -> bool:
        """Whether the bucket keeps versions (versioning enabled, or suspended after it was)."""
        return self._bucket_setting(
            "get_bucket_versioning", _NO_VERSIONING, lambda r: r.get("Status") in ("Enabled", "Suspended")
        )

    def _bucket_setting(self, method: str, absent: set[str], read: Callable[[dict[str, Any]], bool]) -> bool:
        """A setting of the bucket: ``read`` judges what the client's ``method`` answers, and an
        error whose code is in ``absent`` means the bucket has no such setting. Asked once per
        process and again after ``_BUCKET_FACT_SECONDS`` (so a bucket whose versioning is turned
        on is treated as versioned soon after)."""
        key = (str(self.client.meta.endpoint_url), self.bucket, method)
        known = _BUCKET_FACTS.get(key)
        if known is not None and time.monotonic() - known[0] < _BUCKET_FACT_SECONDS:
            return known[1]
        self.stats.record("GET_BUCKET_SETTING")
        try:
            value = bool(read(getattr(self.client, method)(Bucket=self.bucket)))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") not in absent:
                raise translate_error(e, f"({method})") from e
            value = False
        except BotoCoreError as e:
            raise translate_error(e, f"({method})") from e
        _BUCKET_FACTS[key] = (time.monotonic(), value)
        return value

    def _versions_of(self, keys: builtins.list[str]) -> builtins.list[_Version]:
        """Every version and delete marker of ``keys``: one listing per key, several at a time."""
        with ThreadPoolExecutor(max_workers=min(16, max(len(keys), 1))) as pool:
            found = pool.map(self._listed_versions, keys, [True] * len(keys))
        return [v for versions in found for v in versions]

    def _noncurrent(self, prefix: str) -> builtins.list[_Version]:
        """Noncurrent versions and delete markers (a current marker hides nothing once the
        versions behind it are gone)."""
        return [v for v in self._listed_versions(prefix, False) if v.marker or not v.latest]

    def _listed_versions(self, key: str, exact: bool) -> builtins.list[_Version]:
        """The versions and delete markers under ``key`` (only of ``key`` itself if ``exact``)."""
        full = self._key(key)
        out = []
        paginator = self.client.get_paginator("list_object_versions")
        for page in self._pages(paginator.paginate(Bucket=self.bucket, Prefix=full), key):
            self.stats.record("LIST")
            for marker, items in ((False, page.get("Versions", [])), (True, page.get("DeleteMarkers", []))):
                out += [
                    _Version(item["Key"], item["VersionId"], bool(item.get("IsLatest")), marker)
                    for item in items
                    if not exact or item["Key"] == full
                ]
        return out

    def _delete_versions(self, versions: builtins.list[_Version]) -> None:
        """Delete ``versions``, delete markers after the rest: a marker deleted before the versions
        behind it would make the newest of them current again, for a moment or (on a failure) for good."""
        for marker in (False, True):
            group = [v for v in versions if v.marker == marker]
            for start in range(0, len(group), _DELETE_BATCH):
                batch = group[start : start + _DELETE_BATCH]
                objects = [{"Key": v.full_key, "VersionId": v.version_id} for v in batch]
                self._delete_batch(self._relative(batch[0].full_key), objects)

    def _delete_batch(self, key: str, objects: builtins.list[dict[str, str]]) -> None:
        """One DeleteObjects request; a key it could not delete fails the whole call."""
        self.stats.record("DELETE_BATCH")
        r = self._call(key, "delete_objects", Delete={"Objects": objects, "Quiet": True})
        if r.get("Errors"):
            first = r["Errors"][0]
            raise StoreError(f"{len(r['Errors'])} deletes failed, e.g. {first.get('Key')}: {first.get('Message')}")

    def sweep_temporaries(self, older_than: datetime, *, dry_run: bool) -> builtins.list[str]:
        """Nothing to sweep: S3 writes are staged in the writer's own temporary directory (gone
        with it) or as multipart uploads, which ``gc`` aborts."""
        return []

    native_input = False

    def open_input(
        self, key: str, *, size: int, etag: str | None = None, ranges: Sequence[tuple[int, int]] = ()
    ) -> pa.NativeFile:
        reader = _RangeReader(self, key, size, etag)
        reader.prefetch(ranges)
        return pa.PythonFile(reader, mode="r")

    @staticmethod
    def _pages(pages: Iterable[dict[str, Any]], key: str) -> Iterator[dict[str, Any]]:
        """A paginated listing with botocore's errors translated."""
        try:
            yield from pages
        except (ClientError, BotoCoreError) as e:
            raise translate_error(e, key) from e

    def _call(self, key: str, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, method)(Bucket=self.bucket, **kwargs)
        except (ClientError, BotoCoreError) as e:
            raise translate_error(e, key) from e

    def create_multipart(self, key: str) -> str:
        self.stats.record("CREATE_MPU")
        return str(self._call(key, "create_multipart_upload", Key=self._key(key))["UploadId"])

    def upload_part(self, key: str, upload_id: str, number: int, data: bytes) -> UploadedPart:
        self.stats.record("UPLOAD_PART", bytes_out=len(data))
        r = self._call(key, "upload_part", Key=self._key(key), UploadId=upload_id, PartNumber=number, Body=data)
        return UploadedPart(number=number, etag=_quoted(r["ETag"]), size=len(data))

    def upload_part_copy(
        self,
        key: str,
        upload_id: str,
        number: int,
        source_key: str,
        byte_range: tuple[int, int],
        *,
        source_etag: str,
    ) -> UploadedPart:
        start, end = byte_range
        # S3 enforces CopySourceIfMatch itself; the HEAD makes S3-compatible stores that ignore it
        # (moto among them) refuse a changed source too.
        if self.head(source_key).etag != source_etag:
            raise PreconditionFailedError(f"{source_key} changed since it was committed")
        self.stats.record("UPLOAD_PART_COPY", bytes_copied=end - start)
        r = self._call(
            key,
            "upload_part_copy",
            Key=self._key(key),
            UploadId=upload_id,
            PartNumber=number,
            CopySource={"Bucket": self.bucket, "Key": self._key(source_key)},
            CopySourceRange=f"bytes={start}-{end - 1}",
            CopySourceIfMatch=self._match(source_etag),
        )
        return UploadedPart(number=number, etag=_quoted(r["CopyPartResult"]["ETag"]), size=end - start)

    def complete_multipart(self, key: str, upload_id: str, parts: builtins.list[UploadedPart]) -> ObjectInfo:
        self.stats.record("COMPLETE_MPU")
        try:
            r = self._call(
                key,
                "complete_multipart_upload",
                Key=self._key(key),
                UploadId=upload_id,
                MultipartUpload={"Parts": [{"ETag": p.etag, "PartNumber": p.number} for p in parts]},
                IfNoneMatch="*",
            )
        except (PreconditionFailedError, ObjectNotFoundError) as error:
            resent = isinstance(error.__cause__, ClientError | BotoCoreError) and _resent(error.__cause__)
            own = self._own_completion(key, parts) if resent else None
            if own is None:
                raise
            return own
        etag = _quoted(r.get("ETag"))  # Ceph radosgw returns none here: ask for it
        return ObjectInfo(key=key, size=sum(p.size for p in parts), etag=etag) if etag else self.head(key)

    def _own_completion(self, key: str, parts: builtins.list[UploadedPart]) -> ObjectInfo | None:
        """After a 412 (or NoSuchUpload) to a CompleteMultipartUpload the SDK sent more than once:
        the object at ``key`` if it is this upload's, told by the ETag S3 derives from the parts'."""
        try:
            found = self.head(key)
        except ObjectNotFoundError:
            return None
        try:
            expected = _multipart_etag(parts)
        except ValueError:  # a part ETag that is no MD5 (a store of its own scheme): cannot tell
            return None
        return found if found.etag == expected and found.size == sum(p.size for p in parts) else None

    def abort_multipart(self, key: str, upload_id: str) -> None:
        self.stats.record("ABORT_MPU")
        self._call(key, "abort_multipart_upload", Key=self._key(key), UploadId=upload_id)

    def list_multipart_uploads(self, prefix: str = "") -> Iterator[MultipartUpload]:
        paginator = self.client.get_paginator("list_multipart_uploads")
        pages = paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix) if prefix else self._key(""))
        for page in self._pages(pages, prefix):
            self.stats.record("LIST_MPU")
            for u in page.get("Uploads", []):
                yield MultipartUpload(self._relative(u["Key"]), u["UploadId"], u.get("Initiated"))


class _RangeReader(io.RawIOBase):
    """A seekable file over one S3 object: every ``read`` is a ranged GET pinned to the ETag."""

    def __init__(self, store: S3Store, key: str, size: int, etag: str | None) -> None:
        super().__init__()
        self._store = store
        self._key = key
        self._size = size
        self._etag = etag
        self._pos = 0
        self._fetched: list[tuple[int, bytes]] = []

    def prefetch(self, ranges: Sequence[tuple[int, int]]) -> None:
        """GET ``ranges`` now, those closer than ``_COALESCE_GAP`` together and each longer than
        ``_PIECE`` as parallel GETs of equal pieces; later reads inside them are served from memory."""
        spans = [split(start, min(end, self._size), _PIECE) for start, end in coalesce(ranges, _COALESCE_GAP)]
        pieces = [piece for span in spans for piece in span]
        if len(pieces) == 1:
            got = iter([self._get(*pieces[0])])
        else:
            got = _fetch_pool().map(lambda piece: self._get(*piece), pieces)
        for span in spans:
            parts = [next(got) for _ in span]
            self._fetched.append((span[0][0], parts[0] if len(parts) == 1 else b"".join(parts)))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = base + offset
        return self._pos

    def read(self, size: int = -1) -> bytes:
        start = self._pos
        end = self._size if size is None or size < 0 else min(self._size, start + size)
        if end <= start:
            return b""
        data = next(
            (chunk[start - at : end - at] for at, chunk in self._fetched if at <= start and end <= at + len(chunk)),
            None,
        )
        if data is None:
            data = self._get(start, end)
        self._pos += len(data)
        return data

    def _get(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``, pinned to the committed ETag; exactly as many as asked for (a
        short answer, or a server that ignores ``Range``, would shift every byte after it)."""
        try:
            data = self._store.get(self._key, byte_range=(start, end), if_match=self._etag).data
        except PreconditionFailedError:
            raise CorruptObjectError(
                f"{self._key} changed since it was committed (ETag is no longer {self._etag})"
            ) from None
        except ObjectNotFoundError:
            raise CorruptObjectError(f"{self._key} is missing: deleted while it was being read") from None
        if len(data) != end - start:
            raise CorruptObjectError(f"{self._key}: asked for bytes {start}-{end - 1}, got {len(data)} bytes")
        return data

    def readall(self) -> bytes:
        return self.read(-1)


def split(start: int, end: int, piece: int) -> list[tuple[int, int]]:
    """``[start, end)`` as consecutive ranges of equal length, each at most ``piece`` long."""
    count = max(1, -(-(end - start) // piece))
    bounds = [start + (end - start) * i // count for i in range(count + 1)]
    return list(itertools.pairwise(bounds))


def coalesce(ranges: Iterable[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """``(start, end)`` ranges sorted and merged where they overlap or lie less than ``gap`` apart."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start - merged[-1][1] < gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
