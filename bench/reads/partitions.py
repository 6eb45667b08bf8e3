"""A query on one day of a table partitioned by ``day(ts)``, on S3 as it behaves (moto behind the
shaping proxy: 25 ms to first byte, 90 MB/s a connection): the requests and bytes it costs and its
time, against the same query on an unpartitioned castable table of the same rows and on
pyiceberg's table partitioned the same way, side by side in one run.

The rows arrive out of order (each append holds every day), as events from many sources do: an
unpartitioned table's files then each span the whole month, so statistics rule none out, while a
partitioned table's files each hold one day. Each query opens the table anew (no cache shared
with the writer: a fresh process's first read) and counts and sums one day's rows.

Target: the partitioned castable table reads only that day's files (a day's share of the bytes,
about 1/30 of the unpartitioned table's), and no more requests and bytes than pyiceberg's
partitioned table.

Usage: python -m bench partitions [--rows 600000] [--days 30] [--appends 4] [--repeats 5] [--quick] [--out DIR]
Writes bench/results/partitions.md as well as printing it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan
from pyiceberg.transforms import DayTransform

import castable
from bench.common.benchlib import RESULTS, publish, report_header
from bench.common.shaped_s3 import shaped_s3
from castable.store.cache import clear_caches

BUCKET = "partitions"
START = datetime(2026, 11, 1, tzinfo=UTC)
DAY = 12
"""The day queried (the 13th of November)."""
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("user", pa.string()),
        ("amount", pa.float64()),
    ]
)
CASTABLE_PARTITIONED = "castable, partitioned by day(ts)"
CASTABLE_PLAIN = "castable, unpartitioned"
ICEBERG = "pyiceberg, partitioned by day(ts)"


def events(rows: int, days: int, seed: int, start: int = 0) -> pa.Table:
    """``rows`` events spread over ``days`` days, in random order of time."""
    rng = np.random.default_rng(seed)
    micros = rng.integers(0, days * 86_400_000_000, rows)
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + rows), pa.int64()),
            "ts": pa.array(int(START.timestamp() * 1e6) + micros, pa.int64()).cast(SCHEMA.field("ts").type),
            "user": pa.array([f"u{i}" for i in rng.integers(0, 50_000, rows)]),
            "amount": pa.array(rng.random(rows) * 100),
        },
        schema=SCHEMA,
    )


def build(endpoint: str, work: str, batches: list[pa.Table]) -> tuple[dict[str, Callable[[], tuple[int, float]]], bool]:
    """The three tables, written on the S3 at ``endpoint``; for each, the query (opening anew);
    and whether castable's plan for the partitioned table is exactly the files of that day."""
    options = {"endpoint_url": endpoint, "region": "us-east-1"}
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    parted = castable.create_table(f"s3://{BUCKET}/parted", SCHEMA, partition_by=["day(ts)"], storage_options=options)
    plain = castable.create_table(f"s3://{BUCKET}/plain", SCHEMA, storage_options=options)
    catalog = SqlCatalog(
        "bench",
        uri=f"sqlite:///{work}/catalog.db",
        warehouse=f"s3://{BUCKET}/iceberg",
        **{
            "s3.endpoint": endpoint,
            "s3.access-key-id": "bench",
            "s3.secret-access-key": "bench",
            "s3.region": "us-east-1",
        },
    )
    catalog.create_namespace("bench")
    iceberg = catalog.create_table("bench.events", SCHEMA)
    with iceberg.update_spec() as spec:
        spec.add_field("ts", DayTransform(), "ts_day")
    for batch in batches:
        parted.append(batch)
        plain.append(batch)
        iceberg.append(batch)
    lo, hi = START + timedelta(days=DAY), START + timedelta(days=DAY + 1)
    where = f"ts >= '{lo.isoformat()}' AND ts < '{hi.isoformat()}'"
    iceberg_where = And(GreaterThanOrEqual("ts", lo.isoformat()), LessThan("ts", hi.isoformat()))

    def castable_query(uri: str) -> Callable[[], tuple[int, float]]:
        def run() -> tuple[int, float]:
            clear_caches()
            rows = castable.open_table(uri, storage_options=options).to_arrow(columns=["amount"], filter=where)
            return rows.num_rows, float(pc.sum(rows.column("amount")).as_py() or 0)

        return run

    def iceberg_query() -> tuple[int, float]:
        rows = catalog.load_table("bench.events").scan(row_filter=iceberg_where, selected_fields=("amount",)).to_arrow()
        return rows.num_rows, float(pc.sum(rows.column("amount")).as_py() or 0)

    day = (lo - datetime(1970, 1, 1, tzinfo=UTC)).days
    planned = {f.path for f in parted.scan(filter=where).files()}
    held = {f.path for f in parted.manifest.data_files if f.partition == (day,)}
    queries = {
        CASTABLE_PARTITIONED: castable_query(parted.uri),
        CASTABLE_PLAIN: castable_query(plain.uri),
        ICEBERG: iceberg_query,
    }
    return queries, planned == held


def measure(args: argparse.Namespace) -> tuple[list[dict[str, Any]], int, bool]:
    batches = [
        events(args.rows // args.appends, args.days, i, i * (args.rows // args.appends)) for i in range(args.appends)
    ]
    found = []
    with tempfile.TemporaryDirectory() as work, shaped_s3() as s3:
        queries, only_that_day = build(s3.endpoint, work, batches)
        answers = {}
        for name, query in queries.items():
            times, costs = [], []
            for _ in range(args.repeats):
                s3.reset()
                began = time.perf_counter()
                answers[name] = query()
                times.append(time.perf_counter() - began)
                costs.append(s3.stats())
            last = costs[-1]
            found.append(
                {
                    "system": name,
                    "seconds": statistics.median(times),
                    "requests": sum(last["requests"].values()),
                    "gets": last["requests"].get("GET", 0),
                    "bytes": last["bytes_out"],
                }
            )
        rows = {answer[0] for answer in answers.values()}
        sums = {round(answer[1], 3) for answer in answers.values()}
        assert len(rows) == 1 and len(sums) == 1, f"the systems disagree: {answers}"
    return found, rows.pop(), only_that_day


def report(found: list[dict[str, Any]], day_rows: int, only_that_day: bool, args: argparse.Namespace) -> list[str]:
    by = {f["system"]: f for f in found}
    base = by[CASTABLE_PARTITIONED]
    lines = [
        *report_header("partitions: one day of a month", "shaped S3: moto behind a 25 ms, 90 MB/s proxy"),
        f"{args.rows:,} events over {args.days} days in {args.appends} appends, each holding every day; the query "
        f"counts and sums one day ({day_rows:,} rows). Medians of {args.repeats} runs, each opening the table anew; "
        "requests and bytes of the last run (the same every run).",
        "",
        "| system | median (s) | requests | GETs | bytes read | bytes against castable partitioned |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for f in found:
        lines.append(
            f"| {f['system']} | {f['seconds']:.3f} | {f['requests']} | {f['gets']} | {f['bytes']:,} "
            f"| {f['bytes'] / max(base['bytes'], 1):.2f}x |"
        )
    plain, iceberg = by[CASTABLE_PLAIN], by[ICEBERG]

    def ratio(other: dict[str, Any], what: str) -> str:
        return f"{other[what] / max(base[what], 1e-9):.2f}x"

    lines += [
        "",
        f"Against the partitioned castable table, the unpartitioned one reads {ratio(plain, 'bytes')} the bytes "
        f"in {ratio(plain, 'requests')} the requests and {ratio(plain, 'seconds')} the time; pyiceberg's "
        f"partitioned table {ratio(iceberg, 'bytes')} the bytes in {ratio(iceberg, 'requests')} the requests and "
        f"{ratio(iceberg, 'seconds')} the time.",
        "",
        "## Targets",
        "",
        f"- the partitioned table's scan reads only that day's files: **{verdict(only_that_day)}**",
        "- no more bytes and requests than pyiceberg's partitioned table: "
        f"**{verdict(iceberg['bytes'] >= base['bytes'] and iceberg['requests'] >= base['requests'])}**",
    ]
    return lines


def verdict(met: bool) -> str:
    return "met" if met else "missed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--appends", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a small run, for the smoke test")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.rows, args.days, args.repeats = 20_000, 30, 1
    found, day_rows, only_that_day = measure(args)
    publish("partitions", report(found, day_rows, only_that_day, args), args.out)


if __name__ == "__main__":
    main()
