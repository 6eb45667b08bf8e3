"""Publication after each commit (table property ``publish.iceberg``): on one thread of the
process, behind the commit, never in its way. Requests for one table coalesce: a publication
reaches every version committed before it starts (``publish_through``), so a burst of commits
costs one publication, and still gives each version its Iceberg snapshot. A failed publication
is logged, never raised: the commit stands, and the next publication repairs what it left.
The interpreter waits for the thread at exit, so a CLI command or a script that commits
returns with its versions published; :func:`flush` waits for them earlier (a Lambda handler,
before it returns)."""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait

from castable.commit.log import read_manifest
from castable.iceberg.publication import publish_through
from castable.read.snapshot import Snapshot
from castable.store import ObjectStore

log = logging.getLogger(__name__)

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_wanted: dict[str, tuple[ObjectStore, int]] = {}
"""By table URI: the store and the newest version asked for, until a publication takes it."""
_running: dict[str, Future[None]] = {}


def publish_soon(store: ObjectStore, version: int) -> Future[None]:
    """Publish the table at ``store`` through ``version`` soon, on the publication thread."""
    global _pool
    uri = store.uri
    with _lock:
        known = _wanted.get(uri)
        _wanted[uri] = (store, max(version, known[1] if known else version))
        queued = _running.get(uri)
        if queued is not None and not queued.running() and not queued.done():
            return queued  # a publication not yet started will reach this version too
        if _pool is None:
            _pool = ThreadPoolExecutor(1, thread_name_prefix="castable-iceberg")
        future = _running[uri] = _pool.submit(_publish, uri)
        return future


def _publish(uri: str) -> None:
    with _lock:
        wanted = _wanted.pop(uri, None)
    if wanted is None:  # an earlier publication took this request
        return
    store, version = wanted
    try:
        uuid = read_manifest(store, version).table_uuid
        publish_through(store, version, lambda v: Snapshot(store, read_manifest(store, v, uuid)))
    except Exception as e:  # the commit stands; the next publication repairs what this one left
        log.warning("could not publish version %d of %s as Iceberg: %s", version, uri, e)


def flush() -> None:
    """Wait for every publication asked for so far."""
    with _lock:
        pending = list(_running.values())
    wait(pending)


def _forget_after_fork() -> None:
    global _pool, _lock
    _pool, _lock = None, threading.Lock()
    _wanted.clear()
    _running.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
