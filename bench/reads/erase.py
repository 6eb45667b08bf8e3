"""Erase benchmark: remove one row from a ~256 MiB file with 8-16 MiB row groups.

Compares the row-group splice (multipart upload, unchanged bytes copied server-side) with a
whole-file rewrite, side by side in one run, on the local store and on S3 (a moto server
over HTTP), and on S3 for files as other engines write them, registered with ``add_files``:
pyarrow with page indexes and a bloom filter on the key (whose indexes the splice rebuilds),
and Spark 3.5 (as on EMR 7) in its legacy format, with INT96 timestamps, a two-level list and a
fixed-length decimal (which the splice re-encodes as they were).
Reports medians of client bytes down/up, bytes copied server-side and wall time.

Usage: python -m bench erase [--rows 2400000] [--repeats 3]
Writes bench/results/erase.md as well as printing it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import castable
from bench.common.benchlib import ROOT, SCHEMA, event_batches, moto_server, publish, report_header

MIB = 1024 * 1024


def build(uri: str, rows: int, options: dict | None) -> castable.Table:
    props = {"write.row-group-size-bytes": 14 * MIB, "write.target-file-size-bytes": 1024 * MIB}
    table = castable.create_table(uri, SCHEMA, primary_key="id", properties=props, storage_options=options)
    table.append(pa.RecordBatchReader.from_batches(SCHEMA, event_batches(rows)))
    return table


def build_indexed(uri: str, rows: int, options: dict | None, work: Path) -> castable.Table:
    """The same rows written by pyarrow with page indexes and a bloom filter on ``id``, registered."""
    table = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options)
    local = work / "indexed.parquet"
    group = rows // 22
    pq.write_table(
        pa.Table.from_batches(list(event_batches(rows)), SCHEMA),
        local,
        row_group_size=group,
        write_page_index=True,
        bloom_filter_options={"id": {"ndv": group}},
        compression="zstd",
    )
    table.store.put("data/ext/indexed.parquet", local.read_bytes())
    table.add_files(["data/ext/indexed.parquet"])
    return table


SPARK = ROOT / ".venv-spark35" / "bin" / "python"
SPARK_WRITE = """
import sys
from pathlib import Path
from pyspark.sql import SparkSession
out, rows = Path(sys.argv[1]), int(sys.argv[2])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").config("spark.sql.parquet.writeLegacyFormat", "true")
         .config("spark.hadoop.parquet.block.size", str(12 * 1024 * 1024)).getOrCreate())
spark.range(rows).selectExpr(
    "id",
    "timestamp_micros(1767225600000000 + id * 1000) AS event_time",
    "unhex(concat(sha2(CAST(id AS STRING), 512), sha2(CAST(-id AS STRING), 256))) AS payload",
    "concat('cat-', CAST(id % 8 AS STRING)) AS category",
    "CAST(id % 100000 AS DECIMAL(12, 2)) AS amount",
    "array(CAST(id % 97 AS STRING), CAST(id % 89 AS STRING)) AS tags",
).coalesce(1).write.parquet(str(out / "spark"))
spark.stop()
"""


def build_spark(uri: str, rows: int, options: dict | None, work: Path) -> castable.Table:
    """The rows written by Spark 3.5 in its legacy format (INT96 timestamps, a two-level list,
    a fixed-length decimal) as one file, registered."""
    subprocess.run(
        [str(SPARK), "-c", SPARK_WRITE, str(work), str(rows)],
        env={**os.environ, "PYSPARK_PYTHON": str(SPARK), "PYSPARK_DRIVER_PYTHON": str(SPARK)},
        check=True,
        capture_output=True,
    )
    (local,) = (work / "spark").glob("part-*.parquet")
    schema = pq.read_schema(local).remove_metadata()
    table = castable.create_table(uri, schema, primary_key="id", storage_options=options)
    with table.store.staged_write("data/ext/spark.parquet") as staged:
        shutil.copyfile(local, staged.path)
    table.add_files(["data/ext/spark.parquet"])
    return table


def measure(table: castable.Table, rows: int, repeats: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    targets = iter(range(rows // 3, rows, 7919))
    for mode in ("splice", "rewrite"):
        samples: dict[str, list[float]] = {"seconds": [], "down": [], "up": [], "copied": []}
        for _ in range(repeats):
            key = next(targets)
            t0 = time.perf_counter()
            report = table.erase(f"id = {key}", mode=mode)  # type: ignore[arg-type]
            samples["seconds"].append(time.perf_counter() - t0)
            assert report.rows_erased == 1 and report.files[0].method == mode
            samples["down"].append(report.transfer.downloaded)
            samples["up"].append(report.transfer.uploaded)
            samples["copied"].append(report.transfer.copied)
        out[mode] = {k: statistics.median(v) for k, v in samples.items()}
        out[mode]["min_s"], out[mode]["max_s"] = min(samples["seconds"]), max(samples["seconds"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_400_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    lines = report_header("erase benchmark", f"One row erased per run; medians of {args.repeats} runs per mode.")
    work = Path(tempfile.mkdtemp(prefix="castable-erase-"))
    server, endpoint = moto_server()
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
        s3 = {"endpoint_url": endpoint, "region": "us-east-1"}
        stores = {
            "local": lambda: build(str(work / "t"), args.rows, None),
            "S3 (moto, HTTP)": lambda: build("s3://bench/erase", args.rows, s3),
            "S3, pyarrow file with page indexes and a bloom filter": lambda: build_indexed(
                "s3://bench/indexed", args.rows, s3, work
            ),
            "S3, Spark 3.5 file (legacy format, INT96 timestamps)": lambda: build_spark(
                "s3://bench/spark", args.rows, s3, work
            ),
        }
        for name, make in stores.items():
            table = make()
            (f,) = table.manifest.data_files
            md = table.snapshot().footer(f)
            rg_sizes = [
                sum(md.row_group(i).column(j).total_compressed_size for j in range(md.num_columns))
                for i in range(md.num_row_groups)
            ]
            print(f"{name}: file of {f.size / MIB:.0f} MiB, {f.row_groups} row groups", flush=True)
            r = measure(table, args.rows, args.repeats)
            s, w = r["splice"], r["rewrite"]
            client_s, client_w = s["down"] + s["up"], w["down"] + w["up"]
            lines += [
                f"## {name}",
                "",
                f"File: {f.size / MIB:.1f} MiB, {f.row_groups} row groups of "
                f"{min(rg_sizes) / MIB:.1f}-{max(rg_sizes) / MIB:.1f} MiB compressed.",
                "",
                "| method | wall time (median, min-max) | downloaded | uploaded | copied server-side | client bytes |",
                "| --- | ---: | ---: | ---: | ---: | ---: |",
            ]
            for mode, m in r.items():
                lines.append(
                    f"| {mode} | {m['seconds']:.2f} s ({m['min_s']:.2f}-{m['max_s']:.2f}) | {m['down'] / MIB:.1f} MiB "
                    f"| {m['up'] / MIB:.1f} MiB | {m['copied'] / MIB:.1f} MiB | {(m['down'] + m['up']) / MIB:.1f} MiB |"
                )
            lines += [
                "",
                f"- client bytes, rewrite / splice: **{client_w / client_s:.1f}x** (target >= 10x)",
                f"- splice downloads {s['down'] / MIB:.1f} MiB against one row group + footer of at most "
                f"{max(rg_sizes) / MIB:.1f} MiB + footer",
                f"- wall time, rewrite / splice: **{w['seconds'] / s['seconds']:.1f}x**",
                "",
            ]
    finally:
        server.close()  # type: ignore[attr-defined]
        shutil.rmtree(work, ignore_errors=True)
    publish("erase", lines)


if __name__ == "__main__":
    main()
