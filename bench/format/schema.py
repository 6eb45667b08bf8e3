"""Schema evolution costs, side by side in one run.

1. A schema change (add a column, rename one, widen one: one ``alter`` commit) on tables of 10
   to 100,000 data files, on the local store and on a moto S3 server over HTTP, beside a 1-row
   append on the same table: latency (fresh handle), manifest bytes written, and data-file
   requests (none: a schema change reads and writes no data). Tables are built as in
   scale.py: one real file, the other entries synthetic.
2. A full scan of a table whose files span three schema generations (written, then a rename, a
   widening and an added column; then a dropped and re-added column) against a table holding
   the same rows written in one generation, local store: target at least 0.9x.

Usage: python -m bench schema [--files 10 1000 100000] [--rows 3000000]
       [--repeats 5] [--quick] [--out DIR]
Writes schema.md (in --out, default bench/results/) as well as printing it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import castable
from bench.common.benchlib import RESULTS, fmt_s, median_time, moto_server, publish, report_header
from bench.format.scale_tables import BUCKET, build_table, manifest_written, rows

STORES = ("local", "moto")


def change_cost(uri: str, files: int, options: dict[str, Any] | None, repeats: int) -> dict[str, float]:
    """Median latency and manifest bytes of a schema change and of a 1-row append, each on a
    handle just opened (the open, the same for both, not timed)."""
    build_table(uri, files, options, 2)
    out: dict[str, list[float]] = {
        k: [] for k in ("alter_s", "alter_bytes", "alter_requests", "append_s", "append_bytes")
    }
    for i in range(repeats):
        data = {o.key for o in castable.open_table(uri, storage_options=options).store.list("data/")}
        table = castable.open_table(uri, storage_options=options)
        table.store.stats.reset()
        t0 = time.perf_counter()
        with table.alter() as change:
            change.add_column(f"note{i}", pa.string()).rename_column(table.schema.names[2], f"body{i}")
        out["alter_s"].append(time.perf_counter() - t0)
        out["alter_requests"].append(sum(table.store.stats.requests.values()))
        assert {o.key for o in table.store.list("data/")} == data, "a schema change writes no data"
        out["alter_bytes"].append(manifest_written(table))
        table = castable.open_table(uri, storage_options=options)
        one = rows(10**9 + i, 1).rename_columns(table.schema.names[:4])
        t0 = time.perf_counter()
        table.append(one, schema_mode="merge")
        out["append_s"].append(time.perf_counter() - t0)
        out["append_bytes"].append(manifest_written(table))
    return {k: float(np.median(v)) for k, v in out.items()}


def generations(root: Path, rows_per_gen: int) -> tuple[castable.Table, castable.Table]:
    """The same rows in three schema generations, and written in one (the same three blocks)."""
    rng = np.random.default_rng(5)
    blocks = [
        pa.table(
            {
                "id": np.arange(g * rows_per_gen, (g + 1) * rows_per_gen),
                "n": rng.integers(0, 2**31 - 1, rows_per_gen),
                "value": rng.random(rows_per_gen),
                "s": pa.array([f"s{i % 1000}" for i in range(rows_per_gen)]),
            }
        )
        for g in range(3)
    ]
    first = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("n", pa.int32()),
            pa.field("x", pa.float64()),
            pa.field("s", pa.string()),
            pa.field("old", pa.string()),
        ]
    )
    evolved = castable.create_table(str(root / "evolved"), first, primary_key="id")
    gen1 = blocks[0].rename_columns(["id", "n", "x", "s"]).append_column("old", pa.nulls(rows_per_gen, pa.string()))
    evolved.append(gen1.cast(first))
    with evolved.alter() as change:
        change.rename_column("x", "value").widen_column("n", pa.int64()).add_column("tag", pa.string())
    evolved.append(blocks[1], schema_mode="merge")
    with evolved.alter() as change:
        change.drop_column("old").add_column("old", pa.string())
    evolved.append(blocks[2], schema_mode="merge")

    single = castable.create_table(str(root / "single"), evolved.schema, primary_key="id")
    for block in blocks:
        single.append(block, schema_mode="merge")
    return evolved, single


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, nargs="+", help="data files per table (default 10 1000 100000)")
    parser.add_argument("--rows", type=int, help="rows of the scan tables (default 3,000,000)")
    parser.add_argument("--repeats", type=int, help="timed repeats (default 5)")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny tables, 1 repeat")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    files = args.files or ([10, 100] if args.quick else [10, 1000, 100_000])
    total = args.rows or (30_000 if args.quick else 3_000_000)
    repeats = args.repeats or (1 if args.quick else 5)
    lines = report_header("schema evolution", f"{repeats} repeats, medians")
    lines += [
        "## 1. A schema change against a 1-row append (on a handle just opened, format version 2)",
        "",
        "The change: add a column and rename one, one commit. Tables of N data files built as in"
        " bench/format/scale.py (synthetic entries).",
        "",
        "| store | files | alter | append 1 row | alter / append | manifest bytes: alter | append | requests: alter |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    work = Path(tempfile.mkdtemp(prefix="castable-schema-"))
    server, endpoint = moto_server()
    ratios: list[float] = []
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
        for store in STORES:
            for n in files:
                if store == "moto" and n > 10_000:
                    continue
                options = {"endpoint_url": endpoint, "region": "us-east-1"} if store == "moto" else None
                uri = f"s3://{BUCKET}/schema-{n}" if store == "moto" else str(work / f"schema-{n}")
                m = change_cost(uri, n, options, repeats)
                ratios.append(m["alter_s"] / m["append_s"])
                kb = f"{m['alter_bytes'] / 1000:.1f} kB | {m['append_bytes'] / 1000:.1f} kB"
                lines.append(
                    f"| {store} | {n:,} | {fmt_s(m['alter_s'])} | {fmt_s(m['append_s'])} | {ratios[-1]:.2f}x"
                    f" | {kb} | {int(m['alter_requests'])} |"
                )
                print(lines[-1], file=sys.stderr, flush=True)
        evolved, single = generations(work, total // 3)
        t_evolved = median_time(lambda: evolved.scan().to_arrow(), repeats)[0]
        t_single = median_time(lambda: single.scan().to_arrow(), repeats)[0]
    finally:
        server.close()
    speed = t_single / t_evolved
    lines += [
        "",
        f"## 2. Full scan of {total:,} rows: three schema generations against one (local store)",
        "",
        "| table | files | full scan | rows/s |",
        "| --- | ---: | ---: | ---: |",
        f"| three generations | {len(evolved.manifest.data_files)} | {fmt_s(t_evolved)} | {total / t_evolved:,.0f} |",
        f"| one generation | {len(single.manifest.data_files)} | {fmt_s(t_single)} | {total / t_single:,.0f} |",
        "",
        "## Targets",
        "",
        f"- a schema change is one small commit that reads and writes no data: at most"
        f" {max(ratios):.2f}x a 1-row append's latency: **{'met' if max(ratios) <= 1.5 else 'missed'}**",
        f"- full scan over three generations at least 0.9x one generation: {speed:.2f}x:"
        f" **{'met' if speed >= 0.9 else 'missed'}**",
        "",
        f"Command: `python -m bench schema {' '.join(sys.argv[1:])}`",
    ]
    shutil.rmtree(work, ignore_errors=True)
    publish("schema", lines, args.out)


if __name__ == "__main__":
    main()
