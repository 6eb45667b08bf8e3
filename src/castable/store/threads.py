"""The process's long-lived thread pools for concurrent requests to stores: a request that
looks up two objects at once borrows threads here instead of starting new ones (starting a
thread costs more than a local store's whole lookup).

Each pool has one kind of caller, whose tasks never wait on the same pool (a task that waited
on a task queued behind it in a full pool would wait for ever); a fork gives the child new ones.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from castable.store.process import ProcessCache

_POOLS: ProcessCache[ThreadPoolExecutor] = ProcessCache()


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The process's pool ``name`` (made on first use with ``workers`` threads)."""
    return _POOLS.get(name, lambda: ThreadPoolExecutor(workers, thread_name_prefix=f"castable-{name}"))
