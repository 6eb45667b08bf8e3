"""A small thread-safe LRU map for immutable objects read once per process (footers, tombstones, segments)."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """A thread-safe map of at most ``size`` items (or, with a ``weigh``, of at most ``size``
    total weight, e.g. bytes), least recently used evicted."""

    def __init__(self, size: int, weigh: Callable[[V], int] | None = None) -> None:
        self._items: OrderedDict[K, V] = OrderedDict()
        self._size = size
        self._weigh = weigh or (lambda _: 1)
        self._weight = 0
        self._lock = threading.Lock()
        _ALL.add(self)

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._weight -= self._weigh(old)
            self._items[key] = value
            self._weight += self._weigh(value)
            while self._weight > self._size and len(self._items) > 1:
                self._weight -= self._weigh(self._items.popitem(last=False)[1])

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._weight = 0


_ALL: weakref.WeakSet[LruCache[Any, Any]] = weakref.WeakSet()


def clear_caches() -> None:
    """Forget every footer, tombstone, key set and manifest segment this process has cached,
    giving their memory back; later reads fetch them again (a cold start, as in a new process)."""
    for cache in list(_ALL):
        cache.clear()
