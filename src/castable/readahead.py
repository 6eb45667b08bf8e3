"""One process-wide pool of reader threads, and ``read_ahead``: run tasks a few ahead, in order.

Scans, delete planning and erase checks share the pool, so a scan pays no thread start-up. A
task that itself reads ahead (a scan inside a pool task) runs its tasks inline rather than
queueing behind itself, and a forked child gets a fresh pool (the parent's threads do not
exist there).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")

WORKERS = max(8, 2 * (os.cpu_count() or 1))
"""Reader threads: twice the cores, at least 8, since S3 reads mostly wait on the network."""

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()
_worker = threading.local()


def _mark_worker() -> None:
    _worker.active = True


def _shared() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="castable-read", initializer=_mark_worker)
        return _pool


def _forget_after_fork() -> None:
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def read_ahead(tasks: Iterator[Callable[[], T]], depth: int) -> Iterator[T]:
    """Run tasks on the shared pool, at most ``depth`` in flight, yielding results in order.

    Closing the iterator early cancels the tasks not yet started and waits for the running ones,
    so an abandoned scan reads nothing more in the background."""
    if getattr(_worker, "active", False):
        yield from (task() for task in tasks)
        return
    pool = _shared()
    pending: deque[Future[T]] = deque()
    try:
        for task in tasks:
            pending.append(pool.submit(task))
            if len(pending) >= max(1, depth):
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        wait(pending)
