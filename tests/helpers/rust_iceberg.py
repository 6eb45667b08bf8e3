"""Run in the side venv .venv-duckdb15: read published Iceberg metadata files with iceberg-rust
(pyiceberg-core's DataFusion table provider), each at its current snapshot.

Usage: python rust_iceberg.py <out dir> <metadata location>...
Writes <out dir>/<i>.arrow for the i-th metadata file (from 0): the rows iceberg-rust reads.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
from datafusion import SessionContext
from pyiceberg_core.datafusion import IcebergDataFusionTable


def main() -> None:
    out, *locations = sys.argv[1:]
    for i, location in enumerate(locations):
        ctx = SessionContext()
        ctx.register_table("t", IcebergDataFusionTable(["castable", "t"], location, {}))
        rows = ctx.sql("SELECT * FROM t").to_arrow_table()
        with pa.OSFile(str(Path(out) / f"{i}.arrow"), "wb") as sink, pa.ipc.new_file(sink, rows.schema) as w:
            w.write_table(rows)


if __name__ == "__main__":
    main()
