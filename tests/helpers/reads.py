"""What a local store is asked for: to show that an operation reads no data file it need not."""

from __future__ import annotations

from typing import Any

import pytest

from castable.store import LocalStore


class Reads:
    """The keys every local store is asked to read (get, open_input, head) from now on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.keys: list[str] = []
        for name in ("get", "open_input", "head"):
            real = getattr(LocalStore, name)
            monkeypatch.setattr(LocalStore, name, self._recording(real))

    def _recording(self, real: Any) -> Any:
        def call(store: LocalStore, key: str, *args: Any, **kwargs: Any) -> Any:
            self.keys.append(key)
            return real(store, key, *args, **kwargs)

        return call

    @property
    def data(self) -> list[str]:
        """The data files read."""
        return [k for k in self.keys if k.startswith("data/")]
