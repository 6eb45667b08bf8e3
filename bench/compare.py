"""castable against Delta Lake, Iceberg and plain pyarrow Parquet, side by side in one run, with plots.

For each table size: append of the whole synthetic event table; delete of 1,000 scattered keys
and of one contiguous key range (wall time, bytes written, data files rewritten); a full scan to
Arrow and a projected, filtered scan after the deletes. Then commit latency of a 10-row append
after 10, 100 and 1,000 earlier commits, and castable's S3 requests per operation on a moto
server over HTTP. Every system writes with the same codec, file size and row-group size.

Usage: cd bench && ../.venv/bin/python compare.py [--sizes 1000000 10000000] [--repeats 5]
       [--commits 10 100 1000] [--quick] [--out DIR]
Writes DIR/compare.md and DIR/compare_*.png (DIR defaults to bench/results/).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import matplotlib
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pyiceberg
from bench_core import RESULTS, SCHEMA, event_batches, fmt_s, machine_line, moto_server, publish, timed
from deltalake import DeltaTable, WriterProperties, write_deltalake
from deltalake import __version__ as deltalake_version
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import And, BooleanExpression, GreaterThanOrEqual, In, LessThanOrEqual

import castable
from castable.properties import COMPRESSION, DEFAULTS, ROW_GROUP_SIZE, TARGET_FILE_SIZE

matplotlib.use("Agg")
import matplotlib.pyplot as plt

APPEND = "append whole table"
SCATTERED = "delete 1,000 scattered keys"
RANGE = "delete 1 key range"
FULL = "full scan"
FILTERED = "filtered scan"
COMMIT = "commit 10-row append"
SUBJECT, PEER, FLOOR, REFERENCE = "subject", "peer", "floor", "reference"
SMALL_ROWS = 10
COLORS = {"castable": "#1b9e77", "deltalake": "#d95f02", "pyiceberg": "#7570b3", "pyarrow": "#666666"}
STARTED = time.perf_counter()


def log(message: str) -> None:
    """Progress on stderr, with the elapsed time, so a long run shows where it is."""
    print(f"[{time.perf_counter() - STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ inputs


@dataclass(frozen=True)
class Layout:
    """The physical layout every system is asked for, so that only the table formats differ."""

    codec: str
    file_bytes: int
    row_group_rows: int


@dataclass(frozen=True)
class DeleteCase:
    """One delete, the same for every system: a set of scattered keys or an inclusive key range."""

    keys: tuple[int, ...] = ()
    lo: int = 0
    hi: int = -1

    def sql(self) -> str:
        if self.keys:
            return f"id IN ({', '.join(map(str, self.keys))})"
        return f"id BETWEEN {self.lo} AND {self.hi}"

    def expression(self) -> pc.Expression:
        if self.keys:
            return pc.field("id").isin(list(self.keys))
        return (pc.field("id") >= self.lo) & (pc.field("id") <= self.hi)

    def iceberg(self) -> BooleanExpression:
        if self.keys:
            return In("id", set(self.keys))
        return And(GreaterThanOrEqual("id", self.lo), LessThanOrEqual("id", self.hi))


def delete_cases(rows: int, repeats: int) -> list[tuple[DeleteCase, DeleteCase]]:
    """Per repeat, a scattered and a key-range delete (fixed seed); ranges stay clear of the scan range."""
    rng = np.random.default_rng(7)
    count = key_count(rows)
    out = []
    for r in range(repeats):
        keys = tuple(sorted(rng.choice(rows, count, replace=False).tolist()))
        lo = (rows // 8) * (1 + r % 3) + r * count
        out.append((DeleteCase(keys=keys), DeleteCase(lo=lo, hi=lo + count - 1)))
    return out


def key_count(rows: int) -> int:
    """Keys per delete: 1,000, or a tenth of a tiny (smoke-test) table."""
    return min(1000, max(1, rows // 10))


def scan_range(rows: int) -> tuple[int, int]:
    """The filtered scan's 1% key range, in the upper half of the table."""
    lo = rows * 3 // 4
    return lo, lo + max(1, rows // 100) - 1


# ------------------------------------------------------------------------------------ measuring


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file under ``root``: compared before and after an operation."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            st = os.stat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_size, st.st_mtime_ns)
    return out


def written_since(before: dict[str, tuple[int, int]], root: Path) -> tuple[int, int]:
    """Bytes of files new or changed since ``before``, and how many new Parquet data files there are."""
    after = tree_state(root)
    changed = [p for p, st in after.items() if before.get(p) != st]
    data_files = [
        p
        for p in changed
        if p.endswith(".parquet") and p not in before and "_delta_log" not in p and "/metadata/" not in p
    ]
    return sum(after[p][0] for p in changed), len(data_files)


@dataclass
class Result:
    """The samples of one operation at one scale for one system (or reader)."""

    op: str
    scale: int
    system: str
    family: str
    role: str
    times: list[float] = field(default_factory=list)
    written: list[int] = field(default_factory=list)
    rewritten: list[int] = field(default_factory=list)
    rows_out: int | None = None
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times)


class Results:
    """All results of a run, keyed by (operation, scale, system), in the order they were first seen."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, int, str], Result] = {}

    def get(self, op: str, scale: int, system: str, family: str, role: str) -> Result:
        key = (op, scale, system)
        if key not in self.items:
            self.items[key] = Result(op, scale, system, family, role)
        return self.items[key]

    def find(self, op: str, scale: int, system: str) -> Result | None:
        r = self.items.get((op, scale, system))
        return r if r is not None and r.times else None

    def group(self, op: str, scale: int) -> list[Result]:
        return [r for r in self.items.values() if r.op == op and r.scale == scale and r.times]

    def floor(self, op: str, scale: int) -> Result | None:
        return next((r for r in self.group(op, scale) if r.role == FLOOR), None)

    def best_peer(self, r: Result) -> Result | None:
        """The fastest system or reader of another family than ``r`` (the floor and references excluded)."""
        rivals = [x for x in self.group(r.op, r.scale) if x.role in (SUBJECT, PEER) and x.family != r.family]
        return min(rivals, key=lambda x: x.median, default=None)

    def fastest(self, op: str, scale: int, role: str) -> Result | None:
        return min((r for r in self.group(op, scale) if r.role == role), key=lambda x: x.median, default=None)


# ------------------------------------------------------------------------------------ systems


@dataclass(frozen=True)
class Reader:
    """One way of reading a table after the deletes: a full scan and a filtered, projected scan."""

    name: str
    family: str
    role: str
    full: Callable[[], pa.Table]
    filtered: Callable[[], pa.Table]


class System(ABC):
    """A table format under test: each step prepares untimed and returns the timed operation."""

    name: str
    role: str

    def __init__(self, work: Path, layout: Layout) -> None:
        self.work = work
        self.layout = layout

    @abstractmethod
    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        """Create an empty table at ``root``; return the append of ``data`` to it."""

    @abstractmethod
    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        """Open the table at ``root``; return the delete of ``case``."""

    @abstractmethod
    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        """The readers of the table at ``root``, already opened; filtered scans read ``lo..hi``."""

    def small_appender(self, root: Path, small: pa.Table) -> Callable[[], object]:
        """Create an empty table at ``root``; return one small-append commit, called many times."""
        return self.appender(root, small)

    def drop(self, root: Path) -> None:
        shutil.rmtree(root, ignore_errors=True)


class Castable(System):
    name, role = "castable", SUBJECT

    def _create(self, root: Path) -> castable.Table:
        props = {COMPRESSION: self.layout.codec, TARGET_FILE_SIZE: self.layout.file_bytes}
        return castable.create_table(str(root), SCHEMA, primary_key="id", properties=props)

    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        table = self._create(root)
        return lambda: table.append(data)

    def small_appender(self, root: Path, small: pa.Table) -> Callable[[], object]:
        table = self._create(root)
        return lambda: table.append(small)

    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        table = castable.open_table(str(root))
        predicate = case.sql()
        return lambda: table.delete(predicate)

    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        table = castable.open_table(str(root))
        paths = [str(root / f.path) for f in table.manifest.data_files]
        key_range = (pc.field("id") >= lo) & (pc.field("id") <= hi)
        return [
            Reader(
                "castable",
                "castable",
                SUBJECT,
                lambda: table.scan().to_arrow(),
                lambda: table.scan(["id", "category"], f"id BETWEEN {lo} AND {hi}").to_arrow(),
            ),
            Reader(
                "pyarrow, castable's files (deletes not applied)",
                "pyarrow",
                FLOOR,
                lambda: ds.dataset(paths, format="parquet").to_table(),
                lambda: ds.dataset(paths, format="parquet").to_table(columns=["id", "category"], filter=key_range),
            ),
        ]


class Delta(System):
    name, role = "deltalake", PEER

    def _properties(self) -> WriterProperties:
        return WriterProperties(compression=self.layout.codec.upper(), max_row_group_size=self.layout.row_group_rows)

    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        config: dict[str, str | None] = {"delta.targetFileSize": str(self.layout.file_bytes)}
        table = DeltaTable.create(str(root), SCHEMA, configuration=config)
        props = self._properties()
        return lambda: write_deltalake(
            table, data, mode="append", writer_properties=props, target_file_size=self.layout.file_bytes
        )

    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        table = DeltaTable(str(root))
        predicate, props = case.sql(), self._properties()
        return lambda: table.delete(predicate, writer_properties=props)

    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        table = DeltaTable(str(root))
        files = table.file_uris()
        key_range = (pc.field("id") >= lo) & (pc.field("id") <= hi)
        return [
            Reader(
                "deltalake (pyarrow dataset)",
                "deltalake",
                PEER,
                lambda: table.to_pyarrow_table(),
                lambda: table.to_pyarrow_table(columns=["id", "category"], filters=key_range),
            ),
            Reader(
                "deltalake (native DataFusion scan)",
                "deltalake",
                PEER,
                lambda: pa.table(table.scan()),
                lambda: pa.table(table.scan(["id", "category"], f"id >= {lo} AND id <= {hi}")),
            ),
            *duckdb_readers("duckdb, delta's current files", "deltalake", PEER, files, lo, hi),
        ]


class Iceberg(System):
    name, role = "pyiceberg", PEER

    def __init__(self, work: Path, layout: Layout) -> None:
        super().__init__(work, layout)
        work.mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog("bench", uri=f"sqlite:///{work}/catalog.db", warehouse=work.as_uri())
        self.catalog.create_namespace("bench")

    @staticmethod
    def _ident(root: Path) -> str:
        return f"bench.{root.name}"

    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        props = {
            "write.parquet.compression-codec": self.layout.codec,
            "write.target-file-size-bytes": str(self.layout.file_bytes),
            "write.parquet.row-group-limit": str(self.layout.row_group_rows),
        }
        table = self.catalog.create_table(self._ident(root), SCHEMA, location=root.as_uri(), properties=props)
        return lambda: table.append(data)

    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        table = self.catalog.load_table(self._ident(root))
        expression = case.iceberg()
        return lambda: table.delete(delete_filter=expression)

    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        table = self.catalog.load_table(self._ident(root))
        key_range = And(GreaterThanOrEqual("id", lo), LessThanOrEqual("id", hi))
        return [
            Reader(
                "pyiceberg",
                "pyiceberg",
                PEER,
                lambda: table.scan().to_arrow(),
                lambda: table.scan(row_filter=key_range, selected_fields=("id", "category")).to_arrow(),
            )
        ]

    def drop(self, root: Path) -> None:
        self.catalog.drop_table(self._ident(root))
        super().drop(root)


class PlainParquet(System):
    """The floor: one Parquet file written, rewritten and read by pyarrow, with no table format."""

    name, role = "pyarrow", FLOOR

    def _write(self, path: Path, data: pa.Table) -> None:
        pq.write_table(data, path, compression=self.layout.codec, row_group_size=self.layout.row_group_rows)

    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        root.mkdir(parents=True)
        return lambda: self._write(root / "part-0.parquet", data)

    def small_appender(self, root: Path, small: pa.Table) -> Callable[[], object]:
        root.mkdir(parents=True)
        counter = iter(range(sys.maxsize))
        return lambda: self._write(root / f"part-{next(counter)}.parquet", small)

    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        def rewrite() -> None:
            (old,) = root.glob("*.parquet")
            kept = pq.read_table(old).filter(~case.expression())
            self._write(root / f"part-{int(old.stem.split('-')[1]) + 1}.parquet", kept)
            old.unlink()

        return rewrite

    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        paths = [str(p) for p in root.glob("*.parquet")]
        key_range = (pc.field("id") >= lo) & (pc.field("id") <= hi)
        return [
            Reader(
                "pyarrow, plain copy of the live rows",
                "pyarrow",
                REFERENCE,
                lambda: ds.dataset(paths, format="parquet").to_table(),
                lambda: ds.dataset(paths, format="parquet").to_table(columns=["id", "category"], filter=key_range),
            ),
            *duckdb_readers("duckdb, plain copy", "pyarrow", REFERENCE, paths, lo, hi),
        ]


def duckdb_readers(name: str, family: str, role: str, files: list[str], lo: int, hi: int) -> list[Reader]:
    """DuckDB's read_parquet over a fixed file list (its delta extension cannot be installed offline)."""
    con = duckdb.connect()
    params = {"files": [f.removeprefix("file://") for f in files]}
    full = "SELECT * FROM read_parquet($files)"
    filtered = f"SELECT id, category FROM read_parquet($files) WHERE id BETWEEN {lo} AND {hi}"
    return [
        Reader(
            name,
            family,
            role,
            lambda: con.sql(full, params=params).to_arrow_table(),
            lambda: con.sql(filtered, params=params).to_arrow_table(),
        )
    ]


# ------------------------------------------------------------------------------------ runs


def run_size(systems: list[System], rows: int, repeats: int, results: Results) -> None:
    """Appends, deletes on fresh tables (every delete runs on a table appended just before), then scans."""
    log(f"{rows:,} rows: generating")
    data = pa.Table.from_batches(list(event_batches(rows)), schema=SCHEMA)
    cases = delete_cases(rows, repeats)
    kept: dict[str, Path] = {}
    for r, (scattered, key_range) in enumerate(cases):
        for system in systems:
            took: dict[str, float] = {}
            for op, case in ((SCATTERED, scattered), (RANGE, key_range)):
                root = system.work / f"t{rows}_r{r}_{'s' if op == SCATTERED else 'k'}"
                append = system.appender(root, data)
                os.sync()
                seconds, _ = timed(append)
                took[f"append for {op}"] = seconds
                res = results.get(APPEND, rows, system.name, system.name, system.role)
                res.times.append(seconds)
                res.written.append(written_since({}, root)[0])
                delete = system.deleter(root, case)
                before = tree_state(root)
                os.sync()
                seconds, _ = timed(delete)
                written, rewritten = written_since(before, root)
                res = results.get(op, rows, system.name, system.name, system.role)
                res.times.append(seconds)
                res.written.append(written)
                res.rewritten.append(rewritten)
                took[op] = seconds
                if op == SCATTERED and r == repeats - 1:
                    kept[system.name] = root
                else:
                    system.drop(root)
            done = ", ".join(f"{op} {fmt_s(s)}" for op, s in took.items())
            log(f"{rows:,} rows, repeat {r + 1}/{repeats}, {system.name}: {done}")
    del data
    for system in systems:
        system.deleter(kept[system.name], cases[0][1])()
    run_scans(systems, kept, rows, repeats, results)
    for system in systems:
        system.drop(kept[system.name])


def run_scans(systems: list[System], roots: dict[str, Path], rows: int, repeats: int, results: Results) -> None:
    """Every reader once to warm up and check row counts, then ``repeats`` rounds, readers interleaved."""
    lo, hi = scan_range(rows)
    readers = [reader for s in systems for reader in s.readers(roots[s.name], lo, hi)]
    for op in (FULL, FILTERED):
        counts = {}
        for reader in readers:
            fn = reader.full if op == FULL else reader.filtered
            res = results.get(op, rows, reader.name, reader.family, reader.role)
            res.rows_out = counts[reader.name] = fn().num_rows
        live = {counts[r.name] for r in readers if r.role != FLOOR}
        if len(live) != 1:
            raise AssertionError(f"{op}: readers disagree on the live rows: {counts}")
        for i in range(repeats):
            for reader in readers:
                fn = reader.full if op == FULL else reader.filtered
                results.get(op, rows, reader.name, reader.family, reader.role).times.append(timed(fn)[0])
            log(f"{rows:,} rows, {op}, round {i + 1}/{repeats}")


def run_commits(systems: list[System], commits: list[int], repeats: int, results: Results) -> None:
    """Small appends on fresh tables; at each checkpoint the next ``repeats`` appends are timed, interleaved."""
    small = pa.Table.from_batches(list(event_batches(SMALL_ROWS, seed=1)), schema=SCHEMA)
    appenders = {s.name: s.small_appender(s.work / "commits", small) for s in systems}
    done = 0
    for target in sorted(commits):
        for system in systems:
            t0 = time.perf_counter()
            for _ in range(target - done):
                appenders[system.name]()
            log(f"commits: {system.name} advanced to {target:,} in {time.perf_counter() - t0:.1f} s")
        for _ in range(repeats):
            for system in systems:
                res = results.get(COMMIT, target, system.name, system.name, system.role)
                os.sync()
                res.times.append(timed(appenders[system.name])[0])
        done = target + repeats
    for system in systems:
        system.drop(system.work / "commits")


def run_s3(rows: int) -> list[tuple[str, float, dict[str, int]]]:
    """castable on a moto S3 server over HTTP: wall time, requests and bytes of each operation."""
    import boto3

    server, endpoint = moto_server()
    try:
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
        options = {"endpoint_url": endpoint, "region": "us-east-1"}
        table = castable.create_table("s3://bench/events", SCHEMA, primary_key="id", storage_options=options)
        data = pa.Table.from_batches(list(event_batches(rows)), schema=SCHEMA)
        small = pa.Table.from_batches(list(event_batches(SMALL_ROWS, seed=1)), schema=SCHEMA)
        scattered, key_range = delete_cases(rows, 1)[0]
        lo, hi = scan_range(rows)
        out = []
        for name, op in [
            (f"append {rows:,} rows", lambda: table.append(data)),
            (SCATTERED, lambda: table.delete(scattered.sql())),
            (f"{RANGE} ({key_range.hi - key_range.lo + 1:,} keys)", lambda: table.delete(key_range.sql())),
            (FULL, lambda: table.scan().to_arrow()),
            (
                f"{FILTERED} (2 columns, 1% key range)",
                lambda: table.scan(["id", "category"], f"id BETWEEN {lo} AND {hi}").to_arrow(),
            ),
            (f"small append ({SMALL_ROWS} rows)", lambda: table.append(small)),
            ("open latest version", lambda: castable.open_table("s3://bench/events", storage_options=options)),
        ]:
            table.store.stats.reset()
            seconds, opened = timed(op)
            store = opened.store if isinstance(opened, castable.Table) else table.store
            out.append((name, seconds, store.stats.snapshot()))
            log(f"S3: {name} in {fmt_s(seconds)}")
        return out
    finally:
        server.close()  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------------ report


def ratio(this: Result, other: Result | None) -> str:
    """How many times faster ``this`` is than ``other`` (other's median time over this one's)."""
    return "" if other is None else f"{other.median / this.median:.2f}x"


def scale_label(op: str, scale: int) -> str:
    return f"after {scale:,} commits" if op == COMMIT else f"{scale:,} rows"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def headline(results: Results) -> list[str]:
    lines = [
        "| operation | scale | system | median | min-max | vs pyarrow floor | vs best peer | bytes written "
        "| data files rewritten |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ops = [APPEND, SCATTERED, RANGE, FULL, FILTERED, COMMIT]
    systems = list(dict.fromkeys(r.system for r in results.items.values()))
    for r in sorted(results.items.values(), key=lambda r: (ops.index(r.op), r.scale, systems.index(r.system))):
        if not r.times:
            continue
        written = fmt_bytes(statistics.median(r.written)) if r.written else ""
        rewritten = f"{statistics.median(r.rewritten):.0f}" if r.rewritten else ""
        name = f"**{r.system}**" if r.role == SUBJECT else r.system
        lines.append(
            f"| {r.op} | {scale_label(r.op, r.scale)} | {name} | {fmt_s(r.median)} "
            f"| {fmt_s(min(r.times))}-{fmt_s(max(r.times))} | {ratio(r, results.floor(r.op, r.scale))} "
            f"| {ratio(r, results.best_peer(r))} | {written} | {rewritten} |"
        )
    return lines


class Verdicts:
    """One line per target: met or missed, with the measured figures and the shortfall."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def check(self, target: str, measured: float | None, need: float, detail: str, at_most: bool = False) -> None:
        if measured is None:
            self.lines.append(f"- **not measured**: {target} ({detail})")
            return
        met = measured <= need if at_most else measured >= need
        if met:
            verdict = "**met**"
        else:
            short = measured / need if at_most else need / measured
            verdict = f"**missed** by {short:.2f}x"
        sign = "<=" if at_most else ">="
        self.lines.append(f"- {verdict}: {target}: {measured:,.2f} (target {sign} {need:,.2f}); {detail}")


def speedup(results: Results, op: str, scale: int, system: str, other: str) -> float | None:
    """``other``'s median time over ``system``'s, or None when either was not measured."""
    a, b = results.find(op, scale, system), results.find(op, scale, other)
    return None if a is None or b is None else b.median / a.median


def verdicts(results: Results, sizes: list[int], commits: list[int]) -> list[str]:
    v = Verdicts()
    small, large = min(sizes), max(sizes)
    c_small, c_large = results.find(RANGE, small, "castable"), results.find(RANGE, large, "castable")
    if c_small and c_large and small != large:
        growth = c_large.median / c_small.median
        v.check(
            f"key-range delete flat from {small:,} to {large:,} rows (growth, at most 1.5x)",
            growth,
            1.5,
            f"{fmt_s(c_small.median)} -> {fmt_s(c_large.median)}",
            at_most=True,
        )
    for peer, need in (("deltalake", 100.0), ("pyiceberg", 100.0)):
        s = speedup(results, RANGE, large, "castable", peer)
        v.check(f"key-range delete at {large:,} rows vs {peer} (times faster)", s, need, "median over median")
    for peer, need in (("deltalake", 20.0), ("pyiceberg", 10.0)):
        s = speedup(results, SCATTERED, large, "castable", peer)
        v.check(f"1,000 scattered-key delete at {large:,} rows vs {peer} (times faster)", s, need, "median over median")
    ours = results.find(SCATTERED, large, "castable")
    for peer in ("deltalake", "pyiceberg"):
        theirs = results.find(SCATTERED, large, peer)
        if ours and theirs:
            fewer = statistics.median(theirs.written) / max(1, statistics.median(ours.written))
            detail = f"{fmt_bytes(statistics.median(ours.written))} vs {fmt_bytes(statistics.median(theirs.written))}"
            v.check(f"scattered delete at {large:,} rows: times fewer bytes written than {peer}", fewer, 10_000, detail)
    for op in (FULL, FILTERED, APPEND):
        for rows in sizes:
            ours = results.find(op, rows, "castable")
            floor = results.floor(op, rows)
            if ours is None or floor is None:
                continue
            extra = ""
            plain = results.find(op, rows, "pyarrow, plain copy of the live rows")
            if plain:
                extra = f"; vs pyarrow on a plain copy of the live rows {plain.median / ours.median:.2f}x"
            v.check(
                f"{op} at {rows:,} rows vs pyarrow floor ({floor.system})",
                floor.median / ours.median,
                0.9,
                f"{fmt_s(ours.median)} vs {fmt_s(floor.median)}{extra}",
            )
            if op != APPEND:
                best = results.best_peer(ours)
                if best:
                    v.check(
                        f"{op} at {rows:,} rows vs fastest peer reader ({best.system})",
                        best.median / ours.median,
                        1.0,
                        f"{fmt_s(ours.median)} vs {fmt_s(best.median)}",
                    )
    first, last = results.find(COMMIT, min(commits), "castable"), results.find(COMMIT, max(commits), "castable")
    if first and last:
        v.check(
            f"commit latency after {max(commits):,} commits over that after {min(commits):,} (at most 2x)",
            last.median / first.median,
            2.0,
            f"{fmt_s(first.median)} -> {fmt_s(last.median)}",
            at_most=True,
        )
        delta = results.find(COMMIT, max(commits), "deltalake")
        if delta:
            v.check(
                f"commit latency after {max(commits):,} commits vs deltalake (times faster)",
                delta.median / last.median,
                1.0,
                f"{fmt_s(last.median)} vs {fmt_s(delta.median)}",
            )
    return v.lines


def s3_table(rows: list[tuple[str, float, dict[str, int]]]) -> list[str]:
    lines = [
        "| operation | wall time | PUT | GET | HEAD | LIST | other requests | bytes up | bytes down |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, seconds, s in rows:
        counts = {k: v for k, v in s.items() if not k.startswith("bytes")}
        other = sum(v for k, v in counts.items() if k not in ("PUT", "GET", "HEAD", "LIST"))
        lines.append(
            f"| {name} | {fmt_s(seconds)} | {counts.get('PUT', 0)} | {counts.get('GET', 0)} | {counts.get('HEAD', 0)} "
            f"| {counts.get('LIST', 0)} | {other} | {fmt_bytes(s['bytes_out'])} | {fmt_bytes(s['bytes_in'])} |"
        )
    return lines


# ------------------------------------------------------------------------------------ plots


def color_of(r: Result) -> str:
    return COLORS.get(r.family, "#999999")


def bar_panel(ax: Any, results: Results, op: str, scales: list[int], value: Callable[[Result, float], float]) -> None:
    """Grouped bars, one group per scale, one bar per system; whiskers span the min-max of the samples."""
    names = list(dict.fromkeys(r.system for s in scales for r in results.group(op, s)))
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        xs, ys, lows, highs, colour = [], [], [], [], "#999999"
        for j, scale in enumerate(scales):
            r = results.find(op, scale, name)
            if r is None:
                continue
            y = value(r, r.median)
            a, b = value(r, min(r.times)), value(r, max(r.times))
            xs.append(j + (i - (len(names) - 1) / 2) * width)
            ys.append(y)
            lows.append(y - min(a, b))
            highs.append(max(a, b) - y)
            colour = color_of(r)
        hatch = "//" if "duckdb" in name else (".." if "native" in name or "plain" in name else None)
        ax.bar(xs, ys, width, yerr=[lows, highs], label=name, color=colour, hatch=hatch, edgecolor="white", capsize=2)
    ax.set_xticks(range(len(scales)), [f"{s:,} rows" for s in scales])
    ax.set_title(op)
    ax.grid(axis="y", alpha=0.3)


def plots(results: Results, sizes: list[int], commits: list[int], out: Path) -> list[Path]:
    """The PNGs: delete times (log scale), scan and append throughput, commit latency against history."""
    paths = []

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, op in zip(axes, (SCATTERED, RANGE), strict=True):
        bar_panel(ax, results, op, sizes, lambda r, t: t)
        ax.set_yscale("log")
        ax.set_ylabel("seconds (log scale), median with min-max")
    axes[0].legend(fontsize=8)
    fig.suptitle("Delete on a fresh table: wall time (lower is better)")
    paths.append(save(fig, out / "compare_delete.png"))

    fig, axes = plt.subplots(1, 2, figsize=(15, 6))
    for ax, op in zip(axes, (FULL, FILTERED), strict=True):
        bar_panel(ax, results, op, sizes, lambda r, t: (r.rows_out or 0) / t / 1e6)
        ax.set_ylabel("million rows returned per second")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("Scans after the deletes: throughput (higher is better); hatched = other engines on the same files")
    paths.append(save(fig, out / "compare_scan.png"))

    fig, ax = plt.subplots(figsize=(8, 5))
    bar_panel(ax, results, APPEND, sizes, lambda r, t: r.scale / t / 1e6)
    ax.set_ylabel("million rows appended per second")
    ax.legend(fontsize=8)
    fig.suptitle("Append of the whole table, same codec and layout for all (higher is better)")
    paths.append(save(fig, out / "compare_append.png"))

    fig, ax = plt.subplots(figsize=(8, 5))
    for name in ("castable", "deltalake", "pyiceberg", "pyarrow"):
        rs = [r for c in sorted(commits) if (r := results.find(COMMIT, c, name))]
        if not rs:
            continue
        ys = [r.median * 1000 for r in rs]
        err = [
            [y - min(r.times) * 1000 for y, r in zip(ys, rs, strict=True)],
            [max(r.times) * 1000 - y for y, r in zip(ys, rs, strict=True)],
        ]
        ax.errorbar([r.scale for r in rs], ys, yerr=err, marker="o", capsize=3, label=name, color=COLORS[name])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("earlier commits")
    ax.set_ylabel(f"ms per {SMALL_ROWS}-row append commit (log), median with min-max")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.suptitle("Commit latency against table history (lower is better)")
    paths.append(save(fig, out / "compare_commit.png"))
    return paths


def save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------ main


def versions() -> str:
    return (
        f"deltalake {deltalake_version}, pyiceberg {pyiceberg.__version__}, duckdb {duckdb.__version__}, "
        f"matplotlib {matplotlib.__version__}, numpy {np.__version__}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--commits", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run: 4,000 rows, commits 2 3, 1 repeat")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where compare.md and the PNGs go")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.commits, args.repeats = [4000], [2, 3], 1
    warnings.filterwarnings("ignore", module="pyiceberg")
    args.out.mkdir(parents=True, exist_ok=True)

    sample = pa.Table.from_batches(list(event_batches(min(args.sizes))), schema=SCHEMA)
    layout = Layout(
        codec=DEFAULTS[COMPRESSION],
        file_bytes=int(DEFAULTS[TARGET_FILE_SIZE]),
        row_group_rows=int(int(DEFAULTS[ROW_GROUP_SIZE]) // (sample.nbytes / sample.num_rows)),
    )
    results = Results()
    work = Path(tempfile.mkdtemp(prefix="castable-compare-"))
    try:
        systems: list[System] = [
            Castable(work / "castable", layout),
            Delta(work / "deltalake", layout),
            Iceberg(work / "pyiceberg", layout),
            PlainParquet(work / "pyarrow", layout),
        ]
        for rows in args.sizes:
            run_size(systems, rows, args.repeats, results)
        run_commits(systems, args.commits, args.repeats, results)
        s3 = run_s3(min(min(args.sizes), 1_000_000))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - STARTED
    pngs = plots(results, args.sizes, args.commits, args.out)
    verdict_lines = verdicts(results, args.sizes, args.commits)
    command = " ".join(["python", "compare.py", *sys.argv[1:]])
    lines = [
        "# castable vs Delta Lake vs Iceberg vs plain Parquet",
        "",
        f"Medians of {args.repeats} runs (min-max shown), measured side by side in one run of `{command}` "
        f"({elapsed / 60:.1f} min). Ratios are speed ratios: the other system's median time over this row's, "
        "so above 1x means this row is faster. *vs pyarrow floor* compares with the pyarrow row of the same "
        "operation; *vs best peer* with the fastest system or reader of another family (castable, deltalake "
        "and its readers, pyiceberg), the floor and reference readers excluded.",
        "",
        f"Every system writes {layout.codec} Parquet, files of at most {fmt_bytes(layout.file_bytes)} and row "
        f"groups of {layout.row_group_rows:,} rows (castable's defaults: its row groups are cut at "
        f"{fmt_bytes(int(DEFAULTS[ROW_GROUP_SIZE]))} of Arrow data).",
        "",
        "## Headline",
        "",
        *headline(results),
        "",
        "## Targets",
        "",
        *verdict_lines,
        "",
        f"## castable on S3 (moto server over HTTP, {min(min(args.sizes), 1_000_000):,} rows)",
        "",
        "One run each, in this order on one table; bytes up and down count request bodies, Parquet reads included.",
        "",
        *s3_table(s3),
        "",
        "## Method",
        "",
        "- Table: the synthetic event table of bench_core.py (id int64 sorted unique, event_time, ~100 random "
        "payload bytes, 8 categories; seed 42), generated once per size and held in memory, so appends time "
        "only the write. Tables are created empty before the timed append.",
        "- Deletes: every delete runs on a fresh table appended just before it (rebuilt, not copied: pyiceberg's "
        "metadata holds absolute paths), so each repeat is also one more append sample (hence twice as many "
        "append samples as repeats). Scattered keys differ per repeat (fixed seed) and are the same for every "
        f"system; each key range is {key_count(min(args.sizes)):,} contiguous keys. Handles are opened before "
        "the timer starts.",
        "- Every timed write starts after os.sync(), so no system pays for another's dirty pages. castable "
        "fsyncs each object it writes and pyiceberg's SQLite catalog syncs its commits; deltalake and plain "
        "pyarrow leave writeback to the page cache (seen with strace).",
        "- Bytes written: the sizes of files new or changed under the table's directory, walked before and after "
        "(the same for all systems; pyiceberg's SQLite catalog is outside and not counted). Data files rewritten: "
        "new Parquet data files (castable writes a tombstone file instead).",
        "- The pyarrow floor: appends write one Parquet file with the same codec and row-group size; deletes read "
        "that file, filter and write it again (copy-on-write without a table format); commits write a new "
        f"{SMALL_ROWS}-row file each. For scans the floor is pyarrow reading castable's own data files, which "
        "ignores castable's deletes; the plain copy (the floor's own file after its deletes) and DuckDB over it "
        "are shown as references.",
        "- Scans read the table left by the last scattered-key repeat after one more key-range delete. Each reader "
        "runs once to warm up (and row counts are checked equal), then the readers take turns for each repeat. "
        "DuckDB reads delta's current files with read_parquet (copy-on-write deletes leave no deletion vectors; "
        "the delta extension cannot be installed offline).",
        f"- Commit latency: each system appends {SMALL_ROWS}-row batches to a fresh table; at each checkpoint "
        f"the next {args.repeats} appends are timed, systems taking turns. deltalake and pyiceberg keep their "
        "table handle, like castable.",
        "",
        "## Run",
        "",
        f"Finished {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. {machine_line(versions())}",
        "",
        f"Plots: {', '.join(p.name for p in pngs)}.",
    ]
    print("\n".join(verdict_lines), file=sys.stderr)
    publish("compare", lines, args.out)


if __name__ == "__main__":
    main()
