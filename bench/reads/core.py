"""Core benchmarks, measured side by side in one run and printed as medians and ratios.

1. Delete cost at 1M and 10M rows: a primary-key range delete and a delete of 1,000
   scattered keys (wall time, bytes written and read, requests).
2. Scan throughput of a table with 1% of its rows tombstoned against a raw pyarrow read of
   the same Parquet files (full scan, and a projected + filtered scan).
3. S3 requests per append, delete and scan against a moto server over HTTP, against the
   seed design's 3 PUTs per append and per delete.

Usage: python -m bench core [--sizes 1000000 10000000] [--repeats 5]
Writes bench/results/core.md as well as printing it.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

import castable
from bench.common.benchlib import SCHEMA, event_batches, fmt_s, median_time, moto_server, publish, report_header, timed


def build_table(root: Path, rows: int) -> castable.Table:
    table = castable.create_table(str(root), SCHEMA, primary_key="id")
    reader = pa.RecordBatchReader.from_batches(SCHEMA, event_batches(rows))
    table.append(reader)
    return table


def delete_costs(table: castable.Table, rows: int, repeats: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(7)
    out: dict[str, dict[str, float]] = {}
    cases: dict[str, Callable[[int], str]] = {
        "key range (1,000 rows)": lambda i: f"id BETWEEN {i * 10_000} AND {i * 10_000 + 999}",
        "1,000 scattered keys": lambda i: "id IN ({})".format(
            ", ".join(map(str, rng.choice(rows, 1000, replace=False).tolist()))
        ),
    }
    for name, predicate in cases.items():
        times, written, read, requests = [], [], [], []
        for i in range(repeats):
            p = predicate(i + 1)
            table.store.stats.reset()
            seconds, _ = timed(partial(table.delete, p))
            s = table.store.stats.snapshot()
            times.append(seconds)
            written.append(s["bytes_out"])
            read.append(s["bytes_in"])
            requests.append(sum(v for k, v in s.items() if not k.startswith("bytes")))
        out[name] = {
            "median_s": statistics.median(times),
            "min_s": min(times),
            "max_s": max(times),
            "bytes_written": statistics.median(written),
            "bytes_read": statistics.median(read),
            "requests": statistics.median(requests),
        }
    return out


def key_column_bytes(table: castable.Table) -> int:
    total = 0
    snap = table.snapshot()
    for f in table.manifest.data_files:
        md = snap.footer(f)
        for rg in range(md.num_row_groups):
            total += md.row_group(rg).column(0).total_compressed_size
    return total


def scan_throughput(table: castable.Table, repeats: int) -> list[tuple[str, float, float, float, float]]:
    rows = table.scan().count()
    rng = np.random.default_rng(3)
    doomed = pa.array(rng.choice(table.manifest.total_rows, table.manifest.total_rows // 100, replace=False))
    table.delete(pc.field("id").isin(doomed))
    root = Path(table.store.root)  # type: ignore[attr-defined]
    paths = [str(root / f.path) for f in table.manifest.data_files]
    lo = rows // 2
    hi = lo + rows // 100
    cases = [
        (
            "full scan",
            lambda: table.scan().to_arrow(),
            lambda: ds.dataset(paths, format="parquet").to_table(),
        ),
        (
            "2 columns, 1% key range",
            lambda: table.scan(["id", "category"], f"id BETWEEN {lo} AND {hi}").to_arrow(),
            lambda: ds.dataset(paths, format="parquet").to_table(
                columns=["id", "category"], filter=(pc.field("id") >= lo) & (pc.field("id") <= hi)
            ),
        ),
    ]
    results = []
    for name, ours, raw in cases:
        ours()
        raw()
        t_ours = median_time(ours, repeats)
        t_raw = median_time(raw, repeats)
        results.append((name, t_ours[0], t_raw[0], t_raw[0] / t_ours[0], rows / t_ours[0]))
    return results


def s3_requests() -> dict[str, dict[str, int]]:
    import boto3

    server, endpoint = moto_server()
    try:
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
        options = {"endpoint_url": endpoint, "region": "us-east-1"}
        table = castable.create_table("s3://bench/events", SCHEMA, primary_key="id", storage_options=options)
        batch = next(event_batches(100_000))
        scattered = ", ".join(str(i) for i in range(7, 100_000, 100))
        out = {}
        for name, op in [
            ("append 100k rows", lambda: table.append(batch)),
            ("delete key range", lambda: table.delete("id BETWEEN 100 AND 200")),
            ("delete 1,000 scattered keys", lambda: table.delete(f"id IN ({scattered})")),
            ("delete by predicate", lambda: table.delete("category = 'cat-3' AND id < 5000")),
            ("scan 2 columns", lambda: table.scan(["id", "category"]).to_arrow()),
        ]:
            table.store.stats.reset()
            op()
            out[name] = table.store.stats.snapshot()
        opened = castable.open_table("s3://bench/events", storage_options=options)
        out["open latest version"] = opened.store.stats.snapshot()
        return out
    finally:
        server.close()  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    lines = [
        *report_header("core benchmark", f"Medians of {args.repeats} runs."),
        "## Delete cost (local store)",
        "",
        "Bytes read count manifests and tombstones; Parquet reads of the local store are not counted",
        "(see the S3 section for those). The last column is the id column's compressed size.",
        "",
        "| rows | delete | median | min-max | bytes written | bytes read | requests | key-column bytes in table |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    scans: list[str] = []
    per_size: dict[int, dict[str, dict[str, float]]] = {}
    for rows in args.sizes:
        work = Path(tempfile.mkdtemp(prefix=f"castable-bench-{rows}-"))
        try:
            t0 = time.perf_counter()
            table = build_table(work / "t", rows)
            t_build = time.perf_counter() - t0
            print(f"built {rows:,} rows in {t_build:.1f} s ({len(table.manifest.data_files)} files)", flush=True)
            costs = delete_costs(table, rows, args.repeats)
            per_size[rows] = costs
            kbytes = key_column_bytes(table)
            for name, c in costs.items():
                lines.append(
                    f"| {rows:,} | {name} | {fmt_s(c['median_s'])} | {fmt_s(c['min_s'])}-{fmt_s(c['max_s'])} "
                    f"| {c['bytes_written']:,.0f} | {c['bytes_read']:,.0f} | {c['requests']:.0f} | {kbytes:,} |"
                )
            for name, ours, raw, ratio, rps in scan_throughput(table, args.repeats):
                speed = f"{rps / 1e6:.1f} M rows/s"
                scans.append(f"| {rows:,} | {name} | {fmt_s(ours)} | {fmt_s(raw)} | **{ratio:.2f}x** | {speed} |")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if len(per_size) > 1:
        small, large = min(per_size), max(per_size)
        lines += ["", f"Growth from {small:,} to {large:,} rows (median time ratio):", ""]
        for name in per_size[small]:
            ratio = per_size[large][name]["median_s"] / per_size[small][name]["median_s"]
            lines.append(f"- {name}: {ratio:.2f}x")
    lines += [
        "",
        "## Scan throughput with 1% of rows tombstoned (local store)",
        "",
        "Ratio = raw pyarrow time / castable time on the same files (target >= 0.9x); the raw read",
        "does not apply the deletes, castable does.",
        "",
        "| rows | scan | castable | raw pyarrow | ratio | castable throughput |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
        *scans,
        "",
        "## S3 requests per operation (moto server over HTTP)",
        "",
        "The seed design: 3 PUTs per append (file + manifest + pointer) and per delete.",
        "",
        "| operation | PUT | GET | HEAD | LIST | bytes up | bytes down |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, s in s3_requests().items():
        lines.append(
            f"| {name} | {s.get('PUT', 0)} | {s.get('GET', 0)} | {s.get('HEAD', 0)} | {s.get('LIST', 0)} "
            f"| {s['bytes_out']:,} | {s['bytes_in']:,} |"
        )
    publish("core", lines)


if __name__ == "__main__":
    main()
