"""DuckDB's reads for shaped.py, run in a side venv (DuckDB 1.5.5 with the httpfs wheel).

Each repeat opens a new connection (no file cache carried over), reads the Parquet files under
``--glob`` over S3 and prints, as JSON, each operation's timings and the shaping proxy's counters
for each repeat. Standard library and duckdb only: it runs outside the project's venv.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import duckdb_extension_httpfs


def connect(endpoint: str, threads: int) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    extension = Path(duckdb_extension_httpfs.__file__).parent / f"extensions/v{duckdb.__version__}"
    con.sql(f"LOAD '{extension / 'httpfs.duckdb_extension'}'")
    con.sql(f"SET threads = {threads}")
    use_endpoint(con, endpoint)
    return con


def use_endpoint(con: duckdb.DuckDBPyConnection, endpoint: str) -> None:
    """Read S3 through ``endpoint`` (the moto server behind the shaping proxy), uncached."""
    con.sql("SET enable_external_file_cache = false")
    con.sql("SET enable_http_metadata_cache = false")
    con.sql(
        "CREATE SECRET bench (TYPE s3, KEY_ID 'bench', SECRET 'bench', REGION 'us-east-1', "
        f"ENDPOINT '{endpoint.removeprefix('http://')}', URL_STYLE 'path', USE_SSL false)"
    )


def counters(control: str | None, reset: bool) -> dict[str, Any]:
    if not control:
        return {}
    with urllib.request.urlopen(control + ("?reset" if reset else ""), timeout=10) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--control", default="")
    parser.add_argument("--glob", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lo", type=int, required=True)
    parser.add_argument("--hi", type=int, required=True)
    parser.add_argument("--ops", nargs="+", required=True)
    args = parser.parse_args()
    source = f"read_parquet('{args.glob}')"
    queries = {
        "full": f"SELECT * FROM {source}",
        "range": f"SELECT * FROM {source} WHERE id BETWEEN {args.lo} AND {args.hi}",
        "count": f"SELECT count(*) FROM {source}",
    }
    out: dict[str, list[list[Any]]] = {}
    for op in args.ops:
        runs = out.setdefault(op, [])
        for _ in range(args.repeats):
            con = connect(args.endpoint, args.threads)
            counters(args.control, True)
            started = time.perf_counter()
            rows = con.sql(queries[op]).to_arrow_table()
            seconds = time.perf_counter() - started
            found = rows.num_rows if op != "count" else rows[0][0].as_py()
            runs.append([seconds, counters(args.control, False), found])
            con.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
