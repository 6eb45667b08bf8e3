"""One way to start the local Spark 4 session the tests use, with castable's data source registered."""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(name: str) -> Any:
    """A ``local[2]`` session named ``name``, in UTC, without the UI, this interpreter as Spark's Python."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from castable.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName(name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
