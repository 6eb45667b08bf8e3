"""castable against Delta Lake, Iceberg and plain pyarrow Parquet, side by side in one run, with plots.

Sections (``--sections``, all by default):

- deletes: for each table size, append of the whole synthetic event table; delete of 1,000
  scattered keys and of one contiguous key range (wall time, bytes written, data files
  rewritten); a full scan to Arrow and a projected, filtered scan after the deletes.
- writes: for each table size, an upsert of 10,000 rows (half new keys, half existing ones) and
  a replace-where of a contiguous 1% of the rows (an event_time range), on one table per system.
- compaction: castable's full scan after 100 upserts of 10,000 rows, before and after compact().
- commits: commit latency of a 10-row append after 10, 100 and 1,000 earlier commits.
- s3: castable's S3 requests per operation on a moto server over HTTP, and its full and filtered
  scans there side by side with pyarrow's S3 filesystem reading the same files.

Every system writes with the same codec, file size and row-group size.

Usage: cd bench && ../.venv/bin/python compare.py [--sizes 1000000 10000000] [--repeats 5]
       [--commits 10 100 1000] [--upserts 100] [--compaction-sizes ROWS ...]
       [--sections deletes writes compaction commits s3] [--quick] [--out DIR]
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
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
from benchlib import RESULTS, SCHEMA, event_batches, fmt_s, machine_line, moto_server, publish, timed
from deltalake import DeltaTable, WriterProperties, write_deltalake
from deltalake import __version__ as deltalake_version
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import And, BooleanExpression, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

import castable
from castable.properties import COMPRESSION, DEFAULTS, ROW_GROUP_SIZE, TARGET_FILE_SIZE

matplotlib.use("Agg")
import matplotlib.pyplot as plt

APPEND = "append whole table"
SCATTERED = "delete 1,000 scattered keys"
RANGE = "delete 1 key range"
FULL = "full scan"
FILTERED = "filtered scan"
S3_FULL = "full scan, moto S3"
S3_FILTERED = "filtered scan, moto S3"
UPSERT = "upsert 10,000 rows"
REPLACE = "replace-where 1% (event_time range)"
UPSERTED_SCAN = "full scan after upserts"
UPSERTS = "upserts before compaction, each"
COMPACT = "compact after upserts"
COMMIT = "commit 10-row append"
NEW_ROWS = "pyarrow, the new rows alone as one Parquet file"
SECTIONS = ("deletes", "writes", "compaction", "commits", "s3")
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


def generate(rows: int) -> pa.Table:
    """The synthetic event table of ``rows`` rows, in memory."""
    return pa.Table.from_batches(list(event_batches(rows)), schema=SCHEMA)


def time_axis() -> tuple[int, int]:
    """The generator's event_time of id 0 and its step per id, in microseconds: it increases with id."""
    first, second = next(event_batches(2)).column("event_time").cast(pa.int64()).to_pylist()
    return first, second - first


def event_rows(ids: np.ndarray, seed: int) -> pa.Table:
    """Rows with these ids and the generator's event_time for them, with new payloads and categories."""
    origin, step = time_axis()
    rows = pa.Table.from_batches(list(event_batches(len(ids), seed=seed)), schema=SCHEMA)
    rows = rows.set_column(0, SCHEMA.field("id"), pa.array(ids, pa.int64()))
    return rows.set_column(
        1, SCHEMA.field("event_time"), pa.array(origin + ids * step, SCHEMA.field("event_time").type)
    )


def upsert_count(rows: int) -> int:
    """Rows per upsert: 10,000, or a tenth of a tiny (smoke-test) table."""
    return min(10_000, max(2, rows // 10))


def upsert_rows(rows: int, count: int) -> Iterator[pa.Table]:
    """``count`` upserts in turn (fixed seed, the same for every system): each half new keys past the
    current maximum, half existing keys scattered over the table, all with new payloads."""
    rng = np.random.default_rng(11)
    half = upsert_count(rows) // 2
    for r in range(count):
        old = np.sort(rng.choice(rows, half, replace=False))
        new = np.arange(rows + r * half, rows + (r + 1) * half)
        yield event_rows(np.concatenate([old, new]), seed=100 + r)


@dataclass(frozen=True)
class ReplaceCase:
    """One replace-where, the same for every system: the rows whose event_time lies in
    ``start..end`` (end excluded) replaced by ``rows``, every one of which lies in it too."""

    start: datetime
    end: datetime
    rows: pa.Table

    def sql(self) -> str:
        return f"event_time >= '{self.start.isoformat()}' AND event_time < '{self.end.isoformat()}'"

    def expression(self) -> pc.Expression:
        kind = SCHEMA.field("event_time").type
        return (pc.field("event_time") >= pa.scalar(self.start, kind)) & (
            pc.field("event_time") < pa.scalar(self.end, kind)
        )

    def iceberg(self) -> BooleanExpression:
        return And(
            GreaterThanOrEqual("event_time", self.start.isoformat()), LessThan("event_time", self.end.isoformat())
        )


def replace_cases(rows: int, repeats: int) -> list[ReplaceCase]:
    """Per repeat, another contiguous 1% of the ids (their event_time range, since event_time grows with
    id), replaced by as many new rows with the same ids and times and new payloads."""
    origin, step = time_axis()
    n = max(1, rows // 100)
    out = []
    for r in range(repeats):
        lo = (rows // 10) * (1 + r % 8) + (r // 8) * n
        start, end = (
            datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=origin + i * step) for i in (lo, lo + n)
        )
        out.append(ReplaceCase(start, end, event_rows(np.arange(lo, lo + n), seed=200 + r)))
    return out


def write_parquet(path: Path, data: pa.Table, layout: Layout) -> None:
    """``data`` as one plain Parquet file with the layout's codec and row-group size."""
    pq.write_table(data, path, compression=layout.codec, row_group_size=layout.row_group_rows)


# ------------------------------------------------------------------------------------ measuring


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file under ``root``: compared before and after an operation."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            st = os.stat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_size, st.st_mtime_ns)
    return out


def written_since(before: dict[str, tuple[int, int]], root: Path) -> int:
    """Bytes of files new or changed since ``before``."""
    after = tree_state(root)
    return sum(st[0] for p, st in after.items() if before.get(p) != st)


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
    def upserter(self, root: Path, rows: pa.Table) -> Callable[[], object]:
        """Open the table at ``root``; return the upsert of ``rows`` by id (replace or insert)."""

    @abstractmethod
    def replacer(self, root: Path, case: ReplaceCase) -> Callable[[], object]:
        """Open the table at ``root``; return the replace-where of ``case``."""

    @abstractmethod
    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        """The readers of the table at ``root``, already opened; filtered scans read ``lo..hi``."""

    @abstractmethod
    def live_files(self, root: Path) -> set[str]:
        """The data files of the current version of the table at ``root``."""

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

    def upserter(self, root: Path, rows: pa.Table) -> Callable[[], object]:
        table = castable.open_table(str(root))
        return lambda: table.upsert(rows)

    def replacer(self, root: Path, case: ReplaceCase) -> Callable[[], object]:
        table = castable.open_table(str(root))
        predicate = case.sql()
        return lambda: table.overwrite(case.rows, where=predicate)

    def compactor(self, root: Path) -> Callable[[], object]:
        """Open the table at ``root``; return its compaction with the default options."""
        return castable.open_table(str(root)).compact

    def live_files(self, root: Path) -> set[str]:
        return {f.path for f in castable.open_table(str(root)).manifest.data_files}

    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        table = castable.open_table(str(root))
        paths = [str(root / f.path) for f in table.manifest.data_files]
        return [
            *castable_readers(table, lo, hi),
            pyarrow_reader("pyarrow, castable's files (deletes not applied)", FLOOR, paths, lo, hi),
        ]


def castable_readers(table: castable.Table, lo: int, hi: int) -> list[Reader]:
    """castable's scans on one handle, and the same with every cache cleared first (a cold start:
    footers, tombstones and resolved key deletes fetched and worked out again)."""

    def full() -> pa.Table:
        return table.scan().to_arrow()

    def filtered() -> pa.Table:
        return table.scan(["id", "category"], f"id BETWEEN {lo} AND {hi}").to_arrow()

    def cold(scan: Callable[[], pa.Table]) -> Callable[[], pa.Table]:
        def run() -> pa.Table:
            castable.clear_caches()
            return scan()

        return run

    return [
        Reader("castable", "castable", SUBJECT, full, filtered),
        Reader("castable, caches cleared before each scan", "castable", REFERENCE, cold(full), cold(filtered)),
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

    def upserter(self, root: Path, rows: pa.Table) -> Callable[[], object]:
        table, props = DeltaTable(str(root)), self._properties()
        return lambda: (
            table.merge(
                source=rows, predicate="t.id = s.id", source_alias="s", target_alias="t", writer_properties=props
            )
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    def replacer(self, root: Path, case: ReplaceCase) -> Callable[[], object]:
        table, props = DeltaTable(str(root)), self._properties()
        predicate = case.sql()
        return lambda: write_deltalake(
            table,
            case.rows,
            mode="overwrite",
            predicate=predicate,
            writer_properties=props,
            target_file_size=self.layout.file_bytes,
        )

    def live_files(self, root: Path) -> set[str]:
        return set(DeltaTable(str(root)).file_uris())

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

    def upserter(self, root: Path, rows: pa.Table) -> Callable[[], object]:
        table = self.catalog.load_table(self._ident(root))
        return lambda: table.upsert(rows, join_cols=["id"])

    def replacer(self, root: Path, case: ReplaceCase) -> Callable[[], object]:
        table = self.catalog.load_table(self._ident(root))
        expression = case.iceberg()
        return lambda: table.overwrite(case.rows, overwrite_filter=expression)

    def live_files(self, root: Path) -> set[str]:
        return {task.file.file_path for task in self.catalog.load_table(self._ident(root)).scan().plan_files()}

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

    def appender(self, root: Path, data: pa.Table) -> Callable[[], object]:
        root.mkdir(parents=True)
        return lambda: write_parquet(root / "part-0.parquet", data, self.layout)

    def small_appender(self, root: Path, small: pa.Table) -> Callable[[], object]:
        root.mkdir(parents=True)
        counter = iter(range(sys.maxsize))
        return lambda: write_parquet(root / f"part-{next(counter)}.parquet", small, self.layout)

    def _rewriter(self, root: Path, doomed: pc.Expression, added: pa.Table | None = None) -> Callable[[], object]:
        """Copy-on-write without a table format: read the one file, drop the ``doomed`` rows, add
        ``added`` and write it again."""

        def rewrite() -> None:
            (old,) = root.glob("*.parquet")
            kept = pq.read_table(old).filter(~doomed)
            if added is not None:
                kept = pa.concat_tables([kept, added.cast(kept.schema)])
            write_parquet(root / f"part-{int(old.stem.split('-')[1]) + 1}.parquet", kept, self.layout)
            old.unlink()

        return rewrite

    def deleter(self, root: Path, case: DeleteCase) -> Callable[[], object]:
        return self._rewriter(root, case.expression())

    def upserter(self, root: Path, rows: pa.Table) -> Callable[[], object]:
        return self._rewriter(root, pc.field("id").isin(rows.column("id")), rows)

    def replacer(self, root: Path, case: ReplaceCase) -> Callable[[], object]:
        return self._rewriter(root, case.expression(), case.rows)

    def live_files(self, root: Path) -> set[str]:
        return {p.name for p in root.glob("*.parquet")}

    def readers(self, root: Path, lo: int, hi: int) -> list[Reader]:
        paths = [str(p) for p in root.glob("*.parquet")]
        return [
            pyarrow_reader("pyarrow, plain copy of the live rows", REFERENCE, paths, lo, hi),
            *duckdb_readers("duckdb, plain copy", "pyarrow", REFERENCE, paths, lo, hi),
        ]


def pyarrow_reader(name: str, role: str, paths: list[str], lo: int, hi: int, filesystem: Any = None) -> Reader:
    """pyarrow's dataset over a fixed file list (on ``filesystem``, local by default)."""
    key_range = (pc.field("id") >= lo) & (pc.field("id") <= hi)

    def dataset() -> ds.Dataset:
        return ds.dataset(paths, format="parquet", filesystem=filesystem)

    return Reader(
        name,
        "pyarrow",
        role,
        lambda: dataset().to_table(),
        lambda: dataset().to_table(columns=["id", "category"], filter=key_range),
    )


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


def measure_write(
    system: System, root: Path, op: str, rows: int, operation: Callable[[], object], results: Results
) -> float:
    """Time one write to the table at ``root`` (its handle already opened) after os.sync(); keep the
    bytes it wrote and how many of the table's data files it removed (rewrote or dropped)."""
    before, live = tree_state(root), system.live_files(root)
    os.sync()
    seconds, _ = timed(operation)
    res = results.get(op, rows, system.name, system.name, system.role)
    res.times.append(seconds)
    res.written.append(written_since(before, root))
    res.rewritten.append(len(live - system.live_files(root)))
    return seconds


def run_size(systems: list[System], rows: int, repeats: int, results: Results, sections: list[str]) -> None:
    """The sections run for each table size, on one copy of the table held in memory."""
    log(f"{rows:,} rows: generating")
    data = generate(rows)
    if "deletes" in sections:
        run_deletes(systems, data, repeats, results)
    if "writes" in sections:
        run_writes(systems, data, repeats, results)


def run_deletes(systems: list[System], data: pa.Table, repeats: int, results: Results) -> None:
    """Appends, deletes on fresh tables (every delete runs on a table appended just before), then scans."""
    rows = data.num_rows
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
                res.written.append(written_since({}, root))
                took[op] = measure_write(system, root, op, rows, system.deleter(root, case), results)
                if op == SCATTERED and r == repeats - 1:
                    kept[system.name] = root
                else:
                    system.drop(root)
            done = ", ".join(f"{op} {fmt_s(s)}" for op, s in took.items())
            log(f"{rows:,} rows, repeat {r + 1}/{repeats}, {system.name}: {done}")
    for system in systems:
        system.deleter(kept[system.name], cases[0][1])()
    run_scans(systems, kept, rows, repeats, results)
    for system in systems:
        system.drop(kept[system.name])


def run_writes(systems: list[System], data: pa.Table, repeats: int, results: Results) -> None:
    """Upserts and replace-wheres on one table per system, appended untimed first; each repeat upserts
    other keys and replaces another 1% slice, systems taking turns, then the live rows must agree.
    Also times writing each upsert's rows alone as one Parquet file: the least an upsert can write."""
    rows = data.num_rows
    roots = {s.name: s.work / f"w{rows}" for s in systems}
    for system in systems:
        system.appender(roots[system.name], data)()
    alone = systems[0].work.parent / "new-rows.parquet"
    for r, (new_rows, case) in enumerate(zip(upsert_rows(rows, repeats), replace_cases(rows, repeats), strict=True)):
        for system in systems:
            root = roots[system.name]
            up = measure_write(system, root, UPSERT, rows, system.upserter(root, new_rows), results)
            rep = measure_write(system, root, REPLACE, rows, system.replacer(root, case), results)
            log(f"{rows:,} rows, repeat {r + 1}/{repeats}, {system.name}: {UPSERT} {fmt_s(up)}, {REPLACE} {fmt_s(rep)}")
        res = results.get(UPSERT, rows, NEW_ROWS, "pyarrow", REFERENCE)
        os.sync()
        res.times.append(timed(partial(write_parquet, alone, new_rows, systems[0].layout))[0])
        res.written.append(alone.stat().st_size)
        alone.unlink()
    live = {s.name: s.readers(roots[s.name], 0, 0)[0].full().num_rows for s in systems}
    expected = rows + repeats * (upsert_count(rows) // 2)
    if set(live.values()) != {expected}:
        raise AssertionError(f"live rows after the writes: {live}, expected {expected:,} each")
    for system in systems:
        system.drop(roots[system.name])


def run_compaction(system: Castable, rows: int, upserts: int, repeats: int, results: Results) -> None:
    """castable's full scan after ``upserts`` upserts against the same table after compact(): a
    handle opened before the compaction keeps reading the uncompacted version, so the scans of the
    two versions take turns (their row counts checked equal)."""
    root = system.work / "upserted"
    log(f"compaction: {rows:,} rows, then {upserts} upserts")
    system.appender(root, generate(rows))()
    for new_rows in upsert_rows(rows, upserts):
        measure_write(system, root, UPSERTS, rows, system.upserter(root, new_rows), results)
    times = results.get(UPSERTS, rows, system.name, system.name, system.role).times
    spread = f"first {fmt_s(times[0])}, median {fmt_s(statistics.median(times))}, last {fmt_s(times[-1])}"
    log(f"compaction: {upserts} upserts, {spread}")
    lo, hi = scan_range(rows)
    before = system.readers(root, lo, hi)
    subject, floor = before[0], before[-1]  # castable's own scan and the floor (the cold-cache reader aside)
    seconds = measure_write(system, root, COMPACT, rows, system.compactor(root), results)
    log(f"compaction: compact() in {fmt_s(seconds)}")
    compacted = system.readers(root, lo, hi)[0]
    readers = [
        replace(subject, name=f"castable, after {upserts} upserts"),
        replace(compacted, name=f"castable, after {upserts} upserts and compact()", role=REFERENCE),
        floor,
    ]
    take_turns(UPSERTED_SCAN, rows, readers, repeats, results)
    system.drop(root)


def run_scans(systems: list[System], roots: dict[str, Path], rows: int, repeats: int, results: Results) -> None:
    """The full and the filtered scan of every reader of every system's table."""
    lo, hi = scan_range(rows)
    readers = [reader for s in systems for reader in s.readers(roots[s.name], lo, hi)]
    for op in (FULL, FILTERED):
        take_turns(op, rows, readers, repeats, results)


def take_turns(op: str, rows: int, readers: list[Reader], repeats: int, results: Results) -> None:
    """Every reader's scan once to warm up and check row counts (all but the floor's must agree), then
    ``repeats`` rounds, readers interleaved. ``op`` is the filtered scan or a full one."""

    def scan(reader: Reader) -> Callable[[], pa.Table]:
        return reader.filtered if op in (FILTERED, S3_FILTERED) else reader.full

    counts = {}
    for reader in readers:
        res = results.get(op, rows, reader.name, reader.family, reader.role)
        res.rows_out = counts[reader.name] = scan(reader)().num_rows
    live = {counts[r.name] for r in readers if r.role != FLOOR}
    if len(live) != 1:
        raise AssertionError(f"{op}: readers disagree on the live rows: {counts}")
    for i in range(repeats):
        for reader in readers:
            results.get(op, rows, reader.name, reader.family, reader.role).times.append(timed(scan(reader))[0])
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


def run_s3(rows: int, repeats: int, results: Results) -> list[tuple[str, float, dict[str, int]]]:
    """castable on a moto S3 server over HTTP: wall time, requests and bytes of each operation;
    then its scans and pyarrow's S3 filesystem reading the same files, taking turns."""
    import boto3
    from pyarrow import fs

    server, endpoint = moto_server()
    try:
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
        options = {"endpoint_url": endpoint, "region": "us-east-1"}
        table = castable.create_table("s3://bench/events", SCHEMA, primary_key="id", storage_options=options)
        data = generate(rows)
        small = pa.Table.from_batches(list(event_batches(SMALL_ROWS, seed=1)), schema=SCHEMA)
        scattered, key_range = delete_cases(rows, 1)[0]
        new_rows, case = next(upsert_rows(rows, 1)), replace_cases(rows, 1)[0]
        lo, hi = scan_range(rows)
        out = []
        for name, op in [
            (f"append {rows:,} rows", lambda: table.append(data)),
            (SCATTERED, lambda: table.delete(scattered.sql())),
            (f"{RANGE} ({key_range.hi - key_range.lo + 1:,} keys)", lambda: table.delete(key_range.sql())),
            (FULL, lambda: table.scan().to_arrow()),
            (f"{FULL} again (footers and deletes cached)", lambda: table.scan().to_arrow()),
            (
                f"{FILTERED} (2 columns, 1% key range)",
                lambda: table.scan(["id", "category"], f"id BETWEEN {lo} AND {hi}").to_arrow(),
            ),
            (f"small append ({SMALL_ROWS} rows)", lambda: table.append(small)),
            (f"{UPSERT.split()[0]} {new_rows.num_rows:,} rows", lambda: table.upsert(new_rows)),
            (REPLACE, lambda: table.overwrite(case.rows, where=case.sql())),
            ("open latest version", lambda: castable.open_table("s3://bench/events", storage_options=options)),
        ]:
            table.store.stats.reset()
            seconds, opened = timed(op)
            store = opened.store if isinstance(opened, castable.Table) else table.store
            out.append((name, seconds, store.stats.snapshot()))
            log(f"S3: {name} in {fmt_s(seconds)}")
        s3 = fs.S3FileSystem(
            access_key=os.environ["AWS_ACCESS_KEY_ID"],
            secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
            endpoint_override=endpoint,
            region="us-east-1",
        )
        paths = [f"bench/events/{f.path}" for f in table.manifest.data_files]
        readers = [
            *castable_readers(table, lo, hi),
            pyarrow_reader("pyarrow S3FileSystem, castable's files (deletes not applied)", FLOOR, paths, lo, hi, s3),
        ]
        for op in (S3_FULL, S3_FILTERED):
            take_turns(op, rows, readers, repeats, results)
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
    ops = [
        *(APPEND, SCATTERED, RANGE, FULL, FILTERED, S3_FULL, S3_FILTERED),
        *(UPSERT, REPLACE, UPSERTS, COMPACT, UPSERTED_SCAN, COMMIT),
    ]
    systems = list(dict.fromkeys(r.system for r in results.items.values()))
    for r in sorted(
        results.items.values(), key=lambda r: (ops.index(r.op), r.scale, r.role != SUBJECT, systems.index(r.system))
    ):
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

    def note(self, what: str, measured: float | None, detail: str) -> None:
        """A figure shown next to a target without one of its own (another scale, say)."""
        if measured is not None:
            self.lines.append(f"- no target: {what}: {measured:,.2f}; {detail}")


def speedup(results: Results, op: str, scale: int, system: str, other: str) -> float | None:
    """``other``'s median time over ``system``'s, or None when either was not measured."""
    a, b = results.find(op, scale, system), results.find(op, scale, other)
    return None if a is None or b is None else b.median / a.median


def verdicts(results: Results, sizes: list[int], commits: list[int], upserts: int) -> list[str]:
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
    write_verdicts(v, results, sizes)
    for op in (S3_FULL, S3_FILTERED):
        for r in (r for r in results.items.values() if r.op == op and r.role == SUBJECT):
            floor = results.floor(op, r.scale)
            if floor is not None and r.times and floor.times:
                v.note(
                    f"{op} at {r.scale:,} rows vs pyarrow's S3 read of the same files",
                    floor.median / r.median,
                    f"{fmt_s(r.median)} vs {fmt_s(floor.median)} (requests and bytes per scan: the S3 table)",
                )
    for scale in sorted({r.scale for r in results.items.values() if r.op == UPSERTED_SCAN}):
        before, after = results.fastest(UPSERTED_SCAN, scale, SUBJECT), results.fastest(UPSERTED_SCAN, scale, REFERENCE)
        v.check(
            f"full scan of {scale:,} rows after {upserts} upserts vs after compact() (speed ratio, at least 0.8x)",
            None if before is None or after is None else after.median / before.median,
            0.8,
            "" if before is None or after is None else f"{fmt_s(before.median)} vs {fmt_s(after.median)} compacted",
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


def write_verdicts(v: Verdicts, results: Results, sizes: list[int]) -> None:
    """Upsert and replace-where: speed against the peers at the largest size (the others shown as
    notes), and castable's upsert bytes against those of its new rows alone as one Parquet file."""
    large = max(sizes)
    for op, need, targeted in ((UPSERT, 50.0, ("deltalake", "pyiceberg")), (REPLACE, 10.0, ("deltalake",))):
        for rows in sizes:
            ours = results.find(op, rows, "castable")
            for peer in ("deltalake", "pyiceberg"):
                theirs = results.find(op, rows, peer)
                if ours is None or theirs is None:
                    continue
                what = f"{op} at {rows:,} rows vs {peer} (times faster)"
                detail = f"{fmt_s(ours.median)} vs {fmt_s(theirs.median)}"
                if rows == large and peer in targeted:
                    v.check(what, theirs.median / ours.median, need, detail)
                else:
                    v.note(what, theirs.median / ours.median, detail)
    for rows in sizes:
        ours, alone = results.find(UPSERT, rows, "castable"), results.find(UPSERT, rows, NEW_ROWS)
        if ours and alone:
            a, b = statistics.median(ours.written), statistics.median(alone.written)
            v.check(
                f"{UPSERT} at {rows:,} rows: bytes written over the new rows alone as one Parquet file (at most 2x)",
                a / b,
                2.0,
                f"{fmt_bytes(a)} vs {fmt_bytes(b)}",
                at_most=True,
            )


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
        dotted = any(word in name for word in ("native", "plain", "alone", "compact()"))
        hatch = "//" if "duckdb" in name else (".." if dotted else None)
        ax.bar(xs, ys, width, yerr=[lows, highs], label=name, color=colour, hatch=hatch, edgecolor="white", capsize=2)
    ax.set_xticks(range(len(scales)), [f"{s:,} rows" for s in scales])
    ax.set_title(op)
    ax.grid(axis="y", alpha=0.3)


def plots(results: Results, sizes: list[int], commits: list[int], out: Path) -> list[Path]:
    """The PNGs of the sections that ran: delete and write times (log scale), scan and append
    throughput, commit latency against history."""
    ran = {r.op for r in results.items.values() if r.times}
    paths = []
    if APPEND in ran:
        paths += delete_plots(results, sizes, out)
    if ran & {UPSERT, REPLACE, UPSERTED_SCAN}:
        paths.append(write_plot(results, sizes, out))
    if COMMIT in ran:
        paths.append(commit_plot(results, commits, out))
    return paths


def delete_plots(results: Results, sizes: list[int], out: Path) -> list[Path]:
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
    return paths


def write_plot(results: Results, sizes: list[int], out: Path) -> Path:
    """Upsert and replace-where times by size (log scale), and scan throughput after upserts."""
    fig, axes = plt.subplots(1, 3, figsize=(19, 6), width_ratios=[2, 2, 1.3])
    for ax, op in zip(axes[:2], (UPSERT, REPLACE), strict=True):
        bar_panel(ax, results, op, sizes, lambda r, t: t)
        ax.set_yscale("log")
        ax.set_ylabel("seconds (log scale), median with min-max")
        ax.legend(fontsize=7, loc="upper left")
    scales = sorted({r.scale for r in results.items.values() if r.op == UPSERTED_SCAN})
    bar_panel(axes[2], results, UPSERTED_SCAN, scales, lambda r, t: (r.rows_out or 0) / t / 1e6)
    axes[2].set_ylabel("million rows returned per second")
    axes[2].legend(fontsize=7, loc="lower center", framealpha=0.9)
    fig.suptitle(
        "Upsert and replace-where: wall time (lower is better); full scan after upserts, before and after "
        "compact(): throughput (higher is better)"
    )
    return save(fig, out / "compare_writes.png")


def commit_plot(results: Results, commits: list[int], out: Path) -> Path:
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
    return save(fig, out / "compare_commit.png")


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
    parser.add_argument("--upserts", type=int, default=100, help="upserts before the compaction section's scans")
    parser.add_argument(
        "--compaction-sizes", type=int, nargs="+", help="rows of the compaction section (default: --sizes)"
    )
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="what to run")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run: 4,000 rows, commits 2 3, 1 repeat")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where compare.md and the PNGs go")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.commits, args.repeats, args.upserts = [4000], [2, 3], 1, 3
    compaction_sizes = args.compaction_sizes or args.sizes
    s3_rows = min(min(args.sizes), 1_000_000)
    warnings.filterwarnings("ignore", module="pyiceberg")
    args.out.mkdir(parents=True, exist_ok=True)

    sample = pa.Table.from_batches(list(event_batches(min(args.sizes))), schema=SCHEMA)
    layout = Layout(
        codec=DEFAULTS[COMPRESSION],
        file_bytes=int(DEFAULTS[TARGET_FILE_SIZE]),
        row_group_rows=int(int(DEFAULTS[ROW_GROUP_SIZE]) // (sample.nbytes / sample.num_rows)),
    )
    results = Results()
    s3: list[tuple[str, float, dict[str, int]]] = []
    work = Path(tempfile.mkdtemp(prefix="castable-compare-"))
    try:
        subject = Castable(work / "castable", layout)
        systems: list[System] = [
            subject,
            Delta(work / "deltalake", layout),
            Iceberg(work / "pyiceberg", layout),
            PlainParquet(work / "pyarrow", layout),
        ]
        if {"deletes", "writes"} & set(args.sections):
            for rows in args.sizes:
                run_size(systems, rows, args.repeats, results, args.sections)
        if "compaction" in args.sections:
            for rows in compaction_sizes:
                run_compaction(subject, rows, args.upserts, args.repeats, results)
        if "commits" in args.sections:
            run_commits(systems, args.commits, args.repeats, results)
        if "s3" in args.sections:
            s3 = run_s3(s3_rows, args.repeats, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - STARTED
    pngs = plots(results, args.sizes, args.commits, args.out)
    verdict_lines = verdicts(results, args.sizes, args.commits, args.upserts)
    command = " ".join(["python", "compare.py", *sys.argv[1:]])
    s3_lines = [
        f"## castable on S3 (moto server over HTTP, {s3_rows:,} rows)",
        "",
        "One run each, in this order on one table; bytes up and down count request bodies, Parquet reads included.",
        "",
        *s3_table(s3),
        "",
    ]
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
        *(s3_lines if s3 else []),
        "## Method",
        "",
        "- Table: the synthetic event table of benchlib.py (id int64 sorted unique, event_time growing with id "
        "by 1 ms per row, ~100 random payload bytes, 8 categories; seed 42), generated once per size and held in "
        "memory, so appends time only the write. Tables are created empty before the timed append.",
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
        "data files of the version before the operation that are no longer in the version after it (rewritten "
        "copy-on-write, or dropped); castable's tombstones remove none, and the files holding new rows are not "
        "counted.",
        "- The pyarrow floor: appends write one Parquet file with the same codec and row-group size; deletes, "
        "upserts and replace-wheres read that file, drop the replaced rows, add the new ones and write it again "
        "(copy-on-write without a table format); commits write a new "
        f"{SMALL_ROWS}-row file each. For scans the floor is pyarrow reading castable's own data files, which "
        "ignores castable's deletes; the plain copy (the floor's own file after its deletes) and DuckDB over it "
        "are shown as references.",
        "- Scans read the table left by the last scattered-key repeat after one more key-range delete. Each reader "
        "runs once to warm up (and row counts are checked equal), then the readers take turns for each repeat. "
        "DuckDB reads delta's current files with read_parquet (copy-on-write deletes leave no deletion vectors; "
        "the delta extension cannot be installed offline).",
        "- *castable, caches cleared before each scan*: `castable.clear_caches()` before each scan, so footers, "
        "tombstones and the positions of key deletes are fetched and worked out again, as in a new process "
        "(the table handle and its manifest are kept). The plain *castable* row keeps them, as a long-lived "
        "process or a warm Lambda does.",
        f"- Scans on S3: after the operations of the S3 table below (so the {s3_rows:,}-row table has its deletes, "
        "an upsert and a replace-where), castable's scans and pyarrow's dataset over `pyarrow.fs.S3FileSystem` "
        "reading the same data files (deletes not applied) take turns against the same moto server, warm-up "
        "first, as above. The S3 table gives castable's requests and bytes of a first (cold) and a second scan.",
        f"- Upserts and replace-wheres: one table per system and size, appended untimed; then {args.repeats} "
        "repeats, systems taking turns, each an upsert followed by a replace-where on the same table, so repeat "
        "n writes to a table that has had n - 1 of each (the same for every system). Each upsert has "
        f"{upsert_count(max(args.sizes)):,} rows: half new ids past the current maximum, half existing ids "
        "drawn at random over the table (fixed seed, other ones each repeat, the same for every system), all "
        "with new payloads and categories. castable: `table.upsert(rows)` (primary key id); deltalake: "
        '`merge(predicate="t.id = s.id").when_matched_update_all().when_not_matched_insert_all()` with the '
        'same writer properties as its deletes; pyiceberg: `upsert(rows, join_cols=["id"])`. *pyarrow, the new '
        "rows alone as one Parquet file* is pq.write_table of the upsert's rows with the same codec: the least "
        "an upsert can write. After the repeats every system's live row count is checked.",
        "- Replace-where: each repeat replaces another contiguous 1% of the rows (from 10%, 20%, ... of the "
        "id range), chosen by an event_time range (event_time grows with id), e.g. "
        f"`{replace_cases(max(args.sizes), 1)[0].sql()}` at {max(args.sizes):,} rows, by as many new rows with "
        "the same ids and times and new payloads (so each new row matches the predicate). castable: "
        '`table.overwrite(rows, where=sql)`; deltalake: `write_deltalake(mode="overwrite", predicate=sql)` '
        "with the same text; pyiceberg: `overwrite(rows, overwrite_filter=...)` with the same range as an "
        "expression. All repeats of every system are run.",
        f"- Compaction: castable only, at {', '.join(f'{n:,}' for n in compaction_sizes)} rows: a fresh table, "
        f"then {args.upserts} upserts like those above, one after the other (each timed: *{UPSERTS}*, the "
        "median and min-max of all of them), then compact() with the default options (timed once: "
        f"*{COMPACT}*). The full scan of the version before the compaction (a handle opened before it keeps "
        "reading it) and of the compacted one then take turns, with the floor (pyarrow over the uncompacted "
        "version's data files, deletes not applied); row counts are checked equal. deltalake's scan after as "
        "many merges is not shown: its merges already rewrite every file they touch (see the upsert rows), and "
        "100 of them at 10,000,000 rows would take longer than the rest of the run.",
        f"- Commit latency: each system appends {SMALL_ROWS}-row batches to a fresh table; at each checkpoint "
        f"the next {args.repeats} appends are timed, systems taking turns. deltalake and pyiceberg keep their "
        "table handle, like castable.",
        "",
        "## Run",
        "",
        f"Finished {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Sections: {', '.join(args.sections)}. "
        f"{machine_line(versions())}",
        "",
        f"Plots: {', '.join(p.name for p in pngs)}.",
    ]
    print("\n".join(verdict_lines), file=sys.stderr)
    publish("compare", lines, args.out)


if __name__ == "__main__":
    main()
