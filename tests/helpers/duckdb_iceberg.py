"""Run in the DuckDB 1.5.5 side venv (.venv-duckdb15): read a table's published Iceberg
metadata with DuckDB's own iceberg extension, one snapshot after another.

Usage: python duckdb_iceberg.py <table location> <out dir> <snapshot id>...
Writes <out dir>/<snapshot id>.arrow (Arrow IPC) per snapshot: the rows iceberg_scan returns.
With S3 locations, AWS_ENDPOINT_URL names the S3 endpoint (moto), with its test credentials.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlparse

import duckdb
import duckdb_extension_avro
import duckdb_extension_httpfs
import duckdb_extension_iceberg
import pyarrow as pa


def main() -> None:
    location, out, *snapshots = sys.argv[1:]
    con = duckdb.connect()
    for module in (duckdb_extension_httpfs, duckdb_extension_avro, duckdb_extension_iceberg):
        name = module.__name__.removeprefix("duckdb_extension_")
        path = Path(module.__file__).parent / f"extensions/v{duckdb.__version__}" / f"{name}.duckdb_extension"
        con.sql(f"LOAD '{path}'")
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        con.sql(
            f"CREATE SECRET s3 (TYPE s3, KEY_ID 'testing', SECRET 'testing', REGION 'us-east-1', "
            f"ENDPOINT '{urlparse(endpoint).netloc}', URL_STYLE 'path', USE_SSL false)"
        )
    for snapshot in snapshots:
        query = f"SELECT * FROM iceberg_scan('{location}', snapshot_from_id = {int(snapshot)})"
        rows = con.sql(query).fetch_arrow_table()
        target = str(Path(out) / f"{snapshot}.arrow")
        with pa.OSFile(target, "wb") as sink, pa.ipc.new_file(sink, rows.schema) as writer:
            writer.write_table(rows)


if __name__ == "__main__":
    main()
