"""Tables of N data files for the scaling benchmarks: one real Parquet file, the other N-1 entries synthetic."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

import castable
from bench.common.benchlib import SCHEMA, event_batches
from castable.commit.change import Change, NextState
from castable.commit.conflicts import Access
from castable.commit.protocol import commit_to_table
from castable.format.filelist import DATA, FileList
from castable.format.layout import manifest_key
from castable.format.manifest import DataFile, Manifest

BUCKET = "bench"
ROWS_PER_FILE = 1000
"""Rows each data file claims (the real one holds them); ids of file i are i*1000 .. i*1000+999."""
START_US = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1e6)
US_PER_ID = 1000
"""benchlib's event table: event_time = 2026-01-01 + id milliseconds."""


def rows(first_id: int, n: int) -> pa.Table:
    """``n`` rows of benchlib's event table with ids ``first_id`` .. ``first_id + n - 1``."""
    batch = next(event_batches(n))
    ids = np.arange(first_id, first_id + n, dtype=np.int64)
    times = pa.array(START_US + ids * US_PER_ID, SCHEMA.field("event_time").type)
    return pa.table([pa.array(ids), times, batch.column("payload"), batch.column("category")], schema=SCHEMA)


def synthetic_entry(real: DataFile, index: int) -> DataFile:
    """An entry like ``real`` for file ``index``: its own id and time range, a new path and ETag."""
    lo, hi = index * ROWS_PER_FILE, index * ROWS_PER_FILE + ROWS_PER_FILE - 1
    stats = {
        **real.stats,
        "id": {"min": lo, "max": hi, "nulls": 0},
        "event_time": {"min": START_US + lo * US_PER_ID, "max": START_US + hi * US_PER_ID, "nulls": 0},
    }
    name = uuid.uuid4()
    etag = f'"{name.hex}"' if real.etag.startswith('"') else f"{name.hex[:16]}-{real.size:x}"
    return DataFile(
        path=f"{real.path.rsplit('/', 1)[0]}/{name}.parquet",
        size=real.size,
        etag=etag,
        rows=real.rows,
        row_groups=real.row_groups,
        stats=stats,
    )


def build_table(uri: str, files: int, options: dict[str, Any] | None, form: int) -> tuple[DataFile, int]:
    """A table of ``files`` data files; returns the real file and a primary key only it holds.

    The real file (file ``files // 2``, appended with ``Table.append``) is the only object; the
    others are committed as entries by :func:`castable.commit.protocol.commit`, in one commit."""
    table = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options, format_version=form)
    middle = files // 2
    table.append(rows(middle * ROWS_PER_FILE, ROWS_PER_FILE))
    (real,) = table.manifest.data_files
    before = tuple(synthetic_entry(real, i) for i in range(middle))
    after = tuple(synthetic_entry(real, i) for i in range(middle + 1, files))
    added = len(before) + len(after)

    def build(base: Manifest) -> NextState:
        return NextState(
            data_files=FileList.of(DATA, base.schema, [*before, *base.data_files, *after]),
            tombstones=base.tombstones,
            summary={"rows_added": added * real.rows, "files_added": added, "bench_synthetic_entries": True},
        )

    if added:
        change = Change("append", build, Access(), across_schema=True)
        commit_to_table(table.store, table.manifest, change, commit_id=str(uuid.uuid4()))
    return real, middle * ROWS_PER_FILE + ROWS_PER_FILE // 2


def manifest_written(table: castable.Table) -> int:
    """Manifest bytes the table's last commit wrote: the manifest (version 1), or the root plus
    the segments it lists that the previous root did not (version 2)."""
    store = table.store
    new = json.loads(store.get(manifest_key(table.version)).data)
    size = store.head(manifest_key(table.version)).size
    if new["format_version"] == 1:
        return size
    old = json.loads(store.get(manifest_key(table.version - 1)).data)

    def listed(doc: dict[str, Any]) -> dict[str, int]:
        refs = [*doc["segments"], *([doc["commits_segment"]] if doc["commits_segment"] else [])]
        return {r["path"]: r["size"] for r in refs}

    before = listed(old)
    return size + sum(s for path, s in listed(new).items() if path not in before)
