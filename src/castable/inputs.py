"""What callers may hand castable as rows: pyarrow Tables, RecordBatches, readers, iterables of
them, and pandas DataFrames (recognised without importing pandas)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from castable.errors import InvalidInputError


def is_dataframe(data: Any) -> bool:
    """Whether ``data`` is a pandas DataFrame (recognised without importing pandas)."""
    return type(data).__name__ == "DataFrame" and hasattr(data, "to_numpy")


def arrow_pieces(data: Any) -> Iterator[pa.Table | pa.RecordBatch]:
    """The pieces of ``data`` given as a pyarrow Table, RecordBatch, RecordBatchReader or an
    iterable of Tables and RecordBatches, in order and lazily (a reader is read as it goes);
    ``InvalidInputError`` for anything else."""
    if isinstance(data, pa.Table | pa.RecordBatch):
        yield data
        return
    if not isinstance(data, Iterable) or isinstance(data, str | bytes | dict):
        raise InvalidInputError(
            f"cannot read rows from {type(data).__name__}; give a pyarrow Table, RecordBatch(Reader) or DataFrame"
        )
    for item in data:
        if not isinstance(item, pa.Table | pa.RecordBatch):
            raise InvalidInputError(f"expected pyarrow RecordBatches, got {type(item).__name__}")
        yield item
