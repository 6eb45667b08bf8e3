"""Commits through castable's Iceberg REST catalog against castable's own, side by side in one run.

1. Commit latency: a 1-row append by pyiceberg's ``RestCatalog`` to a table the catalog serves
   (``make_server(Catalog(Warehouse.at(...)))`` on a free port, in a thread of this process)
   against castable's own ``Table.append`` of the same row on the same store: castable's default
   (a small write kept inline in the version's segment) and with inlining off (a Parquet file, as
   pyiceberg writes), and against the same client's append to an Iceberg table of pyiceberg's own
   SqlCatalog (SQLite on the local disk; the table's files on the same store). On the local disk
   and on shaped S3 (moto behind bench/common/shaped_s3.py's proxy:
   ``--latency`` before each response, ``--bandwidth`` per connection; the catalog and pyiceberg
   both go through it). The tables are castable tables with the same schema and primary key (the
   catalog's is created by castable and loaded once by pyiceberg); each writer's handle is open
   before the clock starts. ``--repeats`` rounds, each writer once a round, after 2 rounds of
   warm-up; medians, the ratio to castable's default append, the time the catalog took to
   handle the commit request, and on shaped S3 the S3 requests of the median run.
2. Spark ``MERGE INTO``: ``--merge-rows`` rows (half of them existing keys, scattered; half new)
   into ``--rows`` rows of the event table, merge-on-read, in Spark 3.5 with Apache Iceberg's
   Spark runtime (``.venv-spark35``, jars in ``.tools/iceberg``): through the catalog (served
   here over a local warehouse; Spark's catalog class as in tests/integration/spark/test_catalog_spark.py), against
   ``castable.spark.merge`` on the same castable table and against Iceberg's own Hadoop catalog
   (``type=hadoop``, a local directory) on the same rows; every merge starts from the loaded
   table. Time (median of ``--merge-repeats`` after a warm-up round) and the bytes of the files
   the merge added under the table's folder (catalog_spark.py runs this side, in the side venv).

Usage: python -m bench catalog [--repeats 20] [--rows 10000000] [--merge-rows 100000]
       [--merge-repeats 5] [--latency 0.025] [--bandwidth 90e6] [--spark .venv-spark35/bin/python]
       [--jars .tools/iceberg] [--out DIR] [--quick]
Writes DIR/catalog.md (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import boto3
import pyarrow as pa
import pyiceberg
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog

import castable
from bench.common.benchlib import RESULTS, ROOT, SCHEMA, event_batches, log, publish, report_header
from bench.common.shaped_s3 import ShapedS3, shaped_s3
from castable.catalog import Catalog, Request, Response, Warehouse
from castable.catalog.server import make_server

BUCKET = "bench-catalog"
OWN, OWN_FILES = "castable `Table.append`", "castable `Table.append`, inlining off"
VIA = "pyiceberg through the catalog"
PEER = "pyiceberg through its SQL catalog (an Iceberg table)"
CASTABLE_MERGE, REST_MERGE, HADOOP_MERGE = (
    "castable.spark.merge",
    "MERGE INTO through the catalog",
    "MERGE INTO, Hadoop catalog",
)
WARMUP = 2
PROGRESS = re.compile(r"\[ *\d+\.\d s\] (?:(?!\[ *\d+\.\d s\]).)*")
"""A progress line of catalog_spark.py (benchlib's ``log``), perhaps within Spark's own output."""
TARGET = 1.5


class Handled(NamedTuple):
    """A request the catalog answered: when (wall clock), in how many seconds, and the S3
    requests it made (by method, on shaped S3)."""

    method: str
    path: str
    status: int
    started: float
    seconds: float
    s3: dict[str, int]


class TimedCatalog(Catalog):
    """The catalog, keeping every request it handled; with ``probe`` (the shaping proxy's request
    counts), the S3 requests each one made, counted outside its time."""

    def __init__(self, warehouse: Warehouse, probe: Callable[[], dict[str, int]] | None = None) -> None:
        super().__init__(warehouse)
        self.probe = probe
        self.requests: list[Handled] = []

    def handle(self, request: Request) -> Response:
        before = self.probe() if self.probe else {}
        started, t0 = time.time(), time.perf_counter()
        response = super().handle(request)
        seconds = time.perf_counter() - t0
        after = self.probe() if self.probe else {}
        s3 = {m: n - before.get(m, 0) for m, n in after.items() if n != before.get(m, 0)}
        self.requests.append(Handled(request.method, request.path, response.status, started, seconds, s3))
        return response


@contextmanager
def served(
    warehouse: str, options: dict[str, str] | None, probe: Callable[[], dict[str, int]] | None = None
) -> Iterator[tuple[TimedCatalog, str]]:
    """The catalog of ``warehouse`` served on a free port in a thread; it and its URI."""
    catalog = TimedCatalog(Warehouse.at(warehouse, options), probe)
    server = make_server(catalog, port=0)
    thread = server.start()
    try:
        yield catalog, f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.close()


def one_row(i: int) -> pa.Table:
    """Row ``i`` of the event table (id ``i``)."""
    row = pa.Table.from_batches(list(event_batches(1)), schema=SCHEMA)
    return row.set_column(0, SCHEMA.field("id"), pa.array([i], pa.int64()))


def commit_latency(
    where: str, warehouse: str, options: dict[str, str] | None, s3: ShapedS3 | None, repeats: int, work: Path
) -> dict[str, Any]:
    """The four writers' 1-row appends on one store, round-robin: seconds, the catalog's
    handling of pyiceberg's commits, and (shaped S3) the S3 requests of each append. The
    fourth is the same client's append to an Iceberg table of its own SQL catalog (SQLite in
    ``work``, the table's files on the same store): an Iceberg commit without castable."""
    root = warehouse.rstrip("/")
    castable.create_table(f"{root}/db/catalog", SCHEMA, primary_key="id", storage_options=options)
    own = castable.create_table(f"{root}/db/own", SCHEMA, primary_key="id", storage_options=options)
    files = castable.create_table(
        f"{root}/db/files",
        SCHEMA,
        primary_key="id",
        properties={"write.inline.max-bytes": 0},
        storage_options=options,
    )
    times: dict[str, list[float]] = {OWN: [], OWN_FILES: [], VIA: [], PEER: []}
    requests: dict[str, list[dict[str, int]]] = {name: [] for name in times}
    handling: list[float] = []
    catalog_s3: list[dict[str, int]] = []
    probe = (lambda: dict(s3.stats()["requests"])) if s3 is not None else None
    with served(warehouse, options, probe) as (catalog, uri):
        files_io: dict[str, str] = {}
        if options:
            files_io |= {"s3.endpoint": options["endpoint_url"], "s3.region": "us-east-1"}
            files_io |= {"s3.access-key-id": "bench", "s3.secret-access-key": "bench"}
        table = RestCatalog("bench", uri=uri, **files_io).load_table("db.catalog")
        arrow_schema = table.schema().as_arrow()
        sql = SqlCatalog(
            "peer",
            uri=f"sqlite:///{work / (where.replace(' ', '-') + '.db')}",
            warehouse=f"{root}/iceberg" if options else f"file://{root}/iceberg",
            **files_io,
        )
        sql.create_namespace("db")
        peer = sql.create_table("db.peer", schema=table.schema())
        writers: dict[str, Callable[[pa.Table], object]] = {
            OWN: own.append,
            OWN_FILES: files.append,
            VIA: lambda row: table.append(row.cast(arrow_schema)),
            PEER: lambda row: peer.append(row.cast(arrow_schema)),
        }
        log(f"{where}: {WARMUP} + {repeats} rounds of 1-row appends")
        for r in range(WARMUP + repeats):
            row = one_row(r)
            for name, append in writers.items():
                if s3 is not None:
                    s3.reset()
                handled = len(catalog.requests)
                started = time.perf_counter()
                append(row)
                elapsed = time.perf_counter() - started
                if r < WARMUP:
                    continue
                times[name].append(elapsed)
                requests[name].append(s3.stats()["requests"] if s3 is not None else {})
                if name == VIA:
                    answered = catalog.requests[handled:]
                    assert [(a.method, a.status) for a in answered] == [("POST", 200)], answered
                    handling.append(answered[0].seconds)
                    catalog_s3.append(answered[0].s3)
    served_table = castable.open_table(f"{root}/db/catalog", storage_options=options)
    assert served_table.count() == WARMUP + repeats
    assert {h.operation for h in served_table.history()[: WARMUP + repeats]} == {"append"}
    return {"times": times, "requests": requests, "handling": handling, "catalog_s3": catalog_s3}


def median_index(values: list[float]) -> int:
    return sorted(range(len(values)), key=values.__getitem__)[len(values) // 2]


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_requests(counts: dict[str, int]) -> str:
    listed = ", ".join(f"{counts[m]} {m}" for m in sorted(counts))
    return f"{sum(counts.values())}: {listed}" if counts else "-"


def commit_table(
    results: dict[str, dict[str, Any]],
) -> tuple[list[str], dict[str, float], dict[str, float], dict[str, float]]:
    """The commit-latency table; for each store, the ratio of the catalog's append to castable's,
    of pyiceberg's own part of it (the append's time less the catalog's handling), and of the
    catalog's append to the same client's append through its own SQL catalog."""
    lines = [
        "## 1-row append: pyiceberg through the catalog against castable's own",
        "",
        "| store | writer | median | min-max | of which the catalog | S3 requests (median run) | vs castable "
        "| vs pyiceberg's SQL catalog |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    ratios, clients, own_part, peers = {}, {}, {}, {}
    for where, result in results.items():
        times, requests = result["times"], result["requests"]
        reference, peer = statistics.median(times[OWN]), statistics.median(times[PEER])
        for name, runs in times.items():
            m = statistics.median(runs)
            handling = fmt(statistics.median(result["handling"])) if name == VIA else "-"
            shaped = fmt_requests(requests[name][median_index(runs)]) if where != "local" else "-"
            if name == VIA and where != "local":
                shaped += f" (the catalog's: {fmt_requests(result['catalog_s3'][median_index(runs)])})"
            lines.append(
                f"| {where} | {name} | {fmt(m)} | {fmt(min(runs))}-{fmt(max(runs))} | {handling} | {shaped} | "
                f"{m / reference:.2f}x | {m / peer:.2f}x |"
            )
        ratios[where] = statistics.median(times[VIA]) / reference
        peers[where] = statistics.median(times[VIA]) / peer
        client = statistics.median(t - h for t, h in zip(times[VIA], result["handling"], strict=True))
        clients[where], own_part[where] = client / reference, client
    lines += [
        "",
        "vs castable: the median over castable's default append (lower is better). Of which the catalog: the "
        "median time the catalog took to answer pyiceberg's commit request, one POST each time; the rest is "
        "pyiceberg's own (its Parquet file, manifest and manifest list, the request, and the metadata it "
        "parses from the answer): "
        + "; ".join(f"{where} {fmt(own_part[where])} ({clients[where]:.2f}x castable's append)" for where in results)
        + ". S3 requests: the client's and the catalog's together, and the catalog's alone (counted outside "
        "its time). vs pyiceberg's SQL catalog: over the same client's append to an Iceberg table of its own "
        "SqlCatalog (SQLite on the local disk, which no network separates from the client; the table's files on "
        "the same store): the same commit without castable.",
        "",
    ]
    return lines, ratios, clients, peers


def spark_merges(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """catalog_spark.py in the Spark 3.5 venv, with a catalog served here over a local warehouse;
    its results, and for each merge through the catalog the requests the catalog handled."""
    warehouse, hadoop = work / "warehouse", work / "hadoop"
    warehouse.mkdir()
    hadoop.mkdir()
    with served(str(warehouse), None) as (catalog, uri):
        command = [args.spark, "-m", "bench.iceberg.catalog_spark", "--jars", str(args.jars), "--uri", uri]
        command += ["--warehouse", str(warehouse), "--hadoop", str(hadoop), "--work", str(work / "spark")]
        command += ["--rows", str(args.rows), "--merge-rows", str(args.merge_rows)]
        command += ["--repeats", str(args.merge_repeats), "--partitions", str(args.partitions)]
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        tail: list[str] = []

        def relay() -> None:  # catalog_spark.py's progress, without Spark's own chatter
            assert process.stderr is not None
            for line in process.stderr:
                tail[:] = [*tail[-80:], line]
                for progress in PROGRESS.finditer(line):
                    print(f"  spark {progress.group()}", file=sys.stderr, flush=True)

        relaying = threading.Thread(target=relay, daemon=True)
        relaying.start()
        out, _ = process.communicate()
        relaying.join()
        if process.returncode:
            raise RuntimeError(f"catalog_spark.py exited with {process.returncode}:\n{''.join(tail)}")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        result["catalog"] = [[h for h in catalog.requests if lo <= h.started <= hi] for lo, hi in result["windows"]]
    return result


def merge_table(result: dict[str, Any], args: argparse.Namespace) -> list[str]:
    times, nbytes = result["times"], result["bytes"]
    reference, hadoop = statistics.median(times[CASTABLE_MERGE]), statistics.median(times[HADOOP_MERGE])
    lines = [
        f"## Spark MERGE INTO, merge-on-read: {args.merge_rows:,} rows (half matched) into {args.rows:,}",
        "",
        "| writer | table | median | min-max | vs castable.spark.merge | vs Hadoop catalog | bytes written | "
        "data | deletes | metadata | files |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, runs in times.items():
        m = statistics.median(runs)
        added = nbytes[name][median_index(runs)]
        total = added["data"] + added["deletes"] + added["metadata"]
        lines.append(
            f"| {name} | {result['layout'][name]} | {m:.2f} s | {min(runs):.2f}-{max(runs):.2f} s | "
            f"{m / reference:.2f}x | {m / hadoop:.2f}x | {fmt_bytes(total)} | {fmt_bytes(added['data'])} | "
            f"{fmt_bytes(added['deletes'])} | {fmt_bytes(added['metadata'])} | {added['files']} |"
        )
    handled = result["catalog"]
    per_merge = [sum(h.seconds for h in requests) for requests in handled]
    kinds: dict[str, int] = {}
    for h in handled[median_index(per_merge)]:
        route = "/".join(h.path.split("/")[-2:]) if h.method == "GET" else h.path.rsplit("/", 1)[-1]
        kinds[f"{h.method} {route} {h.status}"] = kinds.get(f"{h.method} {route} {h.status}", 0) + 1
    statuses = sorted({h.status for requests in handled for h in requests})
    lines += [
        "",
        "Ratios: the median time over castable.spark.merge's and over the Hadoop catalog's (lower is better). "
        "Bytes written: the files the merge added under the table's folder (those of the median run): data "
        "files, deletes (Iceberg position delete files, castable tombstones, and the position delete files "
        "the catalog publishes for Iceberg readers of castable's tombstones) and the rest (manifests, "
        "segments, Iceberg metadata, Hadoop's .crc checksums).",
        "",
        f"The catalog's part of the merge through it: {statistics.median(per_merge):.2f} s (median) handling "
        f"{statistics.median(len(r) for r in handled):.0f} requests ("
        + ", ".join(f"{n} x {k}" for k, n in sorted(kinds.items()))
        + f"); statuses over all merges: {', '.join(map(str, statuses))}.",
        "",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20, help="rounds of 1-row appends")
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the table merged into")
    parser.add_argument("--merge-rows", type=int, default=100_000, help="rows of the merge's source")
    parser.add_argument("--merge-repeats", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=4, help="input files and shuffle partitions")
    parser.add_argument("--latency", type=float, default=0.025)
    parser.add_argument("--bandwidth", type=float, default=90e6)
    parser.add_argument("--spark", default=str(ROOT / ".venv-spark35" / "bin" / "python"))
    parser.add_argument("--jars", type=Path, default=ROOT / ".tools" / "iceberg")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quick", action="store_true", help="3 rounds; a merge of 2,000 into 200,000 once")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.rows, args.merge_rows, args.merge_repeats = 3, 200_000, 2_000, 1
    commits: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="castable-bench-catalog-") as tmp:
        work = Path(tmp)
        (work / "local").mkdir()
        commits["local"] = commit_latency("local", str(work / "local"), None, None, args.repeats, work)
        with shaped_s3(latency=args.latency, bandwidth=args.bandwidth) as s3:
            boto3.client("s3", endpoint_url=s3.direct, region_name="us-east-1").create_bucket(Bucket=BUCKET)
            options = {"endpoint_url": s3.endpoint, "region": "us-east-1"}
            commits["shaped S3"] = commit_latency("shaped S3", f"s3://{BUCKET}/wh", options, s3, args.repeats, work)
        log(f"Spark: a merge of {args.merge_rows:,} rows into {args.rows:,}")
        merges = spark_merges(args, work)
    lines = report_header(
        "commits through the Iceberg REST catalog",
        f"pyiceberg {pyiceberg.__version__}; PySpark {merges['spark']} with Apache Iceberg {merges['iceberg']}'s "
        f"Spark runtime, local[2]. Appends: medians of {args.repeats} rounds; shaped S3 is moto behind "
        f"bench/common/shaped_s3.py's proxy, {args.latency * 1000:g} ms before each response, "
        f"{args.bandwidth / 1e6:g} MB/s per connection. Merges: medians of {args.merge_repeats} after a warm-up "
        "round, min-max beside.",
    )
    table, ratios, clients, peers = commit_table(commits)
    lines += table
    lines += merge_table(merges, args)
    lines += ["## Targets", ""]
    for where, ratio in ratios.items():
        verdict = "met" if ratio <= TARGET else "missed"
        lines.append(
            f"- {where}: a 1-row append through the catalog within {TARGET}x castable's own append: "
            f"**{verdict}** ({ratio:.2f}x; pyiceberg's own part alone {clients[where]:.2f}x). Against the same "
            f"client's append through its own SQL catalog: {peers[where]:.2f}x."
        )
    publish("catalog", lines, args.out)


if __name__ == "__main__":
    main()
