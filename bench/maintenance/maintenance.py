"""Maintenance benchmarks, side by side in one run.

1. Scan throughput of a table after 200 small appends and 200 small deletes, before and after
   compaction, against a raw pyarrow read of the same files after compaction (target: after
   compaction at least 0.9x of raw).
2. Garbage collection time and requests against the number of objects (half referenced, half
   orphans past the grace period): 1k, 10k and 100k objects on the local store, 1k and 10k on
   S3 through a moto server.

Usage: python -m bench maintenance [--rows 2000000] [--repeats 5] [--gc-sizes 1000 10000 100000]
Writes bench/results/maintenance.md as well as printing it.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

import castable
import castable.maintenance.gc
from bench.common.benchlib import SCHEMA, event_batches, median_time, moto_server, publish, report_header
from castable.commit.change import NextState
from castable.format.manifest import DataFile
from castable.table import Table, handle_of


def churned_table(root: Path, rows: int) -> castable.Table:
    table = castable.create_table(str(root), SCHEMA, primary_key="id")
    table.append(pa.RecordBatchReader.from_batches(SCHEMA, event_batches(rows)))
    rng = np.random.default_rng(11)
    extra = rows
    for i in range(200):
        batch = next(event_batches(1000, seed=i))
        table.append(batch.set_column(0, "id", pa.array(np.arange(extra, extra + 1000))))
        extra += 1000
        keys = ", ".join(map(str, rng.choice(extra, 5, replace=False).tolist()))
        table.delete(f"id IN ({keys})")
    return table


def scan_case(table: castable.Table, repeats: int) -> tuple[list[str], dict[str, float]]:
    before = median_time(lambda: table.scan().to_arrow(), repeats)[0]
    files_before, tombs_before = len(table.manifest.data_files), len(table.manifest.tombstones)
    t0 = time.perf_counter()
    report = table.compact()
    compact_s = time.perf_counter() - t0
    paths = [str(Path(table.store.root) / f.path) for f in table.manifest.data_files]  # type: ignore[attr-defined]
    after = median_time(lambda: table.scan().to_arrow(), repeats)[0]
    raw = median_time(lambda: ds.dataset(paths, format="parquet").to_table(), repeats)[0]
    rows = table.scan().count()
    lines = [
        "| state | data files | tombstone files | full scan (median) | vs raw pyarrow after compaction |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| after 200 appends + 200 deletes | {files_before} | {tombs_before} | {before * 1000:.0f} ms "
        f"| {raw / before:.2f}x |",
        f"| after compaction | {len(table.manifest.data_files)} | {len(table.manifest.tombstones)} | "
        f"{after * 1000:.0f} ms | **{raw / after:.2f}x** |",
        f"| raw pyarrow, same files | | | {raw * 1000:.0f} ms | 1.00x |",
        "",
        f"{rows:,} live rows. Compaction took {compact_s:.2f} s: {report.summary()}",
    ]
    return lines, {"before": before, "after": after, "raw": raw}


def gc_table(uri: str, options: dict | None, objects: int) -> Table:
    """A table whose latest version references half of ``objects`` tiny files; the rest are orphans."""
    table = castable.create_table(uri, SCHEMA, storage_options=options)
    store = table.store
    files = []
    for i in range(objects):
        info = store.put(f"data/2026/01/01/00/{i:07d}.parquet", b"x")
        if i % 2 == 0:
            files.append(DataFile(info.key, info.size, info.etag, 1, 1))
    handle_of(table).commit_change(
        "append", "bench", lambda base: NextState(base.data_files + files, base.tombstones, {})
    )
    return table


def gc_case(uri: str, options: dict | None, objects: int, repeats: int) -> str:
    table = gc_table(uri, options, objects)
    future = datetime.now(UTC) + timedelta(days=1)
    store = table.store
    times = []
    for _ in range(repeats):
        store.stats.reset()
        t0 = time.perf_counter()
        dry = castable.maintenance.gc.gc(store, orphan_grace=timedelta(0), dry_run=True, now=future)
        times.append(time.perf_counter() - t0)
    dry_requests = store.stats.snapshot()
    store.stats.reset()
    t0 = time.perf_counter()
    real = castable.maintenance.gc.gc(store, orphan_grace=timedelta(0), dry_run=False, now=future)
    real_s = time.perf_counter() - t0
    real_requests = store.stats.snapshot()
    assert len(real.objects) == objects // 2 == len(dry.objects)

    def fmt(r: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(r.items()) if not k.startswith("bytes") and v)

    return (
        f"| {objects:,} | {statistics.median(times):.2f} s | {fmt(dry_requests)} | {real_s:.2f} s "
        f"| {len(real.objects):,} | {fmt(real_requests)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gc-sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    lines = [
        *report_header("maintenance benchmark", f"Medians of {args.repeats} runs."),
        f"## Scan before and after compaction ({args.rows:,} rows + 200 appends of 1,000 rows + 200 deletes)",
        "",
    ]
    work = Path(tempfile.mkdtemp(prefix="castable-maint-"))
    server, endpoint = moto_server()
    try:
        scan_lines, _ = scan_case(churned_table(work / "scan", args.rows), args.repeats)
        lines += scan_lines
        gc_header = [
            "| objects | dry run (median) | requests (dry run) | sweep | removed | requests (sweep) |",
            "| ---: | ---: | --- | ---: | ---: | --- |",
        ]
        lines += ["", "## Garbage collection, local store", "", *gc_header]
        for n in args.gc_sizes:
            lines.append(gc_case(str(work / f"gc-{n}"), None, n, 3))
            print(lines[-1], flush=True)
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
        options = {"endpoint_url": endpoint, "region": "us-east-1"}
        lines += ["", "## Garbage collection, S3 (moto over HTTP)", "", *gc_header]
        for n in [n for n in args.gc_sizes if n <= 10_000]:
            lines.append(gc_case(f"s3://bench/gc-{n}", options, n, 3))
            print(lines[-1], flush=True)
    finally:
        server.close()  # type: ignore[attr-defined]
        shutil.rmtree(work, ignore_errors=True)
    publish("maintenance", lines)


if __name__ == "__main__":
    main()
