"""DuckLake's side of small_appends.py, run in a side venv (DuckDB 1.5.5 with the ducklake wheel).

Builds a DuckLake table (a DuckDB catalog file, data under ``--dir``) by ``--appends`` one-row
inserts, with DuckLake 1.0's default data inlining (10 rows) or with inlining off, then times a
full scan ``--repeats`` times, each on a new connection with the extension loaded: attach and a
first scan (cold), then the same scan again (warm), and prints the timings as JSON. Standard
library and duckdb only: it runs outside the project's venv.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import duckdb
import duckdb_extension_ducklake


def loaded() -> duckdb.DuckDBPyConnection:
    """A new connection with the ducklake extension loaded (not timed: a process does it once)."""
    con = duckdb.connect()
    extension = Path(duckdb_extension_ducklake.__file__).parent / f"extensions/v{duckdb.__version__}"
    con.sql(f"LOAD '{extension / 'ducklake.duckdb_extension'}'")
    return con


def attach(con: duckdb.DuckDBPyConnection, catalog: Path, data: Path, inlining: bool) -> None:
    limit = "" if inlining else ", DATA_INLINING_ROW_LIMIT 0"
    con.sql(f"ATTACH 'ducklake:{catalog}' AS lake (DATA_PATH '{data}'{limit})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--appends", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--inlining", choices=["on", "off"], required=True)
    args = parser.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    catalog, data = root / "catalog.ducklake", root / "data"
    inlining = args.inlining == "on"
    con = loaded()
    attach(con, catalog, data, inlining)
    con.sql("CREATE TABLE lake.events (id BIGINT, ts TIMESTAMPTZ, value DOUBLE, category VARCHAR)")
    for i in range(args.appends):
        con.execute(
            "INSERT INTO lake.events VALUES (?, TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(?), ?, ?)",
            [i, i, i * 0.5, "abcd"[i % 4]],
        )
    con.close()
    files = sum(1 for _ in data.rglob("*.parquet"))
    cold, warm = [], []
    rows = 0
    for _ in range(args.repeats):
        con = loaded()
        start = time.perf_counter()
        attach(con, catalog, data, inlining)
        rows = con.sql("SELECT * FROM lake.events").to_arrow_table().num_rows
        cold.append(time.perf_counter() - start)
        start = time.perf_counter()
        con.sql("SELECT * FROM lake.events").to_arrow_table()
        warm.append(time.perf_counter() - start)
        con.close()
    print(json.dumps({"cold": cold, "warm": warm, "rows": rows, "parquet_files": files, "duckdb": duckdb.__version__}))


if __name__ == "__main__":
    main()
