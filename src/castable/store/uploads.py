"""Objects a write uploads while its commit goes on: one round trip less per commit.

A commit names each new object by its ETag, so it could only write its segments once the
object's upload had answered. Where a store derives ETags from the content alone
(:meth:`ObjectStore.content_etag`), a write inside :func:`deferring` hands such an upload to
the background under its predicted ETag, and the commit writes its segments meanwhile. Before
the commit point (the manifest's ``If-None-Match`` PUT) :func:`settle` waits for every upload
of the write: a version never names an object that is not there, with the ETag it names. An
upload that fails, or comes back with another ETag, fails the commit before that point, so
nothing is committed (the store then stops predicting ETags, and a retry uploads the old way).

Only writes that commit on the thread they wrote on defer (the table's own writes); files
written for another process to commit (Spark tasks, the ingest function) are uploaded first.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import wraps
from typing import ParamSpec, TypeVar

from castable.store import ObjectInfo, ObjectStore, StoreError

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

_scope = threading.local()


class Deferred:
    """The uploads one write left in flight, settled before its commit point."""

    def __init__(self) -> None:
        self._pending: list[Future[None]] = []
        self._pool: ThreadPoolExecutor | None = None

    def put(self, store: ObjectStore, key: str, data: bytes) -> ObjectInfo:
        """``data`` uploaded as ``key``: in the background if ``store`` can tell its ETag now,
        else at once. The answer names the object as the upload will leave it."""
        etag = store.content_etag(data)
        if etag is None:
            return store.put(key, data, if_none_match=True)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(2, thread_name_prefix="castable-upload")
        self._pending.append(self._pool.submit(_upload, store, key, data, etag))
        return ObjectInfo(key=key, size=len(data), etag=etag)

    def settle(self) -> None:
        """Wait for every upload in flight; raise the first failure (``StoreError``)."""
        pending, self._pending = self._pending, []
        errors = [e for f in pending if (e := f.exception()) is not None]
        if errors:
            raise errors[0]

    def close(self, *, failed: bool) -> None:
        """Wait for the uploads still in flight, so no thread of the write outlives it. After
        a write that ``failed`` its own error stands (the objects are orphans ``gc`` removes);
        after one that returned, a failed upload raises: the write may have handed its entries
        on (a transaction commits them later), and they must not name a missing object."""
        try:
            self.settle()
        except StoreError as e:
            if not failed:
                raise
            log.info("an upload of a write that failed failed too: %s", e)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)


def _upload(store: ObjectStore, key: str, data: bytes, etag: str) -> None:
    info = store.put(key, data, if_none_match=True)
    if info.etag != etag:
        store.forget_content_etags()
        raise StoreError(
            f"{key} was given ETag {info.etag}, not the {etag} its content predicted (does the bucket "
            "encrypt with KMS?); nothing was committed. Retry the write: ETags are no longer predicted here"
        )


def current() -> Deferred | None:
    """The uploads of the write running on this thread, if it defers them."""
    return getattr(_scope, "deferred", None)


def put(store: ObjectStore, key: str, data: bytes) -> ObjectInfo:
    """``data`` as the new object ``key``: in the background within a deferring write, else now."""
    deferred = current()
    return store.put(key, data, if_none_match=True) if deferred is None else deferred.put(store, key, data)


def settle() -> None:
    """Wait for the uploads of the write on this thread, if any (before its commit point)."""
    deferred = current()
    if deferred is not None:
        deferred.settle()


@contextlib.contextmanager
def deferring() -> Iterator[Deferred]:
    """A scope whose writes may upload while their commit goes on (nested scopes share one)."""
    outer = current()
    if outer is not None:
        yield outer
        return
    deferred = _scope.deferred = Deferred()
    try:
        yield deferred
    except BaseException:
        _scope.deferred = None
        deferred.close(failed=True)
        raise
    _scope.deferred = None
    deferred.close(failed=False)


def deferred_within(operation: Callable[P, R]) -> Callable[P, R]:
    """``operation`` (a write that commits before it returns) run inside :func:`deferring`."""

    @wraps(operation)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with deferring():
            return operation(*args, **kwargs)

    return run
