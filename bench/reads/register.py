"""Registering files with add_files: every page decoded (the default) against footers only
(``verify="footer"``), side by side in one run, on the local store and on S3 (a moto server
over HTTP). Each run registers the same files, written by pyarrow, into a fresh table.

Usage: python -m bench register [--files 8] [--rows 500000] [--repeats 3]
Writes bench/results/register.md as well as printing it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import castable
from bench.common.benchlib import SCHEMA, event_batches, moto_server, publish, report_header


def register(uri: str, options: dict | None, blobs: list[bytes], verify: str) -> tuple[float, int]:
    """Seconds to register ``blobs`` (uploaded first, not timed) into a new table; bytes read."""
    table = castable.create_table(f"{uri}/{uuid.uuid4().hex}", SCHEMA, primary_key="id", storage_options=options)
    paths = [f"data/ext/{i}.parquet" for i in range(len(blobs))]
    for path, blob in zip(paths, blobs, strict=True):
        table.store.put(path, blob)
    table.store.stats.reset()
    start = time.perf_counter()
    table.add_files(paths, verify=verify)  # type: ignore[arg-type]
    return time.perf_counter() - start, table.store.stats.snapshot()["bytes_in"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rows", type=int, default=500_000, help="rows per file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    blobs = []
    for seed in range(args.files):
        sink = pa.BufferOutputStream()
        rows = pa.Table.from_batches(list(event_batches(args.rows, seed=seed)), SCHEMA)
        pq.write_table(rows.set_column(0, "id", pa.array(range(seed * args.rows, (seed + 1) * args.rows))), sink)
        blobs.append(sink.getvalue().to_pybytes())
    size = sum(len(b) for b in blobs)
    lines = report_header(
        "register benchmark",
        f"`python -m bench register --files {args.files} --rows {args.rows} --repeats {args.repeats}`: "
        f"{args.files} files of {args.rows:,} rows, {size / 2**20:.1f} MiB in all.",
    )
    lines += [
        "| store | verify=footer | verify=decode (default) | decode / footer | read, footer | read, decode |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    server, endpoint = moto_server()
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
        with tempfile.TemporaryDirectory() as tmp:
            stores = {
                "local": (tmp, None),
                "moto": ("s3://bench/register", {"endpoint_url": endpoint, "region": "us-east-1"}),
            }
            for name, (uri, options) in stores.items():
                runs: dict[str, list[tuple[float, int]]] = {"footer": [], "decode": []}
                for _ in range(args.repeats):
                    for verify in runs:  # side by side, alternating
                        runs[verify].append(register(uri, options, blobs, verify))
                footer = statistics.median(s for s, _ in runs["footer"])
                decode = statistics.median(s for s, _ in runs["decode"])
                lines.append(
                    f"| {name} | {footer * 1000:.0f} ms | {decode * 1000:.0f} ms | {decode / footer:.1f}x "
                    f"| {runs['footer'][0][1] / 2**20:.2f} MiB | {runs['decode'][0][1] / 2**20:.1f} MiB |"
                )
    finally:
        server.close()
    lines += [
        "",
        "Medians of the repeats. Decoding reads every byte of every file once (a row group at a time, "
        "files in parallel), which is what proves a file decodes before it is committed; footer-only reads "
        "one or two ranges per file and is for files a trusted writer has just written (the Spark job).",
    ]
    publish("register", lines, *(() if args.out is None else (args.out,)))


if __name__ == "__main__":
    main()
