"""Spark benchmarks in local mode, measured side by side in one run (medians and ratios).

1. Ingest: the castable ingest job (executors write castable data files, the driver commits
   once, directly) against Spark's own ``df.write.parquet`` of the same DataFrame to the same
   local disk, with the same codec (zstd): rows/s and MB/s of Parquet written.
2. Scan: ``castable.spark.read_table`` (Spark's own Parquet reader, deletes as bitmap filters) and
   ``spark.read.format("castable")`` (Spark 4 only) of the table against ``spark.read.parquet``
   of the very same data files, forced through Spark's ``noop`` sink (every column of every row
   read); then ``read_table`` again after 1,000 scattered deletes, and after 1,000,000 keys
   deleted more (``--deleted-keys``, key lists of 10,000: resolved against the files' keys by
   the planning tasks, applied as bitmap filters). ``spark.read.parquet`` runs in each of these
   rounds too, so every ratio is to the median of the baseline over the whole run.

Run it with Spark 4 (the main venv) and with Spark 3.5 (``.venv-spark35/bin/python``, as EMR 7
runs): the report is named after the Spark version (spark.md, spark35.md).

Spark cannot reach the moto S3 server here (no hadoop-aws), so both sides use a local
directory; the castable side would reach S3 through the library unchanged.

Usage: python -m bench spark [--rows 5000000] [--repeats 5] [--partitions 4] [--deleted-keys 1000000]
       [--out DIR]
Writes bench/results/spark.md (or DIR/spark.md) as well as printing it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import castable
from bench.common.benchlib import RESULTS, SCHEMA, event_batches, publish, report_header, timed
from castable.spark import merge, read_table, register
from castable.spark.files import spark_schema
from castable.spark.ingest import ingest


def spark_session(partitions: int, app: str = "castable-bench", settings: dict[str, str] | None = None) -> Any:
    """Spark in local mode with the benchmarks' settings, and ``settings`` besides (the catalogs of
    bench/iceberg/catalog_spark.py)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.parquet.compression.codec", "zstd")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (settings or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if hasattr(session, "dataSource"):  # Spark 4's Python data sources
        register(session)
    return session


def source_files(root: Path, rows: int, partitions: int) -> Path:
    """The input: the synthetic event table as ``partitions`` Parquet files under ``root``."""
    src = root
    src.mkdir(parents=True)
    data = pa.Table.from_batches(list(event_batches(rows)), schema=SCHEMA)
    step = -(-rows // partitions)
    for i in range(partitions):
        pq.write_table(data.slice(i * step, step), src / f"part-{i}.parquet", compression="zstd")
    return src


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.parquet"))


def throughput_table(
    title: str, kind: str, times: dict[str, list[float]], base: str, nbytes: dict[str, int], rows: int
) -> list[str]:
    """One Markdown table: median [min-max], rows/s, MB/s of Parquet, and the ratio to ``base``."""
    lines = [f"## {title}", "", f"| {kind} | median | rows/s | MB/s | Parquet bytes | vs {base} |"]
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    reference = statistics.median(times[base])
    for name, runs in times.items():
        m, lo, hi = statistics.median(runs), min(runs), max(runs)
        mb = nbytes[name] / 1e6
        lines.append(
            f"| {name} | {m:.2f} s [{lo:.2f}-{hi:.2f}] | {rows / m:,.0f} | {mb / m:.1f} | {mb:.1f} MB | "
            f"{reference / m:.2f}x |"
        )
    return [*lines, ""]


def write_noop(load: Callable[[], Any]) -> None:
    """The DataFrame ``load`` gives, every column of every row read into Spark's noop sink."""
    load().write.format("noop").mode("overwrite").save()


def write_parquet(df: Any, out: Path) -> None:
    """Spark's own ``df.write.parquet``, with the codec the castable job writes (zstd)."""
    df.write.parquet(str(out), compression="zstd")


def run_scans(scans: dict[str, Callable[[], Any]], times: dict[str, list[float]], repeats: int) -> None:
    """Each scan into the noop sink, round-robin; the first round warms up and is not counted."""
    for r in range(repeats + 1):
        for name, load in scans.items():
            elapsed, _ = timed(partial(write_noop, load))
            if r:
                times[name].append(elapsed)


def merge_source(spark: Any, rows: int, count: int) -> Any:
    """``count`` source rows for a merge into ``rows`` rows: half of them existing keys (scattered),
    half new keys, every column given."""
    rng = np.random.default_rng(11)
    old = np.sort(rng.choice(rows, count // 2, replace=False))
    new = np.arange(rows, rows + count - len(old))
    batch = next(event_batches(count))
    data = batch.set_column(0, "id", pa.array(np.concatenate([old, new])))
    return spark.createDataFrame(pa.Table.from_batches([data]).to_pandas(), schema=spark_schema(SCHEMA))


def run_merges(spark: Any, root: Path, rows: int, count: int, partitions: int, repeats: int) -> list[str]:
    """A merge of ``count`` rows (half matched) into ``rows`` rows: ``castable.spark.merge``
    (updated and inserted rows written, a key-list tombstone) against a rewrite of the touched
    files with plain Spark (the anti-join of the table with the source, plus the source,
    written as Parquet: what a merge without deletion vectors writes). Median time, bytes written."""
    source = merge_source(spark, rows, count).cache()
    source.count()
    times: dict[str, list[float]] = {"castable.spark.merge": [], "plain Spark rewrite": []}
    written: dict[str, int] = {}
    src = source_files(root / "merge-input", rows, partitions)
    for r in range(repeats + 1):
        uri = str(root / f"merge-{r}")
        castable.create_table(uri, SCHEMA, primary_key="id")
        ingest(spark.read.parquet(str(src)), uri, f"merge-{r}")
        before = castable.open_table(uri)
        elapsed, _ = timed(partial(merge_all, spark, uri, source))
        after = castable.open_table(uri)
        times["castable.spark.merge"] += [elapsed] if r else []
        old = {f.path for f in before.manifest.data_files} | {t.path for t in before.manifest.tombstones}
        new = [*after.manifest.data_files, *after.manifest.tombstones]
        written["castable.spark.merge"] = sum(f.size for f in new if f.path not in old)
        out = root / f"merge-spark-{r}"
        elapsed, _ = timed(partial(rewrite_merge, spark.read.parquet(str(src)), source, out))
        times["plain Spark rewrite"] += [elapsed] if r else []
        written["plain Spark rewrite"] = tree_bytes(out)
        shutil.rmtree(out)
        shutil.rmtree(root / f"merge-{r}")
    lines = [
        f"## Merge: {count:,} rows (half matched) into {rows:,}",
        "",
        "| writer | median | bytes written | vs plain Spark (time) | bytes vs plain Spark |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    reference = statistics.median(times["plain Spark rewrite"])
    for name, runs in times.items():
        m = statistics.median(runs)
        lines.append(
            f"| {name} | {m:.2f} s [{min(runs):.2f}-{max(runs):.2f}] | {written[name] / 1e6:.1f} MB | "
            f"{reference / m:.2f}x | {written[name] / written['plain Spark rewrite']:.3f} |"
        )
    return [*lines, ""]


def merge_all(spark: Any, uri: str, source: Any) -> None:
    merge(spark, uri, source).when_matched_update_all().when_not_matched_insert_all().execute()


def rewrite_merge(table: Any, source: Any, out: Path) -> None:
    """The touched files rewritten by plain Spark: every row the source does not replace, and the source."""
    kept = table.join(source.select("id"), "id", "left_anti")
    kept.unionByName(source).write.parquet(str(out), compression="zstd")


def delete_keys(table: castable.Table, count: int, rows: int) -> int:
    """Delete ``count`` random live keys (at most half the rows) as key lists of 10,000, the
    constant-time deletes a reader resolves against each file's key column; how many."""
    rng = np.random.default_rng(7)
    live = np.setdiff1d(np.arange(rows), np.arange(7, rows, max(1, rows // 1000))[:1000])
    keys = rng.choice(live, min(count, rows // 2), replace=False)
    for chunk in np.array_split(keys, max(1, len(keys) // 10_000)):
        table.delete(pc.field("id").isin(pa.array(chunk)))
    return len(keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--deleted-keys", type=int, default=1_000_000)
    parser.add_argument("--merge-rows", type=int, default=10_000_000)
    parser.add_argument("--merge-source", type=int, default=100_000, help="rows merged, half of them matched")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for the report")
    args = parser.parse_args()
    spark = spark_session(args.partitions)
    import pyspark

    spark4 = int(pyspark.__version__.split(".")[0]) >= 4
    root = Path(tempfile.mkdtemp(prefix="castable-bench-spark-"))
    try:
        src = source_files(root / "source", args.rows, args.partitions)
        df = spark.read.parquet(str(src)).cache()  # type: ignore[attr-defined]
        df.count()
        ingest_times: dict[str, list[float]] = {"castable job": [], "df.write.parquet": []}
        written: dict[str, int] = {}
        for r in range(args.repeats + 1):  # the first round warms both up and is not counted
            table_dir = root / f"table-{r}"
            castable.create_table(str(table_dir), SCHEMA, primary_key="id")
            elapsed, _ = timed(partial(ingest, df, str(table_dir), f"bench-{r}"))
            if r:
                ingest_times["castable job"].append(elapsed)
            written["castable job"] = tree_bytes(table_dir / "data")
            out = root / f"spark-{r}"
            elapsed, _ = timed(partial(write_parquet, df, out))
            if r:
                ingest_times["df.write.parquet"].append(elapsed)
            written["df.write.parquet"] = tree_bytes(out)
            shutil.rmtree(out)
        table = castable.open_table(str(table_dir))
        files = [str(table_dir / f.path) for f in table.manifest.data_files]
        scans = {
            "read_table": lambda: read_table(spark, table.uri),
            "read.parquet (same files)": lambda: spark.read.parquet(*files),  # type: ignore[attr-defined]
        }
        if spark4:
            scans["format('castable')"] = lambda: spark.read.format("castable").load(table.uri)  # type: ignore[attr-defined]
        scan_times: dict[str, list[float]] = {name: [] for name in scans}
        run_scans(scans, scan_times, args.repeats)
        assert read_table(spark, table.uri).count() == args.rows
        keys = ", ".join(str(k) for k in range(7, args.rows, max(1, args.rows // 1000))[:1000])
        table.delete(f"id IN ({keys})")
        plain = {"read.parquet (same files)": scans["read.parquet (same files)"]}  # the baseline, in every round
        deleted = {"read_table, 1,000 deletes": lambda: read_table(spark, table.uri), **plain}
        scan_times |= {name: [] for name in deleted if name not in scan_times}
        run_scans(deleted, scan_times, args.repeats)
        assert read_table(spark, table.uri).count() == args.rows - len(keys.split(","))
        gone = delete_keys(table, args.deleted_keys, args.rows)
        many = {f"read_table, {gone:,} deleted keys": lambda: read_table(spark, table.uri), **plain}
        scan_times |= {name: [] for name in many if name not in scan_times}
        run_scans(many, scan_times, args.repeats)
        assert read_table(spark, table.uri).count() == args.rows - len(keys.split(",")) - gone
        merges = run_merges(spark, root, args.merge_rows, args.merge_source, args.partitions, args.repeats)
    finally:
        spark.stop()  # type: ignore[attr-defined]
        shutil.rmtree(root, ignore_errors=True)

    mb = written["castable job"] / 1e6
    lines = report_header(
        "Spark benchmarks",
        f"PySpark {pyspark.__version__}, local[2]; {args.rows:,} rows of the event table "
        f"({mb:.0f} MB of zstd Parquet), {args.partitions} input partitions; medians of {args.repeats}, "
        "min-max in brackets.",
    )
    scanned = {name: written["castable job"] for name in scan_times}
    lines += throughput_table("Ingest", "writer", ingest_times, "df.write.parquet", written, args.rows)
    scan_title = "Scan (noop sink: every column of every row)"
    lines += throughput_table(scan_title, "reader", scan_times, "read.parquet (same files)", scanned, args.rows)
    lines += [
        "Ratios above 1 mean castable is faster. The ingest job's time includes opening the table and the commit;",
        "Spark's includes its own commit protocol (a _SUCCESS marker, file renames).",
        "",
        *merges,
    ]
    publish("spark" if spark4 else "spark35", lines, args.out)


if __name__ == "__main__":
    main()
