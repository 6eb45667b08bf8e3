"""Amazon S3 (or any S3-compatible service) through boto3, with conditional writes.

``If-None-Match: *`` and ``If-Match`` map to ``PreconditionFailedError`` on HTTP 412 and
``ConcurrentModificationError`` on HTTP 409; throttling and transient failures are retried by
botocore's standard retry mode before they surface.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
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

from castable.errors import UnsafeStoreError
from castable.store.base import Blob, MultipartUpload, ObjectInfo, ObjectStore, StagedObject, UploadedPart
from castable.store.errors import (
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
)
from castable.store.probe import ConditionalWrites, settle_conditional_writes
from castable.store.ranges import RangeReader
from castable.store.s3client import body_attempts, translate_error

log = logging.getLogger(__name__)

_SINGLE_PUT_LIMIT = 64 * 1024 * 1024
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
        reader = RangeReader(self, key, size, etag)
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
