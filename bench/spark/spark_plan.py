"""Planning a Spark read of a table of many files: ``read_table`` against ``spark.read.parquet``.

For each number of files N, a table of N data files is built: one small Parquet file written
by ``Table.append`` and N-1 hard links to it under their own names, committed as entries of
their own in one commit through castable's commit protocol (so every entry has a real object
whose footer a task reads). Then, side by side:

- ``read_table``: from the open table to the DataFrame Spark will run, which includes the
  planning tasks (footers and tombstones read on executors; from 100,000 files the tasks read
  the manifest's segments themselves) and no footer read on the driver (counted, and reported);
- ``spark.read.parquet`` of the same N paths: Spark's own listing of the files, to the DataFrame;
- the count of rows through each DataFrame, up to ``--count-max-files`` files.

Usage: python -m bench spark-plan [--files 1000 100000 1000000] [--repeats 3]
       [--count-max-files 100000] [--out DIR]
Writes DIR/spark_plan.md (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import uuid
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, cast

import pyarrow as pa

import castable
from bench.common.benchlib import RESULTS, SCHEMA, event_batches, publish, report_header, timed
from bench.spark.spark import spark_session
from castable.commit.change import Change, NextState
from castable.commit.conflicts import Access
from castable.commit.protocol import commit_to_table
from castable.format.filelist import DATA, FileList
from castable.format.manifest import Manifest
from castable.read.snapshot import Snapshot
from castable.spark import read_table

LINKS_PER_INODE = 60_000


def build_table(root: Path, files: int) -> tuple[castable.Table, list[str]]:
    """A table of ``files`` entries, one real file and hard links to it; its files' paths."""
    table = castable.create_table(str(root), SCHEMA, primary_key="id")
    table.append(pa.Table.from_batches(list(event_batches(10)), schema=SCHEMA))
    (real,) = table.manifest.data_files
    folder = root / real.path.rsplit("/", 1)[0]
    links = []
    origin = root / real.path
    for i in range(files - 1):
        path = f"{real.path.rsplit('/', 1)[0]}/{uuid.uuid4()}.parquet"
        if i and i % LINKS_PER_INODE == 0:  # a file takes 65,000 links at most (ext4)
            shutil.copy2(root / real.path, root / path)
            origin = root / path
        else:
            os.link(origin, root / path)
        links.append(replace(real, path=path))  # a link or a copy with its times: the same size and ETag

    def build(base: Manifest) -> NextState:
        return NextState(
            data_files=FileList.of(DATA, base.schema, [*base.data_files, *links]),
            tombstones=base.tombstones,
            summary={"rows_added": len(links) * real.rows, "files_added": len(links)},
        )

    if links:
        commit_to_table(
            table.store,
            table.manifest,
            Change("append", build, Access(), across_schema=True),
            commit_id=str(uuid.uuid4()),
        )
    assert len(list(folder.iterdir())) == files
    opened = castable.open_table(str(root))
    return opened, [str(root / f.path) for f in opened.manifest.data_files]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, nargs="+", default=[1_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--count-max-files", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for the report")
    args = parser.parse_args()
    spark: Any = spark_session(2)
    import pyspark

    footers = 0
    original = Snapshot.footer

    def counted(self: Snapshot, f: Any) -> Any:
        nonlocal footers
        footers += 1
        return original(self, f)

    Snapshot.footer = counted  # type: ignore[method-assign]  # the driver's own footer reads
    rows = [
        "| files | read_table to DataFrame | spark.read.parquet to DataFrame | ratio | footers read by the driver "
        "| count: read_table | count: read.parquet |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in args.files:
        root = Path(tempfile.mkdtemp(prefix="castable-bench-plan-"))
        try:
            build_s, built = timed(partial(build_table, root / "t", n))
            table, paths = cast(tuple[castable.Table, list[str]], built)
            print(f"{n:,} files built in {build_s:.1f} s", flush=True)
            ours: list[float] = []
            theirs: list[float] = []
            footers = 0  # the driver's footer reads while both plan
            for r in range(args.repeats + 1):  # the first round warms both up and is not counted
                elapsed, df = timed(partial(read_table, spark, table))  # a DataFrame
                ours += [elapsed] if r else []
                elapsed, spark_df = timed(partial(spark.read.parquet, *paths))
                theirs += [elapsed] if r else []
            counts = ["-", "-"]
            if n <= args.count_max_files:
                frames: list[Any] = [df, spark_df]
                for i, frame in enumerate(frames):
                    elapsed, got = timed(frame.count)
                    assert got == 10 * n, got
                    counts[i] = f"{elapsed:.1f} s"
            m, t = statistics.median(ours), statistics.median(theirs)
            rows.append(f"| {n:,} | {m:.2f} s | {t:.2f} s | {t / m:.2f}x | {footers} | {counts[0]} | {counts[1]} |")
            print(rows[-1], flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    spark.stop()
    lines = report_header(
        "Spark read planning at many files",
        f"PySpark {pyspark.__version__}, local[2]; tables of N files of 10 rows (hard links of one file), "
        f"medians of {args.repeats}. Ratios above 1 mean read_table plans faster than Spark lists.",
    )
    publish("spark_plan", [*lines, *rows, ""], args.out)


if __name__ == "__main__":
    main()
