"""What a Spark write wrote, as a digest that does not depend on the order or the split of its
rows: a retried application recognises its own write by its rows, not by its place among the
application's queries (which a retry that runs one query more or less shifts)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

_KEYS = ("castable-rows-1.", "castable-rows-2.")
"""Two 16-byte hash keys: each row is hashed twice, so the digest is 128 bits."""
_MASK = (1 << 64) - 1


def _hash_sums(batch: pa.RecordBatch) -> tuple[int, int]:
    """The sums (mod 2**64) of a 64-bit hash of each row under each of ``_KEYS`` (pandas'
    vectorised SipHash of every column, combined per row)."""
    import numpy as np
    import pandas as pd

    frame = batch.to_pandas()
    for name in frame.columns:  # nested values (lists, structs, maps) hash by their JSON text
        if frame[name].dtype == object and not frame[name].map(_hashable).all():
            frame[name] = [json.dumps(v, sort_keys=True, default=str) for v in batch.column(name).to_pylist()]
    hashes = (pd.util.hash_pandas_object(frame, index=False, hash_key=key).to_numpy() for key in _KEYS)
    first, second = (int(h.sum(dtype=np.uint64)) for h in hashes)
    return first, second


def _added(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return (a[0] + b[0]) & _MASK, (a[1] + b[1]) & _MASK


def _hashable(value: object) -> bool:
    return value is None or isinstance(value, str | bytes | int | float | bool) or hasattr(value, "isoformat")


@dataclass
class RowDigest:
    """The sums (mod 2**64) of two hashes of every row, and the row count; adding digests gives
    the digest of all their rows, so each task makes its own and the driver adds them."""

    rows: int = 0
    sums: tuple[int, int] = (0, 0)

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self.sums = _added(self.sums, _hash_sums(batch))
            self.rows += batch.num_rows

    def __add__(self, other: RowDigest) -> RowDigest:
        return RowDigest(self.rows + other.rows, _added(self.sums, other.sums))

    def to_json(self) -> list[int]:
        return [self.rows, *self.sums]

    @classmethod
    def from_json(cls, doc: list[int]) -> RowDigest:
        return cls(doc[0], (doc[1], doc[2]))

    def commit_id(self, application: str, *what: str | None) -> str:
        """``spark-<application>-<hex>``: the rows, and what the write does with them (``what``:
        its mode and options), so that a write of the same rows with another meaning differs."""
        text = json.dumps([self.to_json(), list(what)])
        return f"spark-{application}-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


class Digested:
    """An iterator of record batches that digests (and counts) the rows it hands out."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self.batches = batches
        self.digest = RowDigest()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for batch in self.batches:
            self.digest.add(batch)
            yield batch
