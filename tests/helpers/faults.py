"""A store wrapper that injects crashes and failures at chosen requests, for protocol tests."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pyarrow as pa

from castable.store import (
    Blob,
    MultipartUpload,
    ObjectInfo,
    ObjectStore,
    PreconditionFailedError,
    StagedObject,
    StoreError,
    UploadedPart,
)


class SimulatedCrash(BaseException):
    """The process 'dies' here: a BaseException, so no library code can swallow it."""


Action = str | None  # "crash-before", "crash-after", "fail", "lose-response", "landed-then-412", "conflict", None
Rule = Callable[[str, str], Action]


def once(op: str, key_prefix: str, action: str, *, skip: int = 0) -> Rule:
    """Fire ``action`` once, on the ``skip+1``-th ``op`` whose key starts with ``key_prefix``."""
    seen = 0

    def rule(o: str, key: str) -> Action:
        nonlocal seen
        if o == op and key.startswith(key_prefix):
            seen += 1
            if seen == skip + 1:
                return action
        return None

    return rule


def before_first(op: str, action: Callable[[], object], key_prefix: str = "") -> Rule:
    """Run ``action`` (another writer's commit, say) just before the first ``op``: an interleaving."""
    fired = False

    def rule(o: str, key: str) -> Action:
        nonlocal fired
        if o == op and key.startswith(key_prefix) and not fired:
            fired = True
            action()
        return None

    return rule


class FaultyStore(ObjectStore):
    """Delegates to ``inner``; ``rule(op, key)`` decides what goes wrong on each call."""

    def __init__(self, inner: ObjectStore, rule: Rule) -> None:
        self.inner = inner
        self.rule = rule
        self.stats = inner.stats

    @property
    def uri(self) -> str:
        return self.inner.uri

    def _run(self, op: str, key: str, call: Callable[[], Any]) -> Any:
        from castable.store import ConcurrentModificationError

        action = self.rule(op, key)
        if action == "crash-before":
            raise SimulatedCrash(f"{op} {key}")
        if action == "fail":
            raise StoreError(f"injected failure on {op} {key}")
        if action == "conflict":
            raise ConcurrentModificationError(f"injected 409 on {op} {key}")
        result = call()
        if action == "crash-after":
            raise SimulatedCrash(f"after {op} {key}")
        if action == "lose-response":
            raise StoreError(f"injected lost response on {op} {key}")
        if action == "landed-then-412":  # botocore retried a conditional PUT whose first try landed
            raise PreconditionFailedError(f"injected 412 on the retry of a landed {op} {key}")
        return result

    def check_conditional_writes(self) -> None:
        self.inner.check_conditional_writes()

    def child(self, name: str) -> ObjectStore:
        """The child store, whose requests the rule sees with keys prefixed by ``name/``."""
        rule = self.rule
        return FaultyStore(self.inner.child(name), lambda op, key: rule(op, f"{name}/{key}"))

    def parents(self) -> builtins.list[ObjectStore]:
        return self.inner.parents()

    def put(self, key: str, data: bytes, **kwargs: Any) -> ObjectInfo:
        return self._run("put", key, lambda: self.inner.put(key, data, **kwargs))

    def staged_write(self, key: str) -> AbstractContextManager[StagedObject]:
        self._run("staged_write", key, lambda: None)
        return self.inner.staged_write(key)

    def get(self, key: str, **kwargs: Any) -> Blob:
        return self._run("get", key, lambda: self.inner.get(key, **kwargs))

    def head(self, key: str) -> ObjectInfo:
        return self._run("head", key, lambda: self.inner.head(key))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return self._run("list", prefix, lambda: self.inner.list(prefix))

    def delete(self, key: str) -> None:
        return self._run("delete", key, lambda: self.inner.delete(key))

    def sweep_temporaries(self, older_than: Any, *, dry_run: bool) -> builtins.list[str]:
        return self.inner.sweep_temporaries(older_than, dry_run=dry_run)

    def open_input(self, key: str, **kwargs: Any) -> pa.NativeFile:
        return self._run("open_input", key, lambda: self.inner.open_input(key, **kwargs))

    def purge(self, key: str) -> int:
        return self._run("purge", key, lambda: self.inner.purge(key))

    def noncurrent_copies(self, prefix: str) -> builtins.list[str]:
        return self.inner.noncurrent_copies(prefix)

    def delete_noncurrent(self, prefix: str) -> int:
        return self._run("delete_noncurrent", prefix, lambda: self.inner.delete_noncurrent(prefix))

    def object_lock_enabled(self) -> bool:
        return self.inner.object_lock_enabled()

    def create_multipart(self, key: str) -> str:
        return self._run("create_multipart", key, lambda: self.inner.create_multipart(key))

    def upload_part(self, key: str, upload_id: str, number: int, data: bytes) -> UploadedPart:
        return self._run("upload_part", key, lambda: self.inner.upload_part(key, upload_id, number, data))

    def upload_part_copy(self, key: str, upload_id: str, number: int, *args: Any, **kwargs: Any) -> UploadedPart:
        return self._run(
            "upload_part_copy", key, lambda: self.inner.upload_part_copy(key, upload_id, number, *args, **kwargs)
        )

    def complete_multipart(self, key: str, upload_id: str, parts: builtins.list[UploadedPart]) -> ObjectInfo:
        return self._run("complete_multipart", key, lambda: self.inner.complete_multipart(key, upload_id, parts))

    def abort_multipart(self, key: str, upload_id: str) -> None:
        return self._run("abort_multipart", key, lambda: self.inner.abort_multipart(key, upload_id))

    def list_multipart_uploads(self, prefix: str = "") -> Iterator[MultipartUpload]:
        return self._run("list_multipart_uploads", prefix, lambda: self.inner.list_multipart_uploads(prefix))
