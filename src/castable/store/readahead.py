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
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
U = TypeVar("U")

WORKERS = max(32, 2 * (os.cpu_count() or 1))
"""Reader threads: twice the cores, at least 32, since S3 reads mostly wait on the network."""

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


@runtime_checkable
class Weighed(Protocol):
    """A task that knows what it will hold (bytes, say) while it runs."""

    def size(self) -> int: ...


def read_ahead(tasks: Iterator[Callable[[], T]], depth: int, *, budget: int = 0) -> Iterator[T]:
    """Run tasks on the shared pool, at most ``depth`` in flight, yielding results in order.
    With a ``budget``, also no more than that much of the ``size()`` of :class:`Weighed` tasks
    in flight, though always at least one task.

    Closing the iterator early cancels the tasks not yet started and waits for the running ones,
    so an abandoned scan reads nothing more in the background."""
    if getattr(_worker, "active", False):
        yield from (task() for task in tasks)
        return
    pool = _shared()
    pending: deque[tuple[Future[T], int]] = deque()
    held = 0
    try:
        for task in tasks:
            weight = task.size() if budget and isinstance(task, Weighed) else 0
            while pending and (len(pending) >= max(1, depth) or (budget and held + weight > budget)):
                future, done = pending.popleft()
                held -= done
                yield future.result()
            pending.append((pool.submit(task), weight))
            held += weight
        while pending:
            yield pending.popleft()[0].result()
    finally:
        for future, _ in pending:
            future.cancel()
        wait([future for future, _ in pending])


def beside(main: Callable[[], T], side: Callable[[], U]) -> tuple[T, U]:
    """``main()`` on this thread while ``side()`` runs on the shared pool (one after the other
    on a pool thread): two independent requests in one round trip."""
    if getattr(_worker, "active", False):
        return main(), side()
    future = _shared().submit(side)
    try:
        result = main()
    except BaseException:
        future.cancel()
        wait([future])
        raise
    return result, future.result()
