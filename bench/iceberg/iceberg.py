"""Iceberg publication (castable.iceberg) on the local disk: what it costs a commit, and how
Iceberg readers read the published table against castable's own scan.

1. Cost per commit at ``--files`` data files (10, 1,000, 100,000 by default): a table of that
   many small files (registered with add_files) is published once; then, ``--repeats`` times,
   a 1-row append and the publication of its version, each timed, with the objects and bytes
   the publication wrote. O(change): the publication writes the new segment's manifest, the
   manifest list, the metadata file and the hint, whatever the table's size.
2. Readers after ``--deletes`` scattered deletes (one delete commit each) in a table of
   ``--rows`` rows: castable's scan, pyiceberg's ``StaticTable`` scan and DuckDB 1.5.5's
   ``iceberg_scan`` (side venv) of the same version, cold (caches cleared, a fresh DuckDB
   connection), medians.

Usage: python -m bench iceberg [--files 10,1000,100000] [--repeats 7]
       [--rows 2000000] [--deletes 1000] [--duckdb .venv-duckdb15/bin/python] [--out DIR] [--quick]
Writes DIR/iceberg.md (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.table import StaticTable

import castable
from bench.common.benchlib import RESULTS, ROOT, fmt_s, log, publish, report_header
from castable.format.layout import ICEBERG_PREFIX
from castable.iceberg import publish as publish_table
from castable.store.local import LocalStore

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("category", pa.string()), ("value", pa.float64())])
DUCKDB_SCAN = """
import duckdb, duckdb_extension_avro, duckdb_extension_iceberg, json, sys, time
from pathlib import Path
location, repeats = sys.argv[1], int(sys.argv[2])
times = []
for _ in range(repeats):
    con = duckdb.connect()
    for m in (duckdb_extension_avro, duckdb_extension_iceberg):
        name = m.__name__.removeprefix("duckdb_extension_")
        folder = Path(m.__file__).parent / f"extensions/v{duckdb.__version__}"
        con.sql(f"LOAD '{folder / (name + '.duckdb_extension')}'")
    start = time.perf_counter()
    rows = con.sql(f"SELECT * FROM iceberg_scan('{location}')").fetch_arrow_table().num_rows
    times.append(time.perf_counter() - start)
print(json.dumps({"times": times, "rows": rows}))
"""


class Counting:
    """What the publications write: LocalStore.put counted for keys under metadata/."""

    def __init__(self) -> None:
        self.objects = 0
        self.bytes = 0
        self._put = LocalStore.put

    def __enter__(self) -> Counting:
        real = self._put

        def put(store: LocalStore, key: str, data: bytes, **options: Any) -> Any:
            if key.startswith(ICEBERG_PREFIX):
                self.objects += 1
                self.bytes += len(data)
            return real(store, key, data, **options)

        LocalStore.put = put  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        LocalStore.put = self._put  # type: ignore[method-assign]


def small_files_table(root: Path, files: int) -> castable.Table:
    """A table of ``files`` two-row Parquet files (ids 2i and 2i+1), registered in one commit."""
    table = castable.create_table(str(root), SCHEMA, primary_key="id", properties={"write.inline.max-bytes": 0})
    data = root / "data" / "bench"
    data.mkdir(parents=True)
    paths = []
    for i in range(files):
        ids = [2 * i, 2 * i + 1]
        rows = pa.table({"id": ids, "category": ["abcd"[i % 4]] * 2, "value": [i * 0.5, i * 0.5]}, schema=SCHEMA)
        pq.write_table(rows, data / f"{i}.parquet")
        paths.append(f"data/bench/{i}.parquet")
    table.add_files(paths, verify="footer")
    return table


def cost_per_commit(work: Path, files: int, repeats: int) -> dict[str, Any]:
    table = small_files_table(work / f"files-{files}", files)
    start = time.perf_counter()
    publish_table(table)
    first = time.perf_counter() - start
    commits, publications, objects, written = [], [], [], []
    for i in range(repeats):
        row = pa.table({"id": [10**9 + i], "category": ["x"], "value": [1.0]}, schema=SCHEMA)
        start = time.perf_counter()
        table.append(row)
        commits.append(time.perf_counter() - start)
        with Counting() as counted:
            start = time.perf_counter()
            publish_table(table)
            publications.append(time.perf_counter() - start)
        objects.append(counted.objects)
        written.append(counted.bytes)
    deletes: dict[str, list[float]] = {"row": [], "file": []}
    published: dict[str, list[float]] = {"row": [], "file": []}
    for i in range(repeats):
        one, other = (i * 7919) % files, (i * 7919 + 1) % files
        for kind, where in (("row", f"id = {2 * one}"), ("file", f"id BETWEEN {2 * other} AND {2 * other + 1}")):
            start = time.perf_counter()
            table.delete(where)
            deletes[kind].append(time.perf_counter() - start)
            start = time.perf_counter()
            publish_table(table)
            published[kind].append(time.perf_counter() - start)
    return {
        "files": files,
        "first": first,
        "commit": statistics.median(commits),
        "publication": statistics.median(publications),
        "objects": statistics.median(objects),
        "bytes": statistics.median(written),
        **{f"delete_{k}": statistics.median(v) for k, v in deletes.items()},
        **{f"delete_{k}_publication": statistics.median(v) for k, v in published.items()},
    }


def readers(work: Path, rows: int, deletes: int, repeats: int, duckdb: Path) -> dict[str, Any]:
    table = castable.create_table(str(work / "deletes"), SCHEMA, primary_key="id")
    rng = np.random.default_rng(3)
    ids = np.arange(rows, dtype=np.int64)
    table.append(
        pa.table(
            {"id": ids, "category": pa.array(["abcd"[i % 4] for i in range(rows)]), "value": rng.random(rows)},
            schema=SCHEMA,
        )
    )
    for doomed in rng.choice(rows, deletes, replace=False):
        table.delete(f"id = {int(doomed)}")
    publish_table(table)
    location = f"{table.uri}/{ICEBERG_PREFIX}v{table.version}.metadata.json"
    times: dict[str, list[float]] = {"castable": [], "pyiceberg": []}
    for _ in range(repeats):
        castable.clear_caches()
        start = time.perf_counter()
        n = castable.open_table(table.uri).scan().to_arrow().num_rows
        times["castable"].append(time.perf_counter() - start)
        start = time.perf_counter()
        assert StaticTable.from_metadata(location).scan().to_arrow().num_rows == n
        times["pyiceberg"].append(time.perf_counter() - start)
    out = subprocess.run(
        [str(duckdb), "-c", DUCKDB_SCAN, table.uri, str(repeats)], check=True, capture_output=True, text=True
    )
    found = json.loads(out.stdout)
    assert found["rows"] == n, (found["rows"], n)
    times["DuckDB iceberg_scan"] = found["times"]
    return {"rows": n, "deletes": deletes, "times": {k: statistics.median(v) for k, v in times.items()}}


def report(costs: list[dict[str, Any]], read: dict[str, Any], command: str, seconds: float) -> list[str]:
    lines = [
        *report_header("Iceberg publication", f"`{command}` took {seconds / 60:.1f} min."),
        "## Cost per commit",
        "",
        "A 1-row append, then the publication of its version; medians. The first publication of a table",
        "reads every file's footer once (statistics for Iceberg's manifests); later ones write O(change).",
        "",
        "| data files | first publication | commit | publication | publication / commit | objects written "
        "| bytes written |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in costs:
        lines.append(
            f"| {c['files']:,} | {fmt_s(c['first'])} | {fmt_s(c['commit'])} | {fmt_s(c['publication'])} "
            f"| {c['publication'] / c['commit']:.2f}x | {c['objects']:.0f} | {c['bytes']:,.0f} |"
        )
    lines += [
        "",
        "Then deletes, each published: of one row of a file (castable writes a tombstone; the publication,",
        "a position delete file and a delete manifest), and of a key range holding both rows of another",
        "file (its statistics prove every row matches, so castable drops the file from its data segment",
        "and the publication rewrites that segment's data manifest, up to 65,536 entries, from the",
        "descriptions it published before: no footer is read); medians.",
        "",
        "| data files | delete of a row | its publication | / delete | delete of a whole file | its publication "
        "| / delete |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in costs:
        lines.append(
            f"| {c['files']:,} | {fmt_s(c['delete_row'])} | {fmt_s(c['delete_row_publication'])} "
            f"| {c['delete_row_publication'] / c['delete_row']:.2f}x | {fmt_s(c['delete_file'])} "
            f"| {fmt_s(c['delete_file_publication'])} | {c['delete_file_publication'] / c['delete_file']:.2f}x |"
        )
    smallest, largest = costs[0], costs[-1]
    growth = largest["publication"] / smallest["publication"]
    lines += [
        "",
        "## Readers of the published table",
        "",
        f"{read['rows']:,} live rows after {read['deletes']:,} scattered deletes (one commit each), "
        "read whole, cold; medians.",
        "",
        "| reader | full scan | / castable |",
        "| --- | ---: | ---: |",
    ]
    base = read["times"]["castable"]
    for name, t in read["times"].items():
        lines.append(f"| {name} | {fmt_s(t)} | {t / base:.2f}x |")
    lines += [
        "",
        "## Targets",
        "",
        f"- publication cost stays O(change): {largest['files']:,} files publish a commit in "
        f"{growth:.2f}x the time of {smallest['files']:,} ({largest['objects']:.0f} objects, "
        f"{largest['bytes']:,.0f} bytes): **{'met' if largest['objects'] <= smallest['objects'] else 'missed'}**",
        "- readers after scattered deletes: reported above (ratios to castable's own scan).",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", default="10,1000,100000")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--deletes", type=int, default=1000)
    parser.add_argument("--duckdb", type=Path, default=ROOT / ".venv-duckdb15" / "bin" / "python")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="small sizes, for the smoke tests")
    args = parser.parse_args()
    if args.quick:
        args.files, args.repeats, args.rows, args.deletes = "10,100", 2, 20_000, 20
    command = "python -m bench iceberg " + (
        "--quick" if args.quick else f"--files {args.files} --rows {args.rows} --deletes {args.deletes}"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        costs = []
        for files in (int(f) for f in args.files.split(",")):
            log(f"publication cost at {files:,} files")
            costs.append(cost_per_commit(work, files, args.repeats))
        log(f"readers after {args.deletes:,} deletes in {args.rows:,} rows")
        read = readers(work, args.rows, args.deletes, args.repeats, args.duckdb)
    publish("iceberg", report(costs, read, command, time.perf_counter() - started), args.out)


if __name__ == "__main__":
    main()
