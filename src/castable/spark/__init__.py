"""castable for Apache Spark: an ingest job that runs on Spark 3.5 (EMR 7.x) and 4.x,
``read_table`` (Spark's own Parquet reader over a version's live files, deletes applied; 3.5
and 4.x), ``read_changes`` and ``foreach_changes`` (a table's change feed; 3.5 and 4.x),
``compact`` (compaction on the cluster, a group of files per task; 3.5 and 4.x), ``delete``,
``update`` and ``merge`` (their file reads and writes in Spark tasks, each committed as one
castable commit with one tombstone; 3.5 and 4.x), and a ``spark.read.format("castable")`` /
``df.write.format("castable")`` data source with a change-feed stream (Spark 4.0+; the stream 4.2+).

Both are thin layers over the library: executors write data files with castable's writer and
read scan tasks with castable's scan; the driver commits once through the commit protocol (or
the commit Lambda). S3 is reached through the library, so no Hadoop S3 connector is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from castable.spark.changes import foreach_changes, read_changes
from castable.spark.dml import delete, merge, update
from castable.spark.files import TableTarget, from_spark
from castable.spark.maintenance import compact
from castable.spark.read import read_table
from castable.spark.sql import register_views, stream_sink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "TableTarget",
    "compact",
    "delete",
    "foreach_changes",
    "from_spark",
    "merge",
    "read_changes",
    "read_table",
    "register",
    "register_views",
    "stream_sink",
    "update",
]


def register(spark: SparkSession) -> None:
    """Register the ``castable`` data source with a Spark 4.0+ session."""
    from castable.spark.datasource import CastableDataSource

    spark.dataSource.register(CastableDataSource)
