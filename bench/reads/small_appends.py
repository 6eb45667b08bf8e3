"""Many small appends on the local disk: castable against DuckLake 1.0, with and without inlining.

Streaming ingestion commits a few rows at a time, so between compactions a table is built of
many tiny writes. Each system builds the same table (id, ts, value, category) by ``--appends``
one-row appends: castable with its defaults (small writes kept inline in the version's segment,
docs/format.md section 3.2) and with inlining off (a Parquet file each), the castable table
compacted into one file, and DuckLake (DuckDB 1.5.5 and its ducklake wheel, in a side venv)
with its default inlining (10 rows) and with it off. Then each full scan, read as Arrow, runs
``--repeats`` times: cold (open the table, caches cleared; DuckLake: a new connection, attach)
and warm (the same scan again); DuckLake's extension is loaded before the clock starts.
Medians, side by side in one run, with the ratios.

Usage: python -m bench small-appends [--appends 1000] [--repeats 7]
       [--duckdb .venv-duckdb15/bin/python] [--out DIR] [--quick]
Writes DIR/small_appends.md (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pyarrow as pa

import castable
from bench.common.benchlib import RESULTS, ROOT, log, publish, report_header

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("value", pa.float64()),
        pa.field("category", pa.string()),
    ]
)


def one_row(i: int) -> pa.Table:
    return pa.table(
        {
            "id": [i],
            "ts": pa.array([1_767_225_600_000_000 + i * 1_000_000], SCHEMA.field("ts").type),
            "value": [i * 0.5],
            "category": ["abcd"[i % 4]],
        },
        schema=SCHEMA,
    )


def build(uri: str, appends: int, inline: bool) -> tuple[castable.Table, float]:
    """A castable table of ``appends`` one-row appends; the seconds the appends took."""
    props = {} if inline else {"write.inline.max-bytes": 0}
    table = castable.create_table(uri, SCHEMA, primary_key="id", properties=props)
    start = time.perf_counter()
    for i in range(appends):
        table.append(one_row(i))
    return table, time.perf_counter() - start


def castable_scans(uri: str, repeats: int) -> dict[str, list[float]]:
    """Cold (open anew, caches cleared) and warm (the same scan again) full scans."""
    cold, warm = [], []
    for _ in range(repeats):
        castable.clear_caches()
        start = time.perf_counter()
        table = castable.open_table(uri)
        rows = table.scan().to_arrow().num_rows
        cold.append(time.perf_counter() - start)
        start = time.perf_counter()
        assert table.scan().to_arrow().num_rows == rows
        warm.append(time.perf_counter() - start)
    return {"cold": cold, "warm": warm}


def ducklake(python: str, root: Path, appends: int, repeats: int, inlining: bool) -> dict[str, object]:
    command = [python, "-m", "bench.reads.ducklake_small", "--dir", str(root), "--appends", str(appends)]
    command += ["--repeats", str(repeats), "--inlining", "on" if inlining else "off"]
    done = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--duckdb", default=str(ROOT / ".venv-duckdb15/bin/python"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="30 appends, 2 repeats: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.appends, args.repeats = 30, 2
    results: dict[str, dict[str, list[float]]] = {}
    layout: dict[str, str] = {}
    writes: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, inline in (("castable (inline, default)", True), ("castable, inlining off", False)):
            log(f"{name}: {args.appends} one-row appends")
            table, seconds = build(str(root / name.split(",")[0].replace(" ", "") / str(inline)), args.appends, inline)
            writes[name] = seconds
            files = list(table.manifest.data_files)
            stored = sum(f.inline is None for f in files)
            layout[name] = f"{len(files)} entries, {stored} Parquet file(s)"
            results[name] = castable_scans(table.uri, args.repeats)
            if inline:
                table.compact()
                layout["castable, compacted"] = f"{len(table.manifest.data_files)} Parquet file(s)"
                results["castable, compacted"] = castable_scans(table.uri, args.repeats)
        for name, inlining in (("DuckLake (inlining, default)", True), ("DuckLake, inlining off", False)):
            log(f"{name}: {args.appends} one-row inserts")
            got = ducklake(args.duckdb, root / f"ducklake-{inlining}", args.appends, args.repeats, inlining)
            assert got["rows"] == args.appends, got
            results[name] = {"cold": list(got["cold"]), "warm": list(got["warm"])}  # type: ignore[call-overload]
            layout[name] = f"{got['parquet_files']} Parquet file(s), DuckDB {got['duckdb']}"
    reference = results["DuckLake (inlining, default)"]
    lines = report_header(
        "small appends on the local disk",
        f"A table built by {args.appends:,} one-row appends, read whole as Arrow; medians of {args.repeats}. "
        "Cold: open the table (caches cleared; DuckLake: ATTACH on a new connection, the extension loaded "
        "before the clock starts) and scan; warm: the same scan again. Ratio: the system's time over "
        "DuckLake with inlining (lower is better).",
    )
    lines += ["| table | layout | cold scan | ratio | warm scan | ratio |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    for name, r in results.items():
        cold = statistics.median(r["cold"]) / statistics.median(reference["cold"])
        warm = statistics.median(r["warm"]) / statistics.median(reference["warm"])
        lines.append(f"| {name} | {layout[name]} | {ms(r['cold'])} | {cold:.2f}x | {ms(r['warm'])} | {warm:.2f}x |")
    lines += [
        "",
        "Appends (castable, in this process): "
        + "; ".join(f"{name}: {seconds / args.appends * 1000:.2f} ms each" for name, seconds in writes.items()),
        "",
    ]
    best = results["castable (inline, default)"]
    verdict = all(statistics.median(best[k]) <= 2 * statistics.median(reference[k]) for k in ("cold", "warm"))
    lines += ["## Targets", ""]
    lines.append(
        f"- castable's full scan of the appended table within 2x DuckLake with inlining, cold and warm: "
        f"**{'met' if verdict else 'missed'}** (cold "
        f"{statistics.median(best['cold']) / statistics.median(reference['cold']):.2f}x, warm "
        f"{statistics.median(best['warm']) / statistics.median(reference['warm']):.2f}x)."
    )
    publish("small_appends", lines, args.out)


if __name__ == "__main__":
    main()
