"""The object-store interface castable needs, and request accounting shared by every backend.

The interface is deliberately small (docs/format.md section 7): put-if-absent, put-if-match, get
(with a byte range and If-Match), head, list, delete, and random-access reads for Parquet.
Keys are relative to the table root and always use ``/``.
"""

from __future__ import annotations

import builtins
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from castable.store.errors import ObjectNotFoundError

MIN_PART_SIZE = 5 * 1024 * 1024
"""S3's minimum size of every multipart part but the last."""
MAX_PART_SIZE = 5 * 1024 * 1024 * 1024
"""S3's maximum part size."""


@dataclass(frozen=True)
class ObjectInfo:
    """What a store knows about one object: its key, size in bytes, ETag and modification time."""

    key: str
    size: int
    etag: str
    last_modified: datetime | None = None


@dataclass(frozen=True)
class Blob:
    """The bytes of an object (or of a range of it) together with the object's ETag."""

    data: bytes
    etag: str


@dataclass(frozen=True)
class UploadedPart:
    """One part of a multipart upload: its number (1-based), ETag and size."""

    number: int
    etag: str
    size: int


@dataclass(frozen=True)
class MultipartUpload:
    """An incomplete multipart upload (for clean-up of failed writers)."""

    key: str
    upload_id: str
    initiated: datetime | None


@dataclass
class RequestStats:
    """Counts requests by kind and bytes moved (in, out, and copied server-side) per store."""

    requests: Counter[str] = field(default_factory=Counter)
    bytes_in: int = 0
    bytes_out: int = 0
    bytes_copied: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, kind: str, *, bytes_in: int = 0, bytes_out: int = 0, bytes_copied: int = 0) -> None:
        with self._lock:
            self.requests[kind] += 1
            self.bytes_in += bytes_in
            self.bytes_out += bytes_out
            self.bytes_copied += bytes_copied

    def snapshot(self) -> dict[str, int]:
        """A plain dict of the counters: one entry per request kind plus ``bytes_in``/``bytes_out``."""
        with self._lock:
            return {
                **self.requests,
                "bytes_in": self.bytes_in,
                "bytes_out": self.bytes_out,
                "bytes_copied": self.bytes_copied,
            }

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.bytes_in = 0
            self.bytes_out = 0
            self.bytes_copied = 0


class ObjectStore(ABC):
    """A flat key space under one table root with S3's conditional-write semantics."""

    native_input: bool = True
    """Whether :meth:`open_input` gives a native Arrow file. A file over Python (boto3) must be
    read on the caller's thread: one of Arrow's own threads calling into Python, or releasing
    the bytes it read, after the interpreter has begun to exit aborts the process."""

    def __init__(self) -> None:
        self.stats = RequestStats()

    @property
    @abstractmethod
    def uri(self) -> str:
        """The URI of the root this store is scoped to."""

    @abstractmethod
    def parents(self) -> builtins.list[ObjectStore]:
        """Stores rooted at each prefix that encloses this root, nearest first."""

    @abstractmethod
    def child(self, name: str) -> ObjectStore:
        """The store rooted at ``name`` (one path segment) under this root; it counts its
        requests in this store's ``stats``."""

    @abstractmethod
    def check_conditional_writes(self) -> None:
        """Raise ``UnsafeStoreError`` unless the store honours If-None-Match and If-Match.

        Called before a table is created or written, so a store that would let concurrent
        writers overwrite each other's commits is refused before anything is written.
        """

    @abstractmethod
    def put(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> ObjectInfo:
        """Write ``data`` at ``key``.

        ``if_none_match=True`` writes only if the key does not exist; ``if_match`` only if the
        current ETag equals it. A lost condition raises ``PreconditionFailedError``.
        """

    def content_etag(self, data: bytes) -> str | None:
        """The ETag a :meth:`put` of ``data`` will be given, where this store has shown that
        it derives ETags from the content alone; ``None`` where only the response can tell.
        A writer that knows it may name an object in a segment while the object uploads."""
        return None

    def forget_content_etags(self) -> None:
        """Stop predicting ETags here: one came back other than :meth:`content_etag` said."""
        return None

    @abstractmethod
    def staged_write(self, key: str) -> AbstractContextManager[StagedObject]:
        """Stage a large new object in a local file, published at ``key`` when the block exits.

        The caller writes to ``staged.path``; on a clean exit the object is published and
        ``staged.info`` is set. On an exception nothing is published.
        """

    @abstractmethod
    def get(self, key: str, *, byte_range: tuple[int, int] | None = None, if_match: str | None = None) -> Blob:
        """Read an object, or the half-open ``byte_range`` [start, end) of it."""

    @abstractmethod
    def head(self, key: str) -> ObjectInfo:
        """Size and ETag of an object; ``ObjectNotFoundError`` if absent."""

    def exists(self, key: str) -> bool:
        """Whether an object exists at ``key`` (one HEAD)."""
        try:
            self.head(key)
        except ObjectNotFoundError:
            return False
        return True

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix``, in key order."""

    def folders(self, prefix: str = "") -> builtins.list[str]:
        """The names of the folders directly under ``prefix`` (a folder, ``""`` or ending in
        ``/``): S3's common prefixes, in name order. Here by a full listing; stores override it
        with one that lists a level only."""
        below = (info.key[len(prefix) :] for info in self.list(prefix))
        return sorted({rest.split("/", 1)[0] for rest in below if "/" in rest})

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete an object and, in a versioned bucket, every version of it: castable deletes
        only what no version references, and a noncurrent copy could keep erased rows. Deleting
        a missing key is not an error (as on S3)."""

    def delete_many(self, keys: builtins.list[str]) -> None:
        """Delete several objects as :meth:`delete` does (S3 batches them 1,000 to a request)."""
        for key in keys:
            self.delete(key)

    @abstractmethod
    def noncurrent_copies(self, prefix: str) -> builtins.list[str]:
        """Keys under ``prefix`` that a versioned bucket still holds noncurrent versions (or
        delete markers) of, in key order; none on a store without versions."""

    @abstractmethod
    def delete_noncurrent(self, prefix: str) -> int:
        """Delete every noncurrent version and delete marker under ``prefix``; return how many."""

    @abstractmethod
    def object_lock_enabled(self) -> bool:
        """Whether the bucket has S3 Object Lock, which can keep versions past their deletion."""

    @abstractmethod
    def sweep_temporaries(self, older_than: datetime, *, dry_run: bool) -> builtins.list[str]:
        """Delete (unless ``dry_run``) the temporary files of writers that died mid-write, last
        modified before ``older_than``; return their paths. Incomplete multipart uploads are
        :meth:`list_multipart_uploads`' business."""

    @abstractmethod
    def open_input(
        self, key: str, *, size: int, etag: str | None = None, ranges: Sequence[tuple[int, int]] = ()
    ) -> pa.NativeFile:
        """A random-access reader for Parquet, checked against the recorded size and ETag.

        ``ranges`` are the ``(start, end)`` byte ranges the caller is about to read: a remote
        store fetches them now, coalesced, instead of one request per read."""

    @abstractmethod
    def purge(self, key: str) -> int:
        """Delete an object and, in a versioned bucket, every noncurrent version; return how many."""

    # Multipart upload, with S3's rules: parts numbered from 1, every part but the last at least
    # MIN_PART_SIZE (checked at completion: ``PartTooSmallError``), copy ranges from existing
    # objects pinned to their ETag.

    @abstractmethod
    def create_multipart(self, key: str) -> str:
        """Start a multipart upload to ``key``; return its upload id."""

    @abstractmethod
    def upload_part(self, key: str, upload_id: str, number: int, data: bytes) -> UploadedPart:
        """Upload part ``number`` from bytes."""

    @abstractmethod
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
        """Make part ``number`` from bytes [start, end) of another object, copied server-side."""

    @abstractmethod
    def complete_multipart(self, key: str, upload_id: str, parts: builtins.list[UploadedPart]) -> ObjectInfo:
        """Assemble the parts into a new object; fails with 412 if ``key`` already exists."""

    @abstractmethod
    def abort_multipart(self, key: str, upload_id: str) -> None:
        """Discard an upload and its parts."""

    @abstractmethod
    def list_multipart_uploads(self, prefix: str = "") -> Iterator[MultipartUpload]:
        """Incomplete uploads under ``prefix``."""


@dataclass
class StagedObject:
    """A local file being written that becomes an object when its ``staged_write`` block exits."""

    key: str
    path: Path
    info: ObjectInfo | None = None
    put: Callable[[str, bytes], ObjectInfo] | None = None
    """How a store that uploads a staged file in one request puts its bytes, if not with its
    own ``put`` (a write that lets its last file upload while it commits, ``castable.store.uploads``)."""
