"""What a process makes once and shares between its stores (boto3 clients, thread pools), kept
by key and forgotten by a forked child, which makes its own: a client's connections and a
pool's threads belong to the process that made them."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class ProcessCache(Generic[V]):
    """Values by key, each made on first use; with ``kept``, the oldest is let go past that many."""

    def __init__(self, kept: int | None = None) -> None:
        self.kept = kept
        self._values: dict[Hashable, V] = {}
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget)

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value of ``key``, made by ``make`` (under the cache's lock) the first time."""
        with self._lock:
            value = self._values.get(key)
            if value is None:
                value = make()
                if self.kept is not None and len(self._values) >= self.kept:
                    del self._values[next(iter(self._values))]
                self._values[key] = value
            return value

    def _forget(self) -> None:
        self._values.clear()
        self._lock = threading.Lock()
