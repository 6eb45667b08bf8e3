"""Spark's own Parquet reader over one version's live files: ``read_table`` (Spark 3.5 and 4.x).

The driver prunes the version's files by the manifest's statistics (or, from
``SLICE_FILES`` files, only cuts the manifest's segments into slices) and hands them to Spark
tasks, which read the footers and tombstones: each task returns how its files' columns map
onto the version's schema (section 4.1 of docs/format.md) and, for each file with deletes, the
positions they remove as a roaring bitmap (key deletes matched against the file's keys there).
The driver reads no footer and no row. A version's inline entries (a few MiB at most, no
files Spark could read) go to a task of their own, which reads their live rows. Files that
map alike are read together by ``spark.read.parquet``, vectorised, and their columns renamed,
widened or filled with
defaults; the files with deletes are read apart, with one filter that looks each row's
``_metadata.row_index`` up in a bitmap literal of all their deleted positions (a word per 64
rows), or, beyond ``MAX_FILTER_WORDS`` words or ``MAX_FILTER_FILES`` files, with an anti-join
on (file, row) against positions expanded by Spark tasks. So EMR 7 (Spark 3.5) reads castable
tables with Spark's own reader, through EMRFS on ``s3://``.
"""

from __future__ import annotations

import json
import pickle
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap

import castable
from castable.errors import InvalidInputError
from castable.format.evolution import default_of
from castable.format.manifest import DataFile
from castable.read.predicate import Match, Predicate
from castable.read.scan import Scan
from castable.read.snapshot import SegmentSlice, Snapshot
from castable.read.where import parse_predicate
from castable.spark.files import TableLocation, spark_schema, sql_name
from castable.store.cache import LruCache

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.readwriter import DataFrameReader
    from pyspark.sql.types import DataType

FILES_PER_TASK = 64
"""Files whose footers (and deletes) one planning task reads."""
SLICE_FILES = 100_000
"""From this many files, planning tasks read the manifest's segments themselves (format version
2): the driver then holds no entry of the version, only the paths Spark reads."""
MAX_FILTER_WORDS = 1 << 20
"""Deleted positions travel in the plan as a bitmap literal of up to this many 64-bit words
(64M rows of files with deletes, 8 MiB); beyond, they are anti-joined."""
MAX_FILTER_FILES = 4_096
"""Files with deletes one bitmap filter tells apart (by path, in a comparison tree)."""
JVM_SPLIT_PATHS = 1_000
"""From this many paths, a read's paths reach the JVM as one string."""
PLAN_CACHE_FILES = 2_000_000
"""Files (and layouts) of the plans kept for versions read again."""
_THREADS = 16
_PLANNED = "layout string, paths array<string>, rows long, deleted binary"
_PLANNED_ARROW = pa.schema(
    [("layout", pa.string()), ("paths", pa.list_(pa.string())), ("rows", pa.int64()), ("deleted", pa.binary())]
)
_PLAIN_PATH = re.compile(r"[A-Za-z0-9/._=+-]+")
"""Paths Spark reports in ``_metadata.file_path`` as they are (after the table's prefix)."""
_PATH = "__castable_path"
_ROW = "__castable_row"
_PREFIXES: dict[str, str] = {}
"""What Spark puts before a table's file paths, by table URI (one small job each, once)."""


@dataclass
class _Layout:
    """Files whose columns map alike onto the version's schema, those with deletes apart."""

    clean: list[str] = field(default_factory=list)
    dirty: list[tuple[str, int, BitMap]] = field(default_factory=list)
    filters: dict[str | None, str] = field(default_factory=dict)
    """The bitmap filters' SQL, worked out once: by the column telling files apart, and by a lone file's path."""

    @property
    def weight(self) -> int:
        return 1 + len(self.clean) + len(self.dirty)


_PLANS: LruCache[tuple[Any, ...], dict[str, _Layout]] = LruCache(
    PLAN_CACHE_FILES, weigh=lambda layouts: sum(layout.weight for layout in layouts.values())
)
"""Plans by (table URI, version, columns read, filter): a version never changes, so reading it
again plans nothing."""


def read_table(
    spark: SparkSession,
    uri: str | castable.Table,
    *,
    version: int | None = None,
    timestamp: datetime | str | None = None,
    columns: Sequence[str] | None = None,
    filter: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> DataFrame:
    """A version of the table (the latest, ``version``, or the one current at ``timestamp``)
    as a DataFrame read by Spark's vectorised Parquet reader, deletes applied.

    ``filter`` (castable's SQL) prunes files by the manifest's statistics and is applied to
    the rows; ``columns`` projects. Data files are read at ``uri`` joined with their paths:
    ``s3://`` on EMR (EMRFS), a local directory in tests. ``uri`` may also be a table handle,
    such as ``db.snapshot(version=7).table("orders")``: every table of a database read at one
    database version is one consistent snapshot."""
    table = uri if isinstance(uri, castable.Table) else castable.open_table(uri, storage_options=storage_options)
    snapshot = table.snapshot(version, timestamp)
    predicate = None if filter is None else parse_predicate(filter, snapshot.schema)
    scan = Scan(snapshot, None if columns is None else list(columns), predicate)
    target = pa.schema([snapshot.schema.field(c) for c in scan.columns])
    needed = snapshot.columns_for(scan.predicate, [*scan.columns, *snapshot.manifest.primary_key])
    location = TableLocation(table.uri, None if storage_options is None else dict(storage_options))
    known = (table.store.uri, snapshot.manifest.version, tuple(needed), filter)
    planner = _Planner(location, snapshot.manifest.version, scan.predicate, needed)
    layouts = _PLANS.get(known)
    if layouts is None:
        layouts = _plan(spark, planner, snapshot)
        _PLANS.put(known, layouts)
    root = table.store.uri.rstrip("/")
    parts = [
        part
        for layout, files in layouts.items()
        for part in _read_layout(spark, root, snapshot, json.loads(layout), files)
    ]
    held = _inline_entries(snapshot, scan.predicate)
    if held:
        rows = spark_schema(pa.schema([snapshot.schema.field(c) for c in needed]))
        work = spark.createDataFrame([(pickle.dumps(held),)], "piece binary")
        parts.append(work.mapInArrow(planner.read_inline, rows))
    if not parts:
        return spark.createDataFrame([], spark_schema(target))
    live = parts[0]
    for part in parts[1:]:
        live = live.unionByName(part)
    if filter is not None:
        live = live.filter(_sql(filter))
    return live if live.columns == scan.columns else live.select(*(sql_name(c) for c in scan.columns))


def _inline_entries(snapshot: Snapshot, predicate: Predicate | None) -> list[DataFile]:
    """The version's inline entries (``castable.format.inline``) the predicate does not rule out: no
    files Spark could read, and a few MiB at most. Only the segments whose summaries say they
    hold inline entries are read."""
    data_files = snapshot.manifest.data_files
    if not data_files.inline_bytes():
        return []
    parts = [p for p in data_files.parts if p.ref is None or p.ref.inline_bytes]
    held = [f for p in parts for f in p.entries(snapshot.schema) if f.inline is not None]
    return [f for f in held if predicate is None or snapshot.file_match(f, predicate) is not Match.NONE]


@dataclass(frozen=True)
class _Planner:
    """The planning task: a piece of the version (a segment slice or a list of entries) in,
    its files by layout and each file's deleted positions out."""

    location: TableLocation
    version: int
    predicate: Predicate | None
    needed: list[str]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        snapshot = self.location.snapshot(self.version)
        for batch in batches:
            for blob in batch.column("piece").to_pylist():
                piece: SegmentSlice | list[DataFile] = pickle.loads(blob)
                files = snapshot.slice_files(piece, self.predicate) if isinstance(piece, SegmentSlice) else piece
                files = [f for f in files if f.inline is None]  # inline rows: read_inline's
                if files:
                    yield pa.RecordBatch.from_pylist(self.plan(snapshot, files), _PLANNED_ARROW)

    def read_inline(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The task reading inline entries' live rows (their tombstones read here too)."""
        snapshot = self.location.snapshot(self.version)
        for batch in batches:
            for blob in batch.column("piece").to_pylist():
                held = Snapshot(snapshot.store, snapshot.manifest.restricted(pickle.loads(blob)))
                yield from Scan(held, self.needed, self.predicate).to_batches()

    def plan(self, snapshot: Snapshot, files: list[DataFile]) -> list[dict[str, Any]]:
        deletes = snapshot.deletes_for(files)

        layouts: dict[tuple[str, int], str] = {}

        def one(f: DataFile) -> tuple[str, bytes | None]:
            footer = snapshot.footer(f)
            known = (str(footer.schema), f.added_version)  # files written alike map alike
            layout = layouts.get(known)
            if layout is None:
                where = snapshot.columns_of(f, footer)
                physical = footer.schema.to_arrow_schema()
                stored = pa.schema([physical.field(where[c]) for c in self.needed if where[c] is not None])
                doc = {"stored": spark_schema(stored).json(), "where": [[c, where[c]] for c in self.needed]}
                layout = layouts[known] = json.dumps(doc)
            d = deletes.get(f.path)
            if d is None:
                return layout, None
            return layout, BitMap(snapshot.deleted_positions(f, footer, d)).serialize()

        with ThreadPoolExecutor(min(_THREADS, len(files))) as pool:
            planned = list(pool.map(one, files))
        clean: dict[str, list[str]] = defaultdict(list)
        rows: list[dict[str, Any]] = []
        for f, (layout, deleted) in zip(files, planned, strict=True):
            if deleted is None:
                clean[layout].append(f.path)
            else:
                rows.append({"layout": layout, "paths": [f.path], "rows": f.rows, "deleted": deleted})
        return [{"layout": k, "paths": v, "rows": None, "deleted": None} for k, v in clean.items()] + rows


def _plan(spark: SparkSession, planner: _Planner, snapshot: Snapshot) -> dict[str, _Layout]:
    """The version's files by layout, planned by Spark tasks."""
    slices = None
    if len(snapshot.manifest.data_files) >= SLICE_FILES:
        slices = snapshot.segment_slices(planner.predicate, 0, max_entries=FILES_PER_TASK * 16)
    if slices is not None:
        pieces: list[Any] = list(slices)
    else:
        files = [f for f in Scan(snapshot, planner.needed, planner.predicate).files() if f.inline is None]
        pieces = [files[i : i + FILES_PER_TASK] for i in range(0, len(files), FILES_PER_TASK)]
    if not pieces:
        return {}
    work = spark.createDataFrame([(pickle.dumps(p),) for p in pieces], "piece binary")
    layouts: dict[str, _Layout] = defaultdict(_Layout)
    for r in work.mapInArrow(planner, _PLANNED).collect():
        if r["deleted"] is None:
            layouts[r["layout"]].clean += r["paths"]
        else:
            layouts[r["layout"]].dirty.append((r["paths"][0], r["rows"], BitMap.deserialize(bytes(r["deleted"]))))
    return layouts


def _read_layout(
    spark: SparkSession, root: str, snapshot: Snapshot, layout: dict[str, Any], files: _Layout
) -> list[DataFrame]:
    """The live rows of files of one layout, as the version's columns."""
    from pyspark.sql.types import StructType

    schema = StructType.fromJson(json.loads(layout["stored"]))
    where: list[tuple[str, str | None]] = [(c, stored) for c, stored in layout["where"]]
    reader = spark.read.schema(schema)
    wanted = spark_schema(pa.schema([snapshot.schema.field(c) for c, _ in where]))
    as_stored = [(f.name, f.dataType) for f in schema] == [(f.name, f.dataType) for f in wanted]
    frames = [_parquet(spark, reader, [f"{root}/{p}" for p in files.clean])] if files.clean else []
    frames += _without_deletes(spark, reader, root, files)
    if as_stored:  # the files hold the columns as they are: nothing to cast
        return frames
    projected = [
        _column(snapshot.schema.field(c), stored, target.dataType)
        for (c, stored), target in zip(where, wanted, strict=True)
    ]
    return [df.select(*projected) for df in frames]


def _without_deletes(spark: SparkSession, reader: DataFrameReader, root: str, files: _Layout) -> list[DataFrame]:
    """Files with deletes read without the deleted rows: a file whose path Spark may spell
    otherwise alone with its own bitmap filter; the rest together, by one bitmap filter (told
    apart by file name, or by path where names repeat) or, beyond its limits, an anti-join."""
    from pyspark.sql import functions as F

    alone = [d for d in files.dirty if not _PLAIN_PATH.fullmatch(d[0])]
    together = [d for d in files.dirty if _PLAIN_PATH.fullmatch(d[0])]
    frames = []
    for path, rows, bits in alone:
        sql = files.filters.get(path) or files.filters.setdefault(path, _bitmap_filter([(path, rows, bits)], None, []))
        frames.append(reader.parquet(f"{root}/{path}").where(F.expr(sql)))
    if not together:
        return frames
    df = _parquet(spark, reader, [f"{root}/{path}" for path, _, _ in together])
    names = [path.rsplit("/", 1)[-1] for path, _, _ in together]
    words = sum(-(-rows // 64) for _, rows, _ in together)
    if words <= MAX_FILTER_WORDS and len(together) <= MAX_FILTER_FILES:
        if len(together) == 1:
            column, keys = None, []
        elif len(set(names)) == len(names):  # Spark's file name: a shorter string to compare
            column, keys = "_metadata.file_name", names
        else:
            prefix = _spark_prefix(spark, root, together[0][0])
            column, keys = "_metadata.file_path", [prefix + path for path, _, _ in together]
        sql = files.filters.get(column) or files.filters.setdefault(column, _bitmap_filter(together, column, keys))
        return [*frames, df.where(F.expr(sql))]
    prefix = _spark_prefix(spark, root, together[0][0])
    pairs = [(prefix + path, bits.serialize()) for path, _, bits in together]
    positions = spark.createDataFrame(pairs, f"{_PATH} string, deleted binary").mapInArrow(
        _expand, f"{_PATH} string, {_ROW} long"
    )
    keyed = df.withColumn(_PATH, F.col("_metadata.file_path")).withColumn(_ROW, F.col("_metadata.row_index"))
    return [*frames, keyed.join(positions, [_PATH, _ROW], "left_anti").drop(_PATH, _ROW)]


def _parquet(spark: SparkSession, reader: DataFrameReader, paths: list[str]) -> DataFrame:
    """``reader.parquet(*paths)``; many paths go to the JVM as one string split there, since
    PySpark hands a list over with one py4j call per path (30 s for 1,000,000 paths)."""
    jreader = getattr(reader, "_jreader", None)  # Spark Connect has none
    if jreader is None or len(paths) < JVM_SPLIT_PATHS or any("\n" in p for p in paths):
        return reader.parquet(*paths)
    jvm: Any = spark._jvm
    split = jvm.java.util.regex.Pattern.compile("\n").splitAsStream("\n".join(paths))
    listed = split.collect(jvm.java.util.stream.Collectors.toList())
    df: DataFrame = reader._df(jreader.parquet(jvm.PythonUtils.toSeq(listed)))
    return df


def _expand(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """(file, bitmap) rows as (file, row) rows: the anti-join's deleted positions, made by a task."""
    for batch in batches:
        for path, blob in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            rows = np.asarray(BitMap.deserialize(blob).to_array(), dtype=np.int64)
            yield pa.record_batch([pa.array([path] * len(rows), pa.string()), pa.array(rows)], names=[_PATH, _ROW])


def _bitmap_filter(files: list[tuple[str, int, BitMap]], column: str | None, keys: list[str]) -> str:
    """SQL keeping the rows of ``files`` (read by one scan) that no bitmap deletes: each file's
    bitmap is a run of 64-bit words in one array literal, found by a comparison tree on Spark's
    ``column`` (``_metadata.file_name`` or ``file_path``) against each file's ``keys``, the
    spelling Spark gives it (``None``, no keys: a single file)."""
    order = sorted(range(len(files)), key=lambda i: keys[i].encode() if keys else b"")
    offsets = [0]
    chunks = []
    for i in order:
        _, rows, bits = files[i]
        mask = np.zeros(-(-rows // 64) * 64, dtype=bool)
        mask[np.asarray(bits.to_array(), dtype=np.int64)] = True
        chunks.append(np.packbits(mask, bitorder="little").view("<i8"))
        offsets.append(offsets[-1] + len(chunks[-1]))
    words = ",".join(map(str, np.concatenate(chunks).tolist()))
    sorted_keys = [keys[i] for i in order] if keys else []
    first = "0" if column is None else _offset_tree(column, sorted_keys, offsets, 0, len(files))
    word = f"{first} + int(shiftright(_metadata.row_index, 6))"
    deleted = f"shiftright(get(from_json('[{words}]', 'array<bigint>'), {word}), int(_metadata.row_index & 63)) & 1"
    return f"{deleted} = 0"


def _offset_tree(column: str, keys: list[str], offsets: list[int], lo: int, hi: int) -> str:
    """SQL giving the first word of the bitmap of the file being read, among the sorted
    ``keys[lo:hi]`` of ``column``: a balanced tree of comparisons (Spark compares strings by
    their UTF-8 bytes, as the sort did)."""
    if hi - lo == 1:
        return str(offsets[lo])
    mid = (lo + hi) // 2
    left, right = _offset_tree(column, keys, offsets, lo, mid), _offset_tree(column, keys, offsets, mid, hi)
    return f"(CASE WHEN {column} < {_string(keys[mid])} THEN {left} ELSE {right} END)"


def _string(value: str) -> str:
    """A Spark SQL string literal (backslash escapes, Spark's default)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _column(field: pa.Field, stored: str | None, spark_type: DataType) -> Column:
    """A column of the version's schema (``spark_type`` in Spark) from a file's column (renamed,
    widened) or its default."""
    from pyspark.sql import functions as F

    if stored is None:
        default = default_of(field)
        return F.lit(None if default is None else default.as_py()).cast(spark_type).alias(field.name)
    return F.col(sql_name(stored)).cast(spark_type).alias(field.name)


def _spark_prefix(spark: SparkSession, root: str, path: str) -> str:
    """What Spark's ``_metadata.file_path`` puts before a table-relative path (``file:/`` for
    ``file:///``, say): read once per table from one file with rows, so the filters' and
    joins' paths match Spark's own."""
    prefix = _PREFIXES.get(root)
    if prefix is None:
        reported = spark.read.parquet(f"{root}/{path}").select("_metadata.file_path").limit(1).collect()
        spelled = reported[0][0] if reported else f"{root}/{path}"
        if not spelled.endswith(path):
            raise InvalidInputError(f"Spark reports {spelled!r} for data file {path!r}: cannot match its deletes")
        prefix = _PREFIXES[root] = spelled[: len(spelled) - len(path)]
    return prefix


def _sql(text: str) -> Column:
    """castable's SQL predicate as a Spark column (the dialects agree on what castable parses)."""
    from pyspark.sql import functions as F

    return F.expr(text)
