"""Peak memory of the ingest function on one large landed file.

Writes a Parquet file of ``--size-mib`` (incompressible payload, 32 MiB row groups), lands it in
a moto S3 server over HTTP, and runs the ingest handler on it in a fresh process, which reports
its own peak RSS. The file is streamed (footer first, then a row group at a time over ranged
GETs), so the peak should be a small multiple of a row group, not of the file: the report gives
the ratio of peak RSS to file size. The stack gives the function 1,024 MB (``TableConfig.ingest_memory_mb``),
so the target is to fit that.

Usage: python -m bench ingest-memory [--size-mib 2048] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from helpers.aws_stubs import sqs_event

import castable
from bench.common.benchlib import RESULTS, ROOT, moto_server, publish, report_header

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("payload", pa.binary())])
ROW_BYTES = 1024
CHILD = """
import json, os, sys, time
with open("/proc/self/clear_refs", "w") as f:  # peak RSS from here: not the parent's, inherited by fork
    f.write("5")
sys.path.insert(0, {root!r})
from lambdas import ingest
class Context:
    function_name, memory_limit_in_mb, aws_request_id = "bench", 1024, "bench"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
event = json.loads(sys.stdin.read())
started = time.perf_counter()
response = ingest.handler(event, Context())
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({{"response": response, "seconds": time.perf_counter() - started,
                  "peak_mib": int(status["VmHWM"].split()[0]) / 1024}}))
"""


def write_file(path: Path, size_mib: int) -> int:
    """A Parquet file of about ``size_mib`` MiB with 32 MiB row groups; returns its row count."""
    rows = size_mib * 1024 * 1024 // ROW_BYTES
    group = 32 * 1024 * 1024 // ROW_BYTES
    rng = np.random.default_rng(7)
    with pq.ParquetWriter(path, SCHEMA, compression="none") as writer:
        for start in range(0, rows, group):
            n = min(group, rows - start)
            offsets = pa.py_buffer(np.arange(0, ROW_BYTES * (n + 1), ROW_BYTES, dtype=np.int32))
            payload = pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(rng.bytes(ROW_BYTES * n))])
            ids = pa.array(np.arange(start, start + n), pa.int64())
            writer.write_table(pa.table({"id": ids, "payload": payload}, schema=SCHEMA))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    server, endpoint = moto_server()
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket="bench")
        uri = "s3://bench/tables/big"
        options = {"endpoint_url": endpoint, "region": "us-east-1"}
        castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options)
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / "big.parquet"
            rows = write_file(local, args.size_mib)
            size = local.stat().st_size
            s3.upload_file(str(local), "bench", "landing/big/big.parquet")
        event = sqs_event("bench", ["landing/big/big.parquet"])
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": endpoint,
            "CASTABLE_BUCKET": "bench",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        started = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-c", CHILD.format(root=str(ROOT))],
            input=json.dumps(event),
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        wall = time.perf_counter() - started
        result = json.loads(run.stdout.strip().splitlines()[-1])
        ingested = castable.open_table(uri, storage_options=options).count()
    finally:
        server.close()
    peak = result["peak_mib"]
    lines = [
        *report_header(
            "Ingest function memory on one large landed file",
            f"python -m bench ingest-memory --size-mib {args.size_mib}",
        ),
        "",
        "| landed file | rows | rows in the table after | ingest time | peak RSS of the function | peak / file |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {size / 2**20:,.0f} MiB | {rows:,} | {ingested:,} | {result['seconds']:.1f} s (process {wall:.1f} s) "
        f"| **{peak:,.0f} MiB** | {peak / (size / 2**20):.2f} |",
        "",
        f"Target: fits a 1,024 MB function: **{'met' if peak < 1024 and ingested == rows else 'missed'}**.",
    ]
    publish("ingest_memory", lines, args.out)


if __name__ == "__main__":
    main()
