"""Parquet files as Spark writes them, and Spark's reading of files, for the corpus test: run as
``python -m helpers.spark_corpus OUT`` with the Python of the Spark to use (pyspark 3.5 or 4).

Writes ``OUT/default.parquet`` (Spark's defaults: INT96 timestamps, three-level lists, decimals
up to 18 digits as INT64, snappy), ``OUT/legacy.parquet`` (``spark.sql.parquet.writeLegacyFormat``:
two-level lists named ``array``, decimals as fixed-length byte arrays, as Hive and Impala read
them) and ``OUT/lz4.parquet`` (Hadoop-framed LZ4, parquet-mr's ``LZ4``), each one file of
several row groups and over 10 MiB, so an erase can splice it, and prints the Spark version as
a JSON line. Then, for each JSON line ``{"paths", "exclude"}`` on stdin, prints what Spark
reads from those files, rows with an id in ``exclude`` left out: the row count and a sum of a
hash of each row's JSON, so two sets of files compare as Spark reads them (or the error Spark
gave)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROWS = 160_000


def main(out: Path) -> None:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("castable-corpus")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.hadoop.parquet.block.size", str(2 * 1024 * 1024))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    rows = spark.range(ROWS).selectExpr(
        "id",
        "timestamp_micros(1600000000000000 + id * 7919000) AS ts",
        "CAST(id * 3 AS DECIMAL(12, 2)) AS amount",
        "sha2(CAST(id AS STRING), 256) AS digest",
        "IF(id % 5 = 0, NULL, array(CAST(id AS STRING), 'x')) AS tags",
        "map('k', id, 'j', -id) AS attrs",
        "named_struct('city', concat('c', CAST(id % 97 AS STRING)), 'zip', CAST(id % 1000 AS INT)) AS addr",
    )
    for name, legacy, codec in (("default", False, "snappy"), ("legacy", True, "snappy"), ("lz4", False, "lz4")):
        spark.conf.set("spark.sql.parquet.writeLegacyFormat", str(legacy).lower())
        spark.conf.set("spark.sql.parquet.compression.codec", codec)
        target = out / f"{name}.dir"
        rows.coalesce(1).write.mode("overwrite").parquet(str(target))
        (part,) = target.glob("part-*.parquet")
        shutil.move(str(part), out / f"{name}.parquet")
        shutil.rmtree(target)
    print(json.dumps({"spark": spark.version}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            rows = spark.read.parquet(*request["paths"])
            if request["exclude"]:
                rows = rows.where(~rows["id"].isin(request["exclude"]))
            seen = rows.selectExpr(
                "count(*) AS n", "sum(CAST(xxhash64(to_json(struct(*))) AS DECIMAL(38, 0))) AS h"
            ).collect()[0]
        except Exception as e:  # what Spark cannot read is the test's to judge
            print(json.dumps({"error": str(e).splitlines()[0]}), flush=True)
            continue
        print(json.dumps({"rows": seen["n"], "hash": str(seen["h"])}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
