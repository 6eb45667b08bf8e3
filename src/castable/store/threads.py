"""The process's long-lived thread pools for concurrent requests to stores: a request that
looks up two objects at once borrows threads here instead of starting new ones (starting a
thread costs more than a local store's whole lookup).

Each pool has one kind of caller, whose tasks never wait on the same pool (a task that waited
on a task queued behind it in a full pool would wait for ever); a fork gives the child new ones.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_pools: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The process's pool ``name`` (made on first use with ``workers`` threads)."""
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(workers, thread_name_prefix=f"castable-{name}")
        return pool


def _forget_after_fork() -> None:
    global _lock
    _pools.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
