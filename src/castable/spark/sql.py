"""Spark conveniences over ``read_table`` and the ingest job's write: SQL names for every table
of a database at one database version, and a ``foreachBatch`` sink for Structured Streaming
whose commits are idempotent per micro-batch (Spark 3.5 and 4.x)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import castable
from castable.commit.handle import SchemaMode
from castable.errors import EmptyWriteError, InvalidInputError
from castable.ops.writes import AddMode
from castable.spark.ingest import ingest
from castable.spark.read import read_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def register_views(
    spark: SparkSession,
    database: str | castable.Database,
    *,
    version: int | None = None,
    timestamp: datetime | str | None = None,
    prefix: str = "",
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Make every table of ``database`` a temporary view named ``prefix + <table>``, all read at
    one database version (the newest, ``version``, or the one at ``timestamp``), so a SQL join
    across them sees one consistent snapshot; return each table's view name."""
    db = (
        database
        if isinstance(database, castable.Database)
        else castable.open_database(database, storage_options=storage_options)
    )
    snapshot = db.snapshot(version, timestamp)
    views = {}
    for name in sorted(snapshot.tables):
        view = f"{prefix}{name}"
        read_table(spark, snapshot.table(name)).createOrReplaceTempView(view)
        views[name] = view
    return views


def stream_sink(
    table_uri: str,
    query: str,
    *,
    mode: AddMode = "append",
    storage_options: Mapping[str, Any] | None = None,
    commit_function: str | None = None,
    schema_mode: SchemaMode = "strict",
) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function that commits each micro-batch as one commit with id
    ``<query>-<batch id>``. Spark replays a batch after a failure with the same id (from the
    query's checkpoint), so a replay commits nothing twice; ``query`` must stay the same for a
    query across restarts (its name, say) and differ between queries writing the same table.
    An empty batch commits nothing. ``mode`` and ``schema_mode`` (``merge``: a batch's new columns
    are added) are the ingest job's."""
    if not query or "/" in query:
        raise InvalidInputError(f"query must name the streaming query (no '/'), not {query!r}")

    def sink(batch: DataFrame, batch_id: int) -> None:
        try:
            ingest(
                batch,
                table_uri,
                f"{query}-{batch_id}",
                mode=mode,
                storage_options=storage_options,
                commit_function=commit_function,
                schema_mode=schema_mode,
            )
        except EmptyWriteError:
            return

    return sink
