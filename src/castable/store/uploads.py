"""Objects a write uploads while its commit goes on: one round trip less per commit.

A commit names each new object by its ETag, so it could only write its segments once the
object's upload had answered. Where a store derives ETags from the content alone
(:meth:`ObjectStore.content_etag`), a write hands such an upload to its :class:`Deferred`,
which uploads it in the background under its predicted ETag while the commit writes its
segments. Before the commit point (the manifest's ``If-None-Match`` PUT) the commit settles the
uploads of its changes: a version never names an object that is not there, with the ETag it
names. An upload that fails, or comes back with another ETag, fails the commit before that
point, so nothing is committed (the store then stops predicting ETags, and a retry uploads the
old way).

A table's own writes carry their ``Deferred`` in their write session
(:class:`castable.commit.handle.WriteSession`), which hands it to the change it commits; files
written for another process to commit (Spark tasks, the ingest function) are uploaded first.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from castable.store import ObjectInfo, ObjectStore, StoreError

log = logging.getLogger(__name__)


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


def upload(store: ObjectStore, key: str, data: bytes, pending: Deferred | None) -> ObjectInfo:
    """``data`` as the new object ``key``: handed to a write's ``pending`` uploads (in the
    background where the store allows), or uploaded now without one."""
    return store.put(key, data, if_none_match=True) if pending is None else pending.put(store, key, data)
