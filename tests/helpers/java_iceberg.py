"""Run in the Spark 3.5 side venv (.venv-spark35): read a table's published Iceberg metadata with
Apache Iceberg's Java library (iceberg-spark-runtime 1.10.2, the reader of EMR Spark, Athena and
Trino), one snapshot after another, and incrementally between pairs of snapshots.

Usage: python java_iceberg.py <jars dir> <out dir> <table location>@<snapshot id | a:b>...
Writes <out dir>/<i>.arrow for the i-th read (from 0): the rows Spark reads at a snapshot, or
appended after snapshot a up to b. One JVM for every read, of as many tables as given. Local
tables only (Java's S3 file IO needs the AWS SDK bundle, which is not on PyPI).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema


def main() -> None:
    jars, out, *reads = sys.argv[1:]
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.jars", f"{jars}/iceberg-spark-runtime.jar,{jars}/iceberg-jackson.jar")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for i, read in enumerate(reads):
        location, _, at = read.rpartition("@")
        reader = spark.read.format("iceberg")
        if ":" in at:
            start, end = at.split(":")
            reader = reader.option("start-snapshot-id", start).option("end-snapshot-id", end)
        else:
            reader = reader.option("snapshot-id", at)
        frame = reader.load(location)
        batches = frame._collect_as_arrow()  # type: ignore[operator]  # Spark's own Arrow form: nested values as they are
        rows = pa.Table.from_batches(batches) if batches else to_arrow_schema(frame.schema).empty_table()
        with pa.OSFile(str(Path(out) / f"{i}.arrow"), "wb") as sink, pa.ipc.new_file(sink, rows.schema) as w:
            w.write_table(rows)
    spark.stop()


if __name__ == "__main__":
    main()
