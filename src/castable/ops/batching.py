"""Group many small appends into few commits.

Every commit is one conditional PUT that concurrent writers race for, so a table sustains a
bounded commit rate (docs/guides/concurrency.md). A producer that emits many small batches (a stream
consumer, a loop over events) should not commit each one: ``BatchWriter`` buffers the rows
and commits them together when enough have arrived or the oldest has waited long enough.
"""

from __future__ import annotations

import time
from types import TracebackType

import pyarrow as pa

from castable.commit.handle import Handle
from castable.commit.written import WriteResult
from castable.errors import InvalidInputError
from castable.inputs.batches import DataLike


class BatchWriter:
    """Buffers appends to ``table`` and commits them in batches.

    A commit happens at the append that brings the buffer to ``max_rows`` rows or
    ``max_bytes`` bytes of Arrow data, or that finds the oldest buffered row older than
    ``max_seconds``; and at ``flush()`` and on leaving a ``with`` block normally. Leaving it
    with an exception commits nothing that is still buffered. Each batch's schema is checked
    when it is appended, so a bad batch fails at its own call. With ``commit_id_prefix`` the
    n-th commit has the id ``<prefix>-<n>``, so re-running a deterministic producer with the
    same prefix commits nothing twice.
    """

    def __init__(
        self,
        table: Handle,
        *,
        max_rows: int = 1_000_000,
        max_bytes: int = 128 * 1024 * 1024,
        max_seconds: float = 10.0,
        commit_id_prefix: str | None = None,
    ) -> None:
        if max_rows < 1 or max_bytes < 1 or not max_seconds > 0:
            raise InvalidInputError("max_rows, max_bytes and max_seconds must be positive")
        self.table = table
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.commit_id_prefix = commit_id_prefix
        self.versions: list[int] = []
        """The version of each commit made so far, oldest first."""
        self._pending: list[pa.RecordBatch] = []
        self._rows = 0
        self._bytes = 0
        self._oldest: float | None = None

    @property
    def pending_rows(self) -> int:
        """Rows appended but not yet committed."""
        return self._rows

    def append(self, data: DataLike) -> WriteResult | None:
        """Buffer ``data`` (anything ``Table.append`` takes); what this call committed, if it did."""
        for batch in self.table.conforming_batches(data):
            self._pending.append(batch)
            self._rows += batch.num_rows
            self._bytes += batch.nbytes
        if self._pending and self._oldest is None:
            self._oldest = time.monotonic()
        due = self._oldest is not None and time.monotonic() - self._oldest >= self.max_seconds
        if self._rows >= self.max_rows or self._bytes >= self.max_bytes or due:
            return self.flush()
        return None

    def flush(self) -> WriteResult | None:
        """Commit what is buffered, if anything; what it committed."""
        if not self._pending:
            return None
        commit_id = None if self.commit_id_prefix is None else f"{self.commit_id_prefix}-{len(self.versions)}"
        result = self.table.append(self._pending, commit_id=commit_id)
        self.versions.append(result.version)
        self._pending, self._rows, self._bytes, self._oldest = [], 0, 0, None
        return result

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is None:
            self.flush()
