"""The embedded default store: a local directory with the same conditional semantics as S3 (docs/format.md section 10).

Put-if-absent writes a temporary file and hard-links it to the final name (``link`` fails if
the name exists, atomically). Put-if-match runs under a per-key file lock, so it is safe
across processes. Temporary and lock files start with a dot and are never listed.
"""

from __future__ import annotations

import builtins
import hashlib
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
from filelock import FileLock

from castable.errors import OutsideStoreError
from castable.store.base import (
    MIN_PART_SIZE,
    Blob,
    MultipartUpload,
    ObjectInfo,
    ObjectStore,
    StagedObject,
    UploadedPart,
)
from castable.store.errors import ObjectNotFoundError, PartTooSmallError, PreconditionFailedError, StoreError

_LOCK_DIR = ".castable-locks"
_MPU_DIR = ".castable-uploads"
_COPY_CHUNK = 8 * 1024 * 1024


def _etag(st: os.stat_result) -> str:
    return f"{st.st_mtime_ns:x}-{st.st_size:x}"


class LocalStore(ObjectStore):
    """Objects are files under ``root``; keys are relative paths.

    Nothing outside the store's *fence* is reached: the real path (links resolved) of its root,
    or for a :meth:`child` its parent's fence (a catalog's tables stay within its warehouse). A
    key whose path resolves outside, through a linked folder or file, is refused
    (:class:`~castable.errors.OutsideStoreError`); a delete removes the entry itself, never what
    a link names; listings leave out links that lead outside and do not descend into linked folders.
    """

    def __init__(self, root: str | os.PathLike[str], *, fence: str | None = None) -> None:
        super().__init__()
        self.root = Path(root).absolute()
        # A location's characters are taken as they are by Iceberg's readers (pyiceberg, Java's
        # Hadoop paths), so '=' (the catalog's folder names hold it, RFC 3986 allows it in a
        # path) is spelled as it is; what a URI cannot hold (blanks, '%', '#', '?') is %-escaped.
        self._uri = "file://" + quote(self.root.as_posix(), safe="/=")
        self._prefix = f"{self.root}{os.sep}"
        self._fence = fence
        self._real_folders: dict[str, str] = {}

    @property
    def uri(self) -> str:
        return self._uri

    def parents(self) -> list[ObjectStore]:
        return [LocalStore(p) for p in self.root.parents]

    def child(self, name: str) -> ObjectStore:
        store = LocalStore(self._path(name), fence=self.fence)
        store.stats = self.stats
        return store

    @property
    def fence(self) -> str:
        """The real path nothing this store reaches may lie outside of."""
        if self._fence is None:
            self._fence = os.path.realpath(self.root)
        return self._fence

    def _within(self, path: str | Path, key: str) -> None:
        """Refuse ``path`` unless it resolves within the fence. Its folder's real path is kept
        (a scan opens thousands of files in a few folders: resolving each path afresh cost 50 us);
        the entry itself is looked at every time."""
        path = os.fspath(path)
        folder, name = os.path.split(path)
        real_folder = self._real_folders.get(folder)
        if real_folder is None:
            if len(self._real_folders) > 4096:
                self._real_folders.clear()
            real_folder = self._real_folders[folder] = os.path.realpath(folder)
        real = os.path.realpath(path) if os.path.islink(path) else os.path.join(real_folder, name)
        if real != self.fence and not real.startswith(os.path.join(self.fence, "")):
            raise OutsideStoreError(f"{key} resolves to {real}, outside {self.fence}: castable follows no link out")

    def _path(self, key: str) -> Path:
        """The path of ``key``, which must resolve within the fence."""
        path = self._unchecked(key)
        self._within(path, key)
        return path

    def _entry(self, key: str) -> Path:
        """The path of ``key`` in a folder within the fence (the entry itself may be a link: a
        delete removes the link, not what it names)."""
        path = self._unchecked(key)
        self._within(path.parent, key)
        return path

    def _unchecked(self, key: str) -> Path:
        if not key or key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"invalid object key {key!r}")
        return self.root / key

    def _info(self, key: str, st: os.stat_result) -> ObjectInfo:
        modified = datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=UTC)
        return ObjectInfo(key=key, size=st.st_size, etag=_etag(st), last_modified=modified)

    def _temp_beside(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"

    def _lock(self, key: str) -> FileLock:
        lock_dir = self.root / _LOCK_DIR
        lock_dir.mkdir(parents=True, exist_ok=True)
        return FileLock(lock_dir / hashlib.sha1(key.encode()).hexdigest())

    @staticmethod
    def _write_synced(path: Path, data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def check_conditional_writes(self) -> None:
        """Nothing to check: this backend implements both conditions itself (link, file lock)."""

    def put(self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None) -> ObjectInfo:
        self.stats.record("PUT", bytes_out=len(data))
        path = self._path(key)
        tmp = self._temp_beside(path)
        try:
            self._write_synced(tmp, data)
            if if_none_match:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    raise PreconditionFailedError(f"{key} already exists") from None
            elif if_match is not None:
                with self._lock(key):
                    try:
                        current = _etag(path.stat())
                    except (FileNotFoundError, NotADirectoryError):
                        raise ObjectNotFoundError(key) from None
                    if current != if_match:
                        raise PreconditionFailedError(f"{key} changed (ETag {current})")
                    self._replace_with_new_etag(tmp, path, current)
            else:
                os.replace(tmp, path)
            return self._info(key, path.stat())
        finally:
            tmp.unlink(missing_ok=True)

    @staticmethod
    def _replace_with_new_etag(tmp: Path, path: Path, previous: str) -> None:
        """Replace ``path``, making sure the ETag changes even on a coarse-clock filesystem."""
        st = tmp.stat()
        if _etag(st) == previous:
            os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
        os.replace(tmp, path)

    @contextmanager
    def staged_write(self, key: str) -> Iterator[StagedObject]:
        path = self._path(key)
        staged = StagedObject(key=key, path=self._temp_beside(path))
        try:
            yield staged
            with open(staged.path, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(staged.path, path)
            staged.info = self._info(key, path.stat())
            self.stats.record("PUT", bytes_out=staged.info.size)
        finally:
            staged.path.unlink(missing_ok=True)

    def get(self, key: str, *, byte_range: tuple[int, int] | None = None, if_match: str | None = None) -> Blob:
        path = self._path(key)
        try:
            f = open(path, "rb")  # noqa: SIM115 (closed by the with below)
        except (FileNotFoundError, NotADirectoryError):
            self.stats.record("GET")
            raise ObjectNotFoundError(key) from None
        with f:
            etag = _etag(os.fstat(f.fileno()))
            if if_match is not None and etag != if_match:
                self.stats.record("GET")
                raise PreconditionFailedError(f"{key} changed (ETag {etag})")
            if byte_range is None:
                data = f.read()
            else:
                f.seek(byte_range[0])
                data = f.read(byte_range[1] - byte_range[0])
        self.stats.record("GET", bytes_in=len(data))
        return Blob(data=data, etag=etag)

    def head(self, key: str) -> ObjectInfo:
        self.stats.record("HEAD")
        try:
            return self._info(key, self._path(key).stat())
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFoundError(key) from None

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        self.stats.record("LIST")
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root / directory if directory else self.root
        found: list[ObjectInfo] = []
        if os.path.islink(start):
            self._within(start, directory)
        for dirpath, dirnames, filenames in os.walk(start):  # linked folders are not descended into
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            for name in filenames:
                if name.startswith("."):
                    continue
                key = name if rel_dir == "." else f"{rel_dir}/{name}"
                if key.startswith(prefix):
                    path = os.path.join(dirpath, name)
                    try:
                        if os.path.islink(path):
                            self._within(path, key)
                        found.append(self._info(key, os.stat(path)))
                    except (FileNotFoundError, NotADirectoryError, OutsideStoreError):
                        continue
        yield from sorted(found, key=lambda info: info.key)

    def folders(self, prefix: str = "") -> builtins.list[str]:
        self.stats.record("LIST")
        try:
            entries = list(os.scandir(self.root / prefix if prefix else self.root))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(
            e.name
            for e in entries
            if e.is_dir(follow_symlinks=False) and not e.name.startswith(".") and _holds_objects(e.path)
        )

    def delete(self, key: str) -> None:
        self.stats.record("DELETE")
        self._entry(key).unlink(missing_ok=True)

    def purge(self, key: str) -> int:
        existed = os.path.lexists(self._entry(key))
        self.delete(key)
        return int(existed)

    def noncurrent_copies(self, prefix: str) -> builtins.list[str]:
        """None: a directory keeps no versions."""
        return []

    def delete_noncurrent(self, prefix: str) -> int:
        return 0

    def object_lock_enabled(self) -> bool:
        return False

    # ------------------------------------------------------------ multipart emulation

    def _upload_dir(self, upload_id: str) -> Path:
        if not upload_id.isalnum():
            raise StoreError(f"invalid upload id {upload_id!r}")
        return self.root / _MPU_DIR / upload_id

    def _check_upload(self, key: str, upload_id: str) -> Path:
        directory = self._upload_dir(upload_id)
        try:
            if (directory / "key").read_text() != key:
                raise StoreError(f"upload {upload_id} is not for {key}")
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFoundError(f"no such upload {upload_id} for {key}") from None
        return directory

    def create_multipart(self, key: str) -> str:
        self.stats.record("CREATE_MPU")
        self._path(key)
        upload_id = uuid.uuid4().hex
        directory = self._upload_dir(upload_id)
        directory.mkdir(parents=True)
        (directory / "key").write_text(key)
        return upload_id

    def _part_info(self, part: Path, number: int) -> UploadedPart:
        return UploadedPart(number=number, etag=_etag(part.stat()), size=part.stat().st_size)

    def upload_part(self, key: str, upload_id: str, number: int, data: bytes) -> UploadedPart:
        self.stats.record("UPLOAD_PART", bytes_out=len(data))
        part = self._check_upload(key, upload_id) / f"part-{number:05d}"
        self._write_synced(part, data)
        return self._part_info(part, number)

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
        self.stats.record("UPLOAD_PART_COPY", bytes_copied=end - start)
        part = self._check_upload(key, upload_id) / f"part-{number:05d}"
        try:
            src = open(self._path(source_key), "rb")  # noqa: SIM115 (closed by the with below)
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFoundError(source_key) from None
        with src, open(part, "wb") as dst:
            st = os.fstat(src.fileno())
            if _etag(st) != source_etag:
                raise PreconditionFailedError(f"{source_key} changed (ETag {_etag(st)})")
            if not 0 <= start < end <= st.st_size:
                raise StoreError(f"invalid copy range {byte_range} of {source_key} ({st.st_size} bytes)")
            src.seek(start)
            remaining = end - start
            while remaining:
                chunk = src.read(min(_COPY_CHUNK, remaining))
                dst.write(chunk)
                remaining -= len(chunk)
        return self._part_info(part, number)

    def complete_multipart(self, key: str, upload_id: str, parts: builtins.list[UploadedPart]) -> ObjectInfo:
        self.stats.record("COMPLETE_MPU")
        directory = self._check_upload(key, upload_id)
        files = []
        for i, p in enumerate(parts):
            f = directory / f"part-{p.number:05d}"
            if not f.exists() or _etag(f.stat()) != p.etag or (i and p.number <= parts[i - 1].number):
                raise StoreError(f"part {p.number} of upload {upload_id} is missing, changed or out of order")
            if i < len(parts) - 1 and f.stat().st_size < MIN_PART_SIZE:
                raise PartTooSmallError(f"part {p.number} is {f.stat().st_size} bytes; the minimum is {MIN_PART_SIZE}")
            files.append(f)
        path = self._path(key)
        tmp = self._temp_beside(path)
        try:
            with open(tmp, "wb") as out:
                for f in files:
                    with open(f, "rb") as src:
                        while chunk := src.read(_COPY_CHUNK):
                            out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise PreconditionFailedError(f"{key} already exists") from None
        finally:
            tmp.unlink(missing_ok=True)
        shutil.rmtree(directory, ignore_errors=True)
        return self._info(key, path.stat())

    def abort_multipart(self, key: str, upload_id: str) -> None:
        self.stats.record("ABORT_MPU")
        shutil.rmtree(self._check_upload(key, upload_id), ignore_errors=True)

    def list_multipart_uploads(self, prefix: str = "") -> Iterator[MultipartUpload]:
        self.stats.record("LIST_MPU")
        base = self.root / _MPU_DIR
        if not base.exists():
            return
        for directory in sorted(base.iterdir()):
            try:
                key = (directory / "key").read_text()
                started = datetime.fromtimestamp((directory / "key").stat().st_mtime, tz=UTC)
            except (FileNotFoundError, NotADirectoryError):
                continue
            if key.startswith(prefix):
                yield MultipartUpload(key=key, upload_id=directory.name, initiated=started)

    def sweep_temporaries(self, older_than: datetime, *, dry_run: bool) -> builtins.list[str]:
        """The ``.<name>.<hex>.tmp`` files put and staged writes leave when their process is killed."""
        found = []
        for directory, subdirs, names in os.walk(self.root):
            subdirs[:] = [d for d in subdirs if not d.startswith(".")]
            for name in names:
                path = Path(directory) / name
                if not (name.startswith(".") and name.endswith(".tmp")):
                    continue
                try:
                    modified = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
                except FileNotFoundError:
                    continue  # published or removed meanwhile
                if modified < older_than:
                    found.append(path.relative_to(self.root).as_posix())
                    if not dry_run:
                        path.unlink(missing_ok=True)
        return found

    def open_input(
        self, key: str, *, size: int, etag: str | None = None, ranges: Sequence[tuple[int, int]] = ()
    ) -> pa.NativeFile:
        from castable.errors import CorruptObjectError

        self._path(key)  # checks the key
        path = self._prefix + key  # a scan opens thousands of small files: no Path per open
        try:
            f = pa.OSFile(path, mode="r")
        except (FileNotFoundError, NotADirectoryError):
            raise ObjectNotFoundError(key) from None
        st = os.stat(path)
        if st.st_size != size or (etag is not None and _etag(st) != etag):
            f.close()
            raise CorruptObjectError(
                f"{key} does not match the manifest (size {st.st_size} vs {size}, "
                f"ETag {_etag(st)} vs {etag}): it was modified outside castable"
            )
        self.stats.record("OPEN")
        return f


def _holds_objects(directory: str) -> bool:
    """Whether an object lies under ``directory``: an empty directory is no folder, as on S3."""
    for _, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if any(not name.startswith(".") for name in filenames):
            return True
    return False
