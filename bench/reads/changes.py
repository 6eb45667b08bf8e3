"""The change feed: ``Table.changes(v, v)`` as the table grows, and against deltalake's and DuckLake's.

1. Flatness. Tables of ``--sizes`` rows (1M, 10M, 100M) in files of 1,000 rows (bench/format/scale_tables.py's
   synthetic event table: 1,000 to 100,000 data files, the many small files of a table between
   compactions, where a version's list of files is largest). Four files in the middle of the key
   space are real, written by ``Table.append``; every other entry is synthetic (its own path,
   ETag and id range, committed in one commit through castable's commit protocol) and its object
   does not exist, so a read that touched one would fail. Then one upsert of ``--keys`` (1,000)
   existing keys, all in the four real files, and ``changes(v, v).to_arrow()`` of its version v:
   opened anew with caches cleared before each repeat, on the local disk and on shaped S3. One
   further, untimed run counts the bytes read by kind of object (pointer, manifests, segments,
   tombstones, data files: the local store's data files through a counting file) and the time
   and segment bytes spent in ``FileList.named``.

2. Peers. A table of ``--rows`` rows (shaped.py's id, ts, value, category), written by each
   system's own writer: castable (``Table.append``), deltalake (``write_deltalake`` with
   ``delta.enableChangeDataFeed=true``) and DuckLake (DuckDB 1.5.5 and its ducklake wheel, from a
   side venv: ``CREATE TABLE AS``). Then the same two upserts of ``--keys`` existing keys in
   each (castable ``upsert``, deltalake ``merge`` matched-update/not-matched-insert, DuckLake
   ``MERGE INTO``): first keys scattered over the table, then a contiguous run of keys. Timed:
   the changes of each upsert's version and of both, read as Arrow with a fresh handle
   (castable: caches cleared and ``open_table``; deltalake: ``DeltaTable`` and ``load_cdf``;
   DuckLake: a new connection, the extension loaded before the clock starts, ATTACH and
   ``table_changes``), on the local disk and on shaped S3 (moto behind bench/common/shaped_s3.py's proxy;
   DuckLake's catalog is a DuckDB file on the local disk, only its data files are on S3), where
   the proxy counts each read's requests and bytes.

Medians of ``--repeats``, every system measured side by side in one run; nothing is asserted.

Usage: python -m bench changes [--sizes 1000000 10000000 100000000]
       [--rows 1000000] [--keys 1000] [--repeats 7] [--latency 0.025] [--bandwidth 90e6]
       [--stores local "shaped S3"] [--duckdb .venv-duckdb15/bin/python] [--quick] [--out DIR]
Writes DIR/changes.md (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq

from bench.common.benchlib import RESULTS, log, publish
from bench.common.shaped_s3 import CONTROL, shaped_s3
from bench.format.scale_tables import ROWS_PER_FILE
from bench.reads.changes_measure import (
    LOCAL,
    RANGES,
    REAL_FILES,
    SHAPED,
    SYSTEMS,
    Peers,
    build_flat,
    build_peers,
    measure_flat,
    measure_peers,
    sources,
)
from bench.reads.changes_report import fmt, med, report
from bench.reads.shaped import BUCKET, DUCKDB_PYTHON, Access, data


def cpu_busy() -> float:
    """Seconds of CPU the whole machine has spent busy since boot (/proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """CPU seconds of this process and its reaped children (moto, the proxy, DuckLake's runs)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000, 100_000_000])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the table the systems share")
    parser.add_argument("--keys", type=int, default=1000, help="keys each upsert replaces")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--latency", type=float, default=0.025)
    parser.add_argument("--bandwidth", type=float, default=90e6)
    parser.add_argument("--stores", nargs="+", default=[LOCAL, SHAPED], choices=[LOCAL, SHAPED])
    parser.add_argument("--duckdb", type=Path, default=DUCKDB_PYTHON)
    parser.add_argument("--quick", action="store_true", help="tables of 100,000 and 1,000,000 rows, 2 repeats")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.rows, args.repeats = [100_000, 1_000_000], 100_000, 2
    if any(n % ROWS_PER_FILE or n < REAL_FILES * ROWS_PER_FILE for n in args.sizes):
        sys.exit(f"--sizes must be multiples of {ROWS_PER_FILE:,} of at least {REAL_FILES * ROWS_PER_FILE:,}")
    if args.keys > min(REAL_FILES * ROWS_PER_FILE, args.rows // 3):
        sys.exit("--keys must fit in the real files of the flatness tables and in a third of --rows")
    if not args.duckdb.exists():
        sys.exit(f"{args.duckdb} is missing: `make .venv-duckdb15/.installed` makes the side venv with DuckDB 1.5.5")
    command = " ".join(["python -m bench changes", *sys.argv[1:]])
    started, busy, mine = time.perf_counter(), cpu_busy(), own_cpu()
    flat: dict[tuple[str, int], dict[str, Any]] = {}
    layouts: dict[tuple[str, int], str] = {}
    peers: dict[str, dict[str, dict[str, list[list[Any]]]]] = {}
    built: dict[str, Peers] = {}
    with tempfile.TemporaryDirectory() as temp, shaped_s3(args.latency, args.bandwidth) as s3:
        work = Path(temp)
        boto3.client("s3", endpoint_url=s3.direct, region_name="us-east-1").create_bucket(Bucket=BUCKET)
        direct, shaped = Access(s3.direct, ""), Access(s3.endpoint, "")
        control = f"{s3.endpoint}{CONTROL}"
        for store in args.stores:
            for size in args.sizes:
                log(f"flatness, {store}: {size:,} rows")
                if store == LOCAL:
                    uri, build_options, options, proxy = f"{work}/flat-{size}", None, None, None
                else:
                    uri, build_options, options = f"s3://{BUCKET}/flat-{size}", direct.castable(), shaped.castable()
                    proxy = control
                version, layouts[(store, size)] = build_flat(uri, size, args.keys, build_options)
                flat[(store, size)] = measure_flat(uri, version, options, proxy, args.repeats)
                log(f"  {fmt(med(flat[(store, size)]['runs']))}, {flat[(store, size)]['bytes']}")
        table = data(args.rows)
        pq.write_table(table, work / "base.parquet")
        for i, upsert in enumerate(sources(args.rows, args.keys)):
            pq.write_table(upsert, work / f"upsert-{i}.parquet")
        del table
        for store in args.stores:
            log(f"peers, {store}: writing {args.rows:,} rows and two upserts of {args.keys:,} keys in each system")
            if store == LOCAL:
                p = Peers(f"{work}/castable", f"{work}/delta", work / "ducklake-local", f"{work}/ducklake-local/data/")
                build_peers(p, None, "", work, args)
                built[store] = p
                peers[store] = measure_peers(p, None, "", None, args)
            else:
                p = Peers(
                    f"s3://{BUCKET}/castable", f"s3://{BUCKET}/delta", work / "ducklake-s3", f"s3://{BUCKET}/ducklake/"
                )
                build_peers(p, direct, s3.direct, work, args)
                built[store] = p
                peers[store] = measure_peers(p, shaped, s3.endpoint, control, args)
            for which in RANGES:
                log(f"  {which}: " + ", ".join(f"{s} {fmt(med(peers[store][s][which]))}" for s in SYSTEMS))
    elapsed = time.perf_counter() - started
    others = max(0.0, (cpu_busy() - busy) - (own_cpu() - mine)) / elapsed
    publish("changes", report(flat, layouts, peers, built, args, command, elapsed, others), args.out)


if __name__ == "__main__":
    main()
