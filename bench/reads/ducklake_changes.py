"""DuckLake's side of changes.py, run in a side venv (DuckDB 1.5.5 with the ducklake and
httpfs wheels).

``build``: a DuckLake table (catalog: a DuckDB file under ``--dir``; data under ``--data-path``, a
local directory or ``s3://...`` reached at ``--endpoint``) created from ``--base`` (a Parquet file),
then one ``MERGE INTO`` (an upsert by ``id``) per ``--sources`` file; prints the snapshot id after
each merge and the data files' layout as JSON.

``measure``: for each ``--ranges`` ``a:b``, ``--repeats`` times on a new connection (the extension
loaded before the clock starts): ATTACH and ``table_changes('events', a, b)`` read as Arrow; prints
each repeat's seconds, rows, change types and (with ``--control``) the shaping proxy's counters
as JSON. Standard library, duckdb and pyarrow only: it runs outside the project's venv.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import duckdb_extension_ducklake
import duckdb_extension_httpfs

from bench.reads.shaped_duckdb import use_endpoint


def connect(endpoint: str) -> duckdb.DuckDBPyConnection:
    """A new connection with ducklake (and, for S3, httpfs and a secret for ``endpoint``) loaded."""
    con = duckdb.connect()
    for module, name in ((duckdb_extension_ducklake, "ducklake"), (duckdb_extension_httpfs, "httpfs")):
        extension = Path(module.__file__).parent / f"extensions/v{duckdb.__version__}"
        con.sql(f"LOAD '{extension / f'{name}.duckdb_extension'}'")
    if endpoint:
        use_endpoint(con, endpoint)
    return con


def attach(con: duckdb.DuckDBPyConnection, root: Path, data_path: str) -> None:
    con.sql(f"ATTACH 'ducklake:{root / 'catalog.ducklake'}' AS lake (DATA_PATH '{data_path}')")


def counters(control: str, reset: bool) -> dict[str, Any]:
    if not control:
        return {}
    with urllib.request.urlopen(control + ("?reset" if reset else ""), timeout=10) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


def build(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    con = connect(args.endpoint)
    attach(con, root, args.data_path)
    con.sql(f"CREATE TABLE lake.events AS SELECT * FROM read_parquet('{args.base}')")
    snapshots = []
    for source in args.sources:
        started = time.perf_counter()
        con.sql(
            f"MERGE INTO lake.events t USING read_parquet('{source}') s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET ts = s.ts, value = s.value, category = s.category "
            "WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.ts, s.value, s.category)"
        )
        seconds = time.perf_counter() - started
        snapshot = con.execute("SELECT id FROM lake.current_snapshot()").fetchone()
        assert snapshot is not None
        snapshots.append([snapshot[0], seconds])
    listing = "FROM ducklake_list_files('lake', 'events')"
    files = con.execute(f"SELECT count(*), sum(data_file_size_bytes) {listing}").fetchone()
    deletes = con.execute(f"SELECT count(*) {listing} WHERE delete_file IS NOT NULL").fetchone()
    con.close()
    assert files is not None and deletes is not None
    return {
        "snapshots": snapshots,
        "layout": f"{files[0]} live data file(s), {deletes[0]} with a delete file, {files[1] / 1e6:.1f} MB",
        "duckdb": duckdb.__version__,
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(args.dir)
    out: dict[str, Any] = {}
    for bounds in args.ranges:
        first, last = (int(v) for v in bounds.split(":"))
        runs = out.setdefault(bounds, [])
        for _ in range(args.repeats):
            con = connect(args.endpoint)
            counters(args.control, True)
            started = time.perf_counter()
            attach(con, root, args.data_path)
            rows = con.sql(f"SELECT * FROM lake.table_changes('events', {first}, {last})").to_arrow_table()
            seconds = time.perf_counter() - started
            counted = rows.group_by("change_type").aggregate([("id", "count")]).to_pylist()
            kinds = {r["change_type"]: r["id_count"] for r in counted}
            runs.append([seconds, counters(args.control, False), rows.num_rows, kinds])
            con.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["build", "measure"])
    parser.add_argument("--dir", required=True, help="where the catalog file is")
    parser.add_argument("--data-path", required=True)
    parser.add_argument("--endpoint", default="", help="the S3 endpoint, for an s3:// data path")
    parser.add_argument("--control", default="", help="the shaping proxy's counters")
    parser.add_argument("--base", default="")
    parser.add_argument("--sources", nargs="*", default=[])
    parser.add_argument("--ranges", nargs="*", default=[])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(build(args) if args.mode == "build" else measure(args)))


if __name__ == "__main__":
    main()
