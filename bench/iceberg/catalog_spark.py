"""The Spark side of catalog.py, run in the Spark 3.5 side venv (.venv-spark35): one JVM,
Spark with Apache Iceberg 1.10.2's Spark runtime and SQL extensions and two Iceberg catalogs,
``rest`` (castable's REST catalog at ``--uri``, through the JDK-HTTP catalog class of
tests/helpers/java) and ``hadoop`` (Iceberg's Hadoop catalog over a local directory).

The same ``--rows`` rows of the event table (benchlib's) are loaded twice: into a castable table
by the castable ingest job (``db.events`` of the catalog's warehouse, merge-on-read set through
the catalog) and into an Iceberg table of the Hadoop catalog by Spark's ``CREATE TABLE AS SELECT``
(format version 2, merge-on-read). Then, round after round (the first a warm-up, not counted), the
same source of ``--merge-rows`` rows (half of them existing keys, scattered; half new keys) is
merged into each, every column updated or inserted:

- ``castable.spark.merge`` on the castable table;
- Spark's ``MERGE INTO rest.db.events`` through the catalog, on the very same table;
- Spark's ``MERGE INTO hadoop.db.events``.

After each merge the table goes back to its loaded state (castable: ``Table.restore``, no data
copied; Iceberg: ``rollback_to_snapshot``), so every merge starts from the same table. Before the
catalog's merge Spark refreshes the table and counts it, so the catalog has published the
loaded version's Iceberg metadata, as it has after any commit through it; the merge's own
loadTable and commit are in its time. Bytes written are the sizes of the files the merge added
under the table's folder, Parquet (data and delete files) and the rest (metadata).

Usage: .venv-spark35/bin/python -m bench.iceberg.catalog_spark --jars .tools/iceberg --uri URI --warehouse DIR
       --hadoop DIR --work DIR [--rows 10000000] [--merge-rows 100000] [--repeats 5] [--partitions 4]
Prints one JSON line: the times, bytes and layout. catalog.py runs it with the catalog served.
"""

from __future__ import annotations

import argparse
import json
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import castable
from bench.common.benchlib import SCHEMA, log
from bench.spark.spark import merge_all, merge_source, source_files, spark_session
from castable.spark.ingest import ingest

CASTABLE, REST, HADOOP = "castable.spark.merge", "MERGE INTO through the catalog", "MERGE INTO, Hadoop catalog"
MODES = ("write.delete.mode", "write.update.mode", "write.merge.mode")
JARS = ("iceberg-spark-runtime", "iceberg-spark-extensions", "iceberg-jackson", "iceberg-httpcore5")


def session(jars: Path, uri: str, hadoop: Path, partitions: int) -> Any:
    """Spark 3.5 in local mode, bench/spark/spark.py's settings, with the two Iceberg catalogs."""
    rest, hdp = "spark.sql.catalog.rest", "spark.sql.catalog.hadoop"
    catalogs = {
        "spark.jars": ",".join(str(jars / f"{name}.jar") for name in [*JARS, "castable-iceberg-rest"]),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        rest: "org.apache.iceberg.spark.SparkCatalog",
        f"{rest}.catalog-impl": "castable.rest.JdkRESTCatalog",
        f"{rest}.uri": uri,
        f"{rest}.rest.auth.type": "none",
        hdp: "org.apache.iceberg.spark.SparkCatalog",
        f"{hdp}.type": "hadoop",
        f"{hdp}.warehouse": hadoop.as_uri(),
    }
    return spark_session(partitions, "castable-bench-catalog", catalogs)


def files_under(path: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in path.rglob("*") if p.is_file()}


def written(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What a merge added under the table's folder: bytes of data files, of deletes (Iceberg's
    position delete files, castable's tombstones and the catalog's position delete files of them)
    and of the rest (metadata), and the number of files."""
    new = {p: n for p, n in after.items() if p not in before}
    deletes = sum(n for p, n in new.items() if p.endswith(("-deletes.parquet", ".del")))
    data = sum(n for p, n in new.items() if p.endswith(".parquet")) - deletes
    return {"data": data, "deletes": deletes, "metadata": sum(new.values()) - data - deletes, "files": len(new)}


def measured(run: Callable[[], object], folder: Path) -> tuple[float, dict[str, int], tuple[float, float]]:
    """``run``'s seconds, what it added under ``folder``, and when it ran (wall clock)."""
    before = files_under(folder)
    started, t0 = time.time(), time.perf_counter()
    run()
    elapsed = time.perf_counter() - t0
    return elapsed, written(before, files_under(folder)), (started, time.time())


def iceberg_version(jars: Path) -> str:
    with zipfile.ZipFile(jars / "iceberg-spark-runtime.jar") as jar:
        for line in jar.read("iceberg-build.properties").decode().splitlines():
            if line.startswith("git.build.version="):
                return line.split("=", 1)[1]
    return "?"


def merge_sql(table: str) -> str:
    return (
        f"MERGE INTO {table} AS t USING source AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jars", type=Path, required=True)
    parser.add_argument("--uri", required=True, help="the REST catalog serving --warehouse")
    parser.add_argument("--warehouse", type=Path, required=True)
    parser.add_argument("--hadoop", type=Path, required=True, help="the Hadoop catalog's warehouse")
    parser.add_argument("--work", type=Path, required=True, help="a directory for the input files")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--merge-rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    spark = session(args.jars, args.uri, args.hadoop, args.partitions)
    import pyspark

    try:
        log(f"{args.rows:,} rows of the event table as {args.partitions} Parquet files")
        src = source_files(args.work / "input", args.rows, args.partitions)
        folder = args.warehouse / "db" / "events"
        uri = str(folder)
        castable.create_table(uri, SCHEMA, primary_key="id")
        log("castable ingest job")
        ingest(spark.read.parquet(str(src)), uri, "load")
        modes = ", ".join(f"'{m}' = 'merge-on-read'" for m in MODES)
        spark.sql(f"ALTER TABLE rest.db.events SET TBLPROPERTIES ({modes})")
        base = castable.open_table(uri).version
        log("Hadoop catalog: CREATE TABLE AS SELECT")
        spark.sql("CREATE NAMESPACE IF NOT EXISTS hadoop.db")
        spark.sql(
            f"CREATE TABLE hadoop.db.events USING iceberg TBLPROPERTIES ('format-version' = '2', {modes}) "
            f"AS SELECT * FROM parquet.`{src}`"
        )
        snapshot = spark.sql("SELECT snapshot_id FROM hadoop.db.events.snapshots").collect()[-1][0]
        hadoop_folder = args.hadoop / "db" / "events"
        data_files = castable.open_table(uri).manifest.data_files
        files, size = spark.sql("SELECT count(*), sum(file_size_in_bytes) FROM hadoop.db.events.files").collect()[0]
        layout = {
            CASTABLE: f"{len(data_files)} data files, {sum(f.size for f in data_files) / 1e6:.0f} MB",
            HADOOP: f"{files} data files, {size / 1e6:.0f} MB",
        }
        layout[REST] = layout[CASTABLE] + " (the same table)"
        source = merge_source(spark, args.rows, args.merge_rows).cache()
        source.count()
        source.createOrReplaceTempView("source")
        expected = args.rows + args.merge_rows - args.merge_rows // 2
        times: dict[str, list[float]] = {CASTABLE: [], REST: [], HADOOP: []}
        nbytes: dict[str, list[dict[str, int]]] = {CASTABLE: [], REST: [], HADOOP: []}
        windows: list[tuple[float, float]] = []

        def count(table: str) -> int:
            return int(spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0])

        for r in range(args.repeats + 1):  # the first round warms up and is not counted
            log(f"round {r} of {args.repeats} ({'warm-up' if not r else 'counted'})")
            results = {
                CASTABLE: measured(lambda: merge_all(spark, uri, source), folder),
            }
            if not r:
                assert castable.open_table(uri).count() == expected
            castable.open_table(uri).restore(base)
            spark.sql("REFRESH TABLE rest.db.events")
            assert count("rest.db.events") == args.rows  # the catalog publishes the restored version
            results[REST] = measured(lambda: spark.sql(merge_sql("rest.db.events")), folder)
            if not r:
                assert count("rest.db.events") == expected
                history = castable.open_table(uri).history()[0]
                assert history.summary.get("tombstone"), history
            castable.open_table(uri).restore(base)
            results[HADOOP] = measured(lambda: spark.sql(merge_sql("hadoop.db.events")), hadoop_folder)
            if not r:
                assert count("hadoop.db.events") == expected
            spark.sql(f"CALL hadoop.system.rollback_to_snapshot('db.events', {snapshot})")
            for name, (elapsed, added, window) in results.items():
                log(f"  {name}: {elapsed:.2f} s, {added}")
                if r:
                    times[name].append(elapsed)
                    nbytes[name].append(added)
                    if name == REST:
                        windows.append(window)
    finally:
        spark.stop()
    print(
        json.dumps(
            {
                "times": times,
                "bytes": nbytes,
                "layout": layout,
                "windows": windows,
                "spark": pyspark.__version__,
                "iceberg": iceberg_version(args.jars),
            }
        )
    )


if __name__ == "__main__":
    main()
