"""Appends to a table that enforces its primary key (``write.primary-key.enforce``), side by side
with the same appends to the same table without it, on the local store and on S3 as it behaves
(moto behind the shaping proxy: 25 ms to first byte, 90 MB/s a connection).

Two tables of the same rows (even ids only, in 8 files), one enforcing its key, take turns at
each append of 10,000 new keys, so both grow alike. Two kinds of new keys:

- *growing*: ids past every live one (counters, times): the files' statistics rule every file
  out, so the check reads no data file;
- *scattered*: odd ids among the live ones: each file's statistics leave room for them, so the
  check reads the key column of every file (a bloom filter on the key cannot help a batch of
  10,000 keys: some key or other passes every row group's filter).

Target: an enforced append of 10,000 growing keys within 1.5x of an unenforced one.

Usage: python -m bench keys [--rows 2000000] [--batch 10000] [--repeats 5] [--quick] [--out DIR]
Writes bench/results/keys.md as well as printing it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pyarrow as pa

import castable
from bench.common.benchlib import RESULTS, log, publish, report_header
from bench.common.shaped_s3 import shaped_s3
from castable.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("user", pa.string()), ("amount", pa.float64())])
FILES = 8
KINDS = ("growing", "scattered")
TARGET = 1.5


def rows_of(ids: np.ndarray, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "user": pa.array([f"u{i}" for i in rng.integers(0, 50_000, len(ids))]),
            "amount": pa.array(rng.random(len(ids)) * 100),
        },
        schema=SCHEMA,
    )


def tables(root: str, rows: int, options: dict[str, str] | None) -> dict[bool, Table]:
    """The enforcing and the plain table, each of ``rows`` even ids in ``FILES`` appends."""
    made = {}
    for enforce in (False, True):
        props = {"write.primary-key.enforce": str(enforce).lower()}
        uri = f"{root}/{'enforced' if enforce else 'plain'}"
        made[enforce] = castable.create_table(uri, SCHEMA, primary_key="id", properties=props, storage_options=options)
    for i, chunk in enumerate(np.array_split(np.arange(0, 2 * rows, 2), FILES)):
        batch = rows_of(chunk, i)
        for table in made.values():
            table.append(batch)
    return made


def new_keys(kind: str, rows: int, batch: int, repeat: int) -> np.ndarray:
    """``batch`` keys no append has used: past every live id, or odd ids spread among them."""
    if kind == "growing":
        start = 2 * rows + repeat * batch
        return np.arange(start, start + batch)
    rng = np.random.default_rng(1000 + repeat)
    odd = np.arange(1 + 2 * repeat, 2 * rows, 2 * (repeat + 2))  # a different odd residue each repeat
    return np.sort(rng.choice(odd, batch, replace=False))


def measure(store: str, root: str, options: dict[str, str] | None, args: argparse.Namespace) -> list[dict[str, Any]]:
    log(f"{store}: writing two tables of {args.rows:,} rows")
    made = tables(root, args.rows, options)
    found = []
    for k, kind in enumerate(KINDS):
        times: dict[bool, list[float]] = {False: [], True: []}
        for r in range(args.repeats):
            batch = rows_of(new_keys(kind, args.rows, args.batch, k * args.repeats + r), r)
            for enforce in (False, True) if r % 2 == 0 else (True, False):
                began = time.perf_counter()
                made[enforce].append(batch)
                times[enforce].append(time.perf_counter() - began)
        plain, enforced = (statistics.median(times[e]) for e in (False, True))
        found.append({"store": store, "keys": kind, "plain": plain, "enforced": enforced})
        log(f"{store}, {kind}: {plain * 1000:.1f} ms plain, {enforced * 1000:.1f} ms enforced")
    for table in made.values():
        ids = table.to_arrow(columns=["id"]).column("id")
        assert len(ids) == len(np.unique(ids.to_numpy())), "a key is live twice"
    return found


def stores(stack: ExitStack, work: str) -> Iterator[tuple[str, str, dict[str, str] | None]]:
    yield "local", work, None
    s3 = stack.enter_context(shaped_s3())
    boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1").create_bucket(Bucket="keys")
    yield "shaped S3", "s3://keys/t", {"endpoint_url": s3.endpoint, "region": "us-east-1"}


def report(found: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    lines = [
        *report_header(
            "keys: appends to a table that enforces its key", "shaped S3: moto behind a 25 ms, 90 MB/s proxy"
        ),
        f"Two tables of {args.rows:,} rows (even ids, {FILES} files), one with write.primary-key.enforce=true, take "
        f"turns at each append of {args.batch:,} new keys; medians of {args.repeats} appends each.",
        "",
        "| store | new keys | unenforced append (ms) | enforced append (ms) | enforced against unenforced |",
        "|---|---|---:|---:|---:|",
    ]
    for f in found:
        lines.append(
            f"| {f['store']} | {f['keys']} | {f['plain'] * 1000:.1f} | {f['enforced'] * 1000:.1f} "
            f"| {f['enforced'] / f['plain']:.2f}x |"
        )
    growing = [f["enforced"] / f["plain"] for f in found if f["keys"] == "growing"]
    lines += [
        "",
        "Growing keys are settled by the files' statistics (no data file read); scattered keys read the key "
        "column of every file whose statistics leave room for them, here all of them.",
        "",
        "## Targets",
        "",
        f"- an enforced append of {args.batch:,} growing keys within {TARGET}x of an unenforced one, on every store "
        f"(worst {max(growing):.2f}x): **{'met' if max(growing) <= TARGET else 'missed'}**",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a small run, for the smoke test")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.rows, args.batch, args.repeats = 40_000, 1_000, 1
    found = []
    with tempfile.TemporaryDirectory() as work, ExitStack() as stack:
        for store, root, options in stores(stack, work):
            found += measure(store, root, options, args)
    publish("keys", report(found, args), args.out)


if __name__ == "__main__":
    main()
