"""How to store manifest entries: 100,000 data-file entries (path, size, ETag, rows, statistics
of four columns) as JSON (format version 1), Arrow IPC (uncompressed, lz4, zstd) and Parquet.

Prints each encoding's size, write and read time (medians), and the cost of building one
``DataFile`` object per entry, the input to docs/design/format-v2.md.

Usage: python -m bench encodings [--entries 100000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from bench.common.benchlib import machine_line
from castable.format.manifest import DataFile

DAY_US = 86_400_000_000
JAN_1 = 1_767_225_600_000_000


def entry(i: int, rng: random.Random) -> dict[str, Any]:
    """A version-1 manifest entry of a 256 MB file with non-overlapping key ranges (random
    names and ETags, as real ones are: they do not compress)."""
    return {
        "path": f"data/2026/11/23/{uuid.UUID(int=rng.getrandbits(128))}.parquet",
        "size": 268_000_000 + i,
        "etag": uuid.UUID(int=rng.getrandbits(128)).hex,
        "rows": 2_500_000,
        "row_groups": 8,
        "added_version": i // 10,
        "stats": {
            "id": {"min": i * 2_500_000, "max": i * 2_500_000 + 2_499_999, "nulls": 0},
            "event_time": {"min": "2026-01-01T00:00:00.000000Z", "max": "2026-01-02T00:00:00.000000Z", "nulls": 0},
            "category": {"min": "cat-0", "max": "cat-7", "nulls": 0},
            "payload": {"nulls": 0},
        },
    }


def columnar(docs: list[dict[str, Any]]) -> pa.Table:
    """The entries as columns, statistics in each column's own type."""
    n = len(docs)
    ts = pa.timestamp("us", tz="UTC")
    return pa.table(
        {
            "path": [d["path"] for d in docs],
            "size": pa.array([d["size"] for d in docs], pa.int64()),
            "etag": [d["etag"] for d in docs],
            "rows": pa.array([d["rows"] for d in docs], pa.int64()),
            "row_groups": pa.array([d["row_groups"] for d in docs], pa.int32()),
            "added_version": pa.array([d["added_version"] for d in docs], pa.int64()),
            "id.min": pa.array([d["stats"]["id"]["min"] for d in docs], pa.int64()),
            "id.max": pa.array([d["stats"]["id"]["max"] for d in docs], pa.int64()),
            "id.nulls": pa.array([0] * n, pa.int64()),
            "event_time.min": pa.array([JAN_1] * n, ts),
            "event_time.max": pa.array([JAN_1 + DAY_US] * n, ts),
            "event_time.nulls": pa.array([0] * n, pa.int64()),
            "category.min": ["cat-0"] * n,
            "category.max": ["cat-7"] * n,
            "category.nulls": pa.array([0] * n, pa.int64()),
            "payload.nulls": pa.array([0] * n, pa.int64()),
        }
    )


def median_time(fn: Callable[[], object], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def ipc_writer(table: pa.Table, codec: str | None) -> Callable[[], bytes]:
    def write() -> bytes:
        sink = io.BytesIO()
        with ipc.new_file(sink, table.schema, options=ipc.IpcWriteOptions(compression=codec)) as w:
            w.write_table(table)
        return sink.getvalue()

    return write


def parquet_writer(table: pa.Table) -> Callable[[], bytes]:
    def write() -> bytes:
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="zstd")
        return sink.getvalue()

    return write


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(42)
    docs = [entry(i, rng) for i in range(args.entries)]
    table = columnar(docs)
    print(machine_line(f"{args.entries:,} entries, medians of {args.repeats}"))
    print("| encoding | bytes per entry | size | write | read |")
    print("| --- | ---: | ---: | ---: | ---: |")
    encodings: list[tuple[str, Callable[[], bytes], Callable[[bytes], object]]] = [
        ("JSON (format version 1)", lambda: json.dumps(docs, separators=(",", ":")).encode(), json.loads),
        ("Arrow IPC, uncompressed", ipc_writer(table, None), lambda b: ipc.open_file(pa.py_buffer(b)).read_all()),
        ("Arrow IPC, lz4", ipc_writer(table, "lz4"), lambda b: ipc.open_file(pa.py_buffer(b)).read_all()),
        ("Arrow IPC, zstd", ipc_writer(table, "zstd"), lambda b: ipc.open_file(pa.py_buffer(b)).read_all()),
        ("Parquet, zstd", parquet_writer(table), lambda b: pq.read_table(pa.BufferReader(b))),
    ]
    for name, write, read in encodings:
        written, data = median_time(write, args.repeats)
        took, _ = median_time(partial(read, data), args.repeats)
        print(
            f"| {name} | {len(data) / args.entries:.0f} | {len(data) / 1e6:.1f} MB | "
            f"{written * 1000:.1f} ms | {took * 1000:.1f} ms |"
        )
    objects, _ = median_time(lambda: [DataFile.from_json(d) for d in docs], min(args.repeats, 3))
    print(f"\nBuilding one DataFile per entry from parsed JSON: {objects * 1000:.0f} ms")


if __name__ == "__main__":
    main()
