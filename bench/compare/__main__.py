"""The command line: ``python -m bench.compare --help``."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pyarrow as pa

from bench.common.benchlib import RESULTS, SCHEMA, STARTED, event_batches, publish
from bench.compare.plots import plots
from bench.compare.report import document, verdicts
from bench.compare.results import Results
from bench.compare.runs import run_commits, run_compaction, run_s3, run_size
from bench.compare.systems import Castable, Delta, Iceberg, PlainParquet, System
from bench.compare.workloads import Layout
from castable.format.properties import COMPRESSION, DEFAULTS, ROW_GROUP_SIZE, TARGET_FILE_SIZE

DESCRIPTION = """castable against Delta Lake, Iceberg and plain pyarrow Parquet, side by side in one run, with plots.

Sections (``--sections``, all by default):

- deletes: for each table size, append of the whole synthetic event table; delete of 1,000
  scattered keys and of one contiguous key range (wall time, bytes written, data files
  rewritten); a full scan to Arrow and a projected, filtered scan after the deletes.
- writes: for each table size, an upsert of 10,000 rows (half new keys, half existing ones) and
  a replace-where of a contiguous 1% of the rows (an event_time range), on one table per system.
- compaction: castable's full scan after 100 upserts of 10,000 rows, before and after compact().
- commits: commit latency of a 10-row append after 10, 100 and 1,000 earlier commits.
- s3: castable's S3 requests per operation on a moto server over HTTP, and its full and filtered
  scans there side by side with pyarrow's S3 filesystem reading the same files.

Every system writes with the same codec, file size and row-group size.

Usage: python -m bench.compare [--sizes 1000000 10000000] [--repeats 5]
       [--commits 10 100 1000] [--upserts 100] [--compaction-sizes ROWS ...]
       [--sections deletes writes compaction commits s3] [--quick] [--out DIR]
Writes DIR/compare.md and DIR/compare_*.png (DIR defaults to bench/results/).
"""
SECTIONS = ("deletes", "writes", "compaction", "commits", "s3")


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--commits", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--upserts", type=int, default=100, help="upserts before the compaction section's scans")
    parser.add_argument(
        "--compaction-sizes", type=int, nargs="+", help="rows of the compaction section (default: --sizes)"
    )
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="what to run")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run: 4,000 rows, commits 2 3, 1 repeat")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where compare.md and the PNGs go")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.commits, args.repeats, args.upserts = [4000], [2, 3], 1, 3
    compaction_sizes = args.compaction_sizes or args.sizes
    s3_rows = min(min(args.sizes), 1_000_000)
    warnings.filterwarnings("ignore", module="pyiceberg")
    args.out.mkdir(parents=True, exist_ok=True)

    sample = pa.Table.from_batches(list(event_batches(min(args.sizes))), schema=SCHEMA)
    layout = Layout(
        codec=DEFAULTS[COMPRESSION],
        file_bytes=int(DEFAULTS[TARGET_FILE_SIZE]),
        row_group_rows=int(int(DEFAULTS[ROW_GROUP_SIZE]) // (sample.nbytes / sample.num_rows)),
    )
    results = Results()
    s3: list[tuple[str, float, dict[str, int]]] = []
    work = Path(tempfile.mkdtemp(prefix="castable-compare-"))
    try:
        subject = Castable(work / "castable", layout)
        systems: list[System] = [
            subject,
            Delta(work / "deltalake", layout),
            Iceberg(work / "pyiceberg", layout),
            PlainParquet(work / "pyarrow", layout),
        ]
        if {"deletes", "writes"} & set(args.sections):
            for rows in args.sizes:
                run_size(systems, rows, args.repeats, results, args.sections)
        if "compaction" in args.sections:
            for rows in compaction_sizes:
                run_compaction(subject, rows, args.upserts, args.repeats, results)
        if "commits" in args.sections:
            run_commits(systems, args.commits, args.repeats, results)
        if "s3" in args.sections:
            s3 = run_s3(s3_rows, args.repeats, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - STARTED
    pngs = plots(results, args.sizes, args.commits, args.out)
    verdict_lines = verdicts(results, args.sizes, args.commits, args.upserts)
    lines = document(
        args,
        command=" ".join(["python", "-m", "bench.compare", *sys.argv[1:]]),
        layout=layout,
        results=results,
        s3=s3,
        s3_rows=s3_rows,
        compaction_sizes=compaction_sizes,
        elapsed=elapsed,
        pngs=pngs,
        verdict_lines=verdict_lines,
    )
    print("\n".join(verdict_lines), file=sys.stderr)
    publish("compare", lines, args.out)


if __name__ == "__main__":
    main()
