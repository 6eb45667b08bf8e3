"""Parquet files as other engines read them: pyarrow, DuckDB and DataFusion, so a test can check
that what castable wrote reads in each exactly as the original did."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

import datafusion
import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def engines(paths: list[Path], exclude: list[int], skip: Collection[str] = ()) -> dict[str, pa.Table]:
    """The rows of ``paths`` as pyarrow, DuckDB and DataFusion each read them (but those in
    ``skip``), ordered by ``id``, rows whose id is in ``exclude`` left out. Strings come as
    strings, not views, so the three compare."""
    keep = pc.invert(pc.is_in(pc.field("id"), pa.array(exclude, pa.int64())))
    duck = duckdb.connect()
    duck.execute("SET produce_arrow_string_view = false")
    config = datafusion.SessionConfig().set("datafusion.execution.parquet.schema_force_view_types", "false")
    fusion = datafusion.SessionContext(config)
    readers: dict[str, Callable[[], pa.Table]] = {
        "pyarrow": lambda: pa.concat_tables([pq.read_table(p) for p in paths]),
        "duckdb": lambda: duck.sql(f"SELECT * FROM read_parquet({[str(p) for p in paths]})").to_arrow_table(),
        "datafusion": lambda: pa.concat_tables([fusion.read_parquet(str(p)).to_arrow_table() for p in paths]),
    }
    return {
        engine: read().filter(keep).sort_by("id").replace_schema_metadata(None)
        for engine, read in readers.items()
        if engine not in skip
    }
