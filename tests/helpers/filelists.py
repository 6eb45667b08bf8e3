"""Entries of a file list that lie about the file they describe, as a faulty executor might send:
the commit must refuse each one by what its footer says, and change nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa

from castable.errors import FileMismatchError, SchemaMismatchError
from castable.format.manifest import DataFile
from castable.format.properties import TableProperties
from castable.parquet.writer import write_data_files
from helpers.tables import events, parquet_bytes

LIES: dict[str, tuple[type[Exception], str]] = {
    "row count": (FileMismatchError, "described with 3 rows where its row groups hold 10"),
    "key range": (FileMismatchError, "id min 0 where its footer says 100; id max 9 where its footer says 109"),
    "null count": (FileMismatchError, "category nulls 0 where its footer says 2"),
    "row groups": (FileMismatchError, "2 row groups where it has 1"),
    "schema": (SchemaMismatchError, "column 'category' is int64"),
}
"""Each lie: the error it meets and what the message says of it."""


def lying_entry(t: Any, lie: str) -> DataFile:
    """The entry castable's writer returned for a file of ``events(100, 110)`` (10 rows, one row
    group, two NULL categories), written under ``t``'s ``data/``, with the one ``lie`` of
    :data:`LIES` told about it; for ``schema``, a true entry of a file whose ``category`` holds
    integers."""
    if lie == "schema":
        rows = pa.table({"id": pa.array(range(100, 110), pa.int64()), "category": range(10), "value": [0.5] * 10})
        info = t.store.put("data/executor-7/wrong-schema.parquet", parquet_bytes(rows))
        return DataFile(info.key, info.size, info.etag, rows=10, row_groups=1)
    (f,) = write_data_files(t.store, events(100, 110).to_batches(), t.schema, TableProperties.parse(t.properties))
    stats = dict(f.stats)
    if lie == "row count":
        return replace(f, rows=3)
    if lie == "row groups":
        return replace(f, row_groups=2)
    if lie == "key range":
        stats["id"] = {**stats["id"], "min": 0, "max": 9}
    elif lie == "null count":
        stats["category"] = {**stats["category"], "nulls": 0}
    else:
        raise ValueError(lie)
    return replace(f, stats=stats)
