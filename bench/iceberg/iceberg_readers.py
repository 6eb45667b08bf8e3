"""Iceberg readers against castable over many seeded random histories (the target: 0
differences, every reader, every version): each history (tests/helpers/iceberg_histories.py:
swapped and reused names, widening, drop and re-add, inline rows, files registered without ids,
deletes, upserts, updates, compaction, erase, purge, expiry) is published after every commit,
then read at every retained version by Java Iceberg (iceberg-spark-runtime 1.10.2 on Spark 3.5, one JVM per batch),
iceberg-rust (pyiceberg-core 0.11), pyiceberg and DuckDB 1.5.5's iceberg_scan, and
incrementally over runs of appends by Java and pyiceberg; every read is compared with castable's
rows.

Usage: python -m bench iceberg-readers [--histories 200] [--steps 30]
       [--batch 25] [--out DIR] [--quick]
Writes DIR/iceberg_readers.md (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
from helpers.iceberg_histories import History, differences, java_plan, java_reads, rust_reads, same

from bench.common.benchlib import RESULTS, ROOT, log, publish, report_header

DUCKDB = ROOT / ".venv-duckdb15" / "bin" / "python"
DUCKDB_HELPER = ROOT / "tests" / "helpers" / "duckdb_iceberg.py"


def duckdb_differences(history: History, out: Path) -> tuple[int, list[str]]:
    """DuckDB's reads of every retained version against castable's: how many, and where they differ."""
    versions = history.retained()
    out.mkdir()
    run = subprocess.run(
        [str(DUCKDB), str(DUCKDB_HELPER), history.table.uri, str(out), *map(str, versions)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if run.returncode:
        return len(versions), [f"{history.table.uri}: DuckDB failed: {run.stderr.strip().splitlines()[-1]}"]
    found = []
    for v in versions:
        with pa.OSFile(str(out / f"{v}.arrow")) as source:
            got = pa.ipc.open_file(source).read_all()
        try:
            same(got, history.table.scan(version=v).to_arrow(), f"DuckDB at {v}")
        except AssertionError as e:
            found.append(f"{history.table.uri}: {e}")
    return len(versions), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--histories", type=int, default=200)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=25, help="histories whose Java reads share one JVM")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="3 histories of 12 steps (a smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.histories, args.steps, args.batch = 3, 12, 3
    reads: Counter[str] = Counter()
    diffs: dict[str, list[str]] = {"Java": [], "iceberg-rust": [], "pyiceberg": [], "DuckDB": []}
    versions = spans = 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for first in range(0, args.histories, args.batch):
            seeds = range(first, min(first + args.batch, args.histories))
            histories = []
            for seed in seeds:
                h = History(f"{tmp}/h{seed}", seed)
                h.run(args.steps, expire_at=args.steps * 3 // 4)
                h.choose_spans(4)
                histories.append(h)
            plans = [java_plan(h) for h in histories]
            out = Path(tmp) / f"java{first}"
            out.mkdir()
            java = java_reads(out, [read for plan in plans for read in plan])
            at = 0
            for seed, h, plan in zip(seeds, histories, plans, strict=True):
                rust = rust_reads(Path(tmp) / f"rust{seed}", h.table, h.retained())
                found = differences(h, java[at : at + len(plan)], rust)
                at += len(plan)
                for line in found:
                    reader = next(r for r in ("Java", "iceberg-rust", "pyiceberg") if f": {r} at" in line)
                    diffs[reader].append(line)
                read, duck = duckdb_differences(h, Path(tmp) / f"duck{seed}")
                diffs["DuckDB"] += duck
                versions += len(h.retained())
                spans += len(h.spans)
                reads["Java"] += len(plan)
                reads["pyiceberg"] += len(plan)
                reads["iceberg-rust"] += len(rust)
                reads["DuckDB"] += read
            log(f"{min(first + args.batch, args.histories)} histories: {sum(map(len, diffs.values()))} differences")
    seconds = time.perf_counter() - start
    lines = report_header(
        "Iceberg readers over random histories",
        f"{args.histories} seeded histories of {args.steps} commits, each published after every commit",
    )
    lines += [
        f"{versions} retained versions and {spans} runs of appends read, in {seconds:.0f} s.",
        "",
        "| reader | reads | differences from castable |",
        "|---|---:|---:|",
    ]
    lines += [f"| {reader} | {reads[reader]} | {len(diffs[reader])} |" for reader in diffs]
    lines += [
        "",
        "Java Iceberg is iceberg-spark-runtime-3.5_2.12 1.10.2 on pyspark 3.5 (snapshot reads and "
        "`start-snapshot-id`/`end-snapshot-id` incremental reads); iceberg-rust (pyiceberg-core 0.11 "
        "through DataFusion 54) reads each version's metadata file; pyiceberg reads snapshots and "
        "`incremental_append_scan`; DuckDB 1.5.5's `iceberg_scan` reads snapshots.",
    ]
    shown = [line for reader in diffs.values() for line in reader][:20]
    if shown:
        lines += ["", "First differences:", "", *(f"- {line}" for line in shown)]
    publish("iceberg_readers", lines, args.out)


if __name__ == "__main__":
    main()
