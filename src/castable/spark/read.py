"""Spark's own Parquet reader over one version's live files: ``read_table`` (Spark 3.5 and 4.x).

The driver plans from the manifest: the files the statistics leave, their footers (for how
each file's columns map onto the version's schema, section 4.1 of docs/format.md) and their
deletes. Files that map alike are read together by ``spark.read.parquet``, vectorised, and
their columns renamed, widened or filled with defaults. A file with deletes is read with them
as a filter on its own ``_metadata.row_index`` (positions, whole row groups) and primary key
(key ranges and lists); with more than ``PER_FILE_DELETES`` such files, they become anti-joins
against small broadcast tables keyed by ``_metadata.file_path`` instead. So EMR 7
(Spark 3.5) reads castable tables with Spark's own reader, through EMRFS on ``s3://``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

import castable
from castable.errors import InvalidInputError
from castable.evolution import default_of
from castable.manifest import DataFile
from castable.predicate import parse_predicate
from castable.scan import Scan
from castable.snapshot import Snapshot
from castable.spark.files import spark_schema
from castable.tombstone import FileDeletes

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

_PATH = "__castable_path"
_ROW = "__castable_row"
_FOOTER_THREADS = 16
PER_FILE_DELETES = 256
"""Up to this many files with deletes, each is read with its deletes as a filter on its own row
indexes and keys (no per-row path column); beyond, anti-joins keyed by file path do it."""


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
    from pyspark.sql import functions as F

    table = uri if isinstance(uri, castable.Table) else castable.open_table(uri, storage_options=storage_options)
    snapshot = table.snapshot(version, timestamp)
    predicate = None if filter is None else parse_predicate(filter, snapshot.schema)
    scan = Scan(snapshot, None if columns is None else list(columns), predicate)
    files = scan.files()
    target = pa.schema([snapshot.schema.field(c) for c in scan.columns])
    if not files:
        return spark.createDataFrame([], spark_schema(target))
    deletes = snapshot.deletes_for(files)
    needed = snapshot.columns_for(scan.predicate, [*scan.columns, *snapshot.manifest.primary_key])
    with ThreadPoolExecutor(min(_FOOTER_THREADS, len(files))) as pool:
        footers = list(pool.map(snapshot.footer, files))
    groups: dict[tuple[Any, ...], list[tuple[DataFile, pq.FileMetaData]]] = defaultdict(list)
    for f, footer in zip(files, footers, strict=True):
        where = snapshot.columns_of(f, footer)
        physical = footer.schema.to_arrow_schema()
        layout = tuple((c, where[c], None if where[c] is None else physical.field(where[c]).type) for c in needed)
        groups[layout].append((f, footer))
    root = table.store.uri.rstrip("/")
    key = snapshot.manifest.primary_key[0] if snapshot.manifest.primary_key else None
    dirty = sum(f.path in deletes for f in files)
    per_file = dirty <= PER_FILE_DELETES
    parts = []
    for layout, members in groups.items():
        schema = spark_schema(pa.schema([pa.field(stored, t) for _, stored, t in layout if stored is not None]))
        reader = spark.read.schema(schema)
        wanted = spark_schema(pa.schema([snapshot.schema.field(c) for c, _, _ in layout]))
        as_stored = [(f.name, f.dataType) for f in schema] == [(f.name, f.dataType) for f in wanted]
        projected: list[Column] | list[str] = (
            [_quoted(n) for n in wanted.names]  # the files hold the columns as they are: nothing to cast
            if as_stored
            else [
                _column(snapshot.schema.field(c), stored, target.dataType)
                for (c, stored, _), target in zip(layout, wanted, strict=True)
            ]
        )
        if per_file:
            clean = [f"{root}/{f.path}" for f, _ in members if f.path not in deletes]
            if clean:
                df = reader.parquet(*clean)
                parts.append(df if as_stored else df.select(*projected))
            stored_key = None if key is None else dict((c, stored) for c, stored, _ in layout)[key]
            for f, footer in members:
                if f.path in deletes:
                    kept = _kept(footer, deletes[f.path], stored_key)
                    df = reader.parquet(f"{root}/{f.path}").where(kept)
                    parts.append(df if as_stored else df.select(*projected))
        else:
            prefix = _spark_prefix(spark, root, files[0])
            path = F.expr(f"substring(_metadata.file_path, {len(prefix) + 1})").alias(_PATH)
            df = reader.parquet(*(f"{root}/{f.path}" for f, _ in members))
            parts.append(df.select(*projected, path, F.col("_metadata.row_index").alias(_ROW)))
    live = parts[0]
    for part in parts[1:]:
        live = live.unionByName(part)
    if not per_file:
        deleted = {f.path: (fr, deletes[f.path]) for f, fr in zip(files, footers, strict=True) if f.path in deletes}
        live = _without_deletes(spark, live, deleted, key, snapshot)
    if filter is not None:
        live = live.filter(_sql(filter))
    return live if live.columns == scan.columns else live.select(*(_quoted(c) for c in scan.columns))


def _deleted_rows(footer: pq.FileMetaData, d: FileDeletes) -> tuple[list[tuple[int, int]], list[int]]:
    """A file's deletes by position as Spark numbers its rows (``_metadata.row_index``, from 0
    over the whole file): the inclusive spans of whole row groups, and single rows."""
    starts = [0]
    for rg in range(footer.num_row_groups):
        starts.append(starts[-1] + footer.row_group(rg).num_rows)
    spans = [(starts[rg], starts[rg + 1] - 1) for rg in sorted(d.full_groups)]
    return spans, [starts[rg] + p for rg, bitmap in d.positions.items() for p in bitmap]


def _kept(footer: pq.FileMetaData, d: FileDeletes, key: str | None) -> Column:
    """The rows of one file its deletes leave, as a filter on ``_metadata.row_index`` and on the
    file's own primary-key column ``key`` (a NULL key is never deleted)."""
    from pyspark.sql import functions as F

    row = F.col("_metadata.row_index")
    spans, positions = _deleted_rows(footer, d)
    gone: list[Column] = [row.between(lo, hi) for lo, hi in spans]
    if positions:
        gone.append(_isin("_metadata.row_index", positions))
    if key is not None:
        k = F.col(_quoted(key))
        for lo, hi in d.ranges:
            inside = k.isNotNull()
            if lo.is_valid:
                inside &= k >= F.lit(lo.as_py())
            if hi.is_valid:
                inside &= k <= F.lit(hi.as_py())
            gone.append(inside)
        if len(d.points):
            gone.append(_isin(_quoted(key), d.points.to_pylist()))
    deleted = gone[0]
    for g in gone[1:]:
        deleted |= g
    return ~F.coalesce(deleted, F.lit(False))


def _isin(column: str, values: list[Any]) -> Column:
    """``column IN (values)``: for integers and strings one SQL expression, parsed by Spark in
    one call to the JVM (``Column.isin`` makes one per value: a third of a second per 1,000)."""
    from pyspark.sql import functions as F

    if all(type(v) is int for v in values):
        return F.expr(f"{column} IN ({', '.join(map(str, values))})")
    if all(type(v) is str for v in values):
        return F.expr(f"{column} IN ({', '.join(_string(v) for v in values)})")
    return F.expr(column).isin(values)


def _quoted(name: str) -> str:
    """A column name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


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
    return F.col(_quoted(stored)).cast(spark_type).alias(field.name)


def _spark_prefix(spark: SparkSession, root: str, f: DataFile) -> str:
    """What Spark's ``_metadata.file_path`` puts before a file's table-relative path (``file:/``
    for ``file:///``, say): read from one file, so the deletes' keys match Spark's own."""
    reported = spark.read.parquet(f"{root}/{f.path}").select("_metadata.file_path").limit(1).collect()
    path = reported[0][0] if reported else f"{root}/{f.path}"
    if not path.endswith(f.path):
        raise InvalidInputError(f"Spark reports {path!r} for data file {f.path!r}: cannot match its deletes")
    return path[: len(path) - len(f.path)]


def _without_deletes(
    spark: SparkSession,
    df: DataFrame,
    deleted: dict[str, tuple[pq.FileMetaData, FileDeletes]],
    key: str | None,
    snapshot: Snapshot,
) -> DataFrame:
    """``df`` less the rows the version's tombstones delete: anti-joins with broadcast tables."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    points: list[tuple[str, int]] = []
    spans: list[tuple[str, int, int]] = []
    key_ranges: list[tuple[str, Any, Any]] = []
    key_points: list[tuple[str, Any]] = []
    for path, (footer, d) in deleted.items():
        file_spans, file_points = _deleted_rows(footer, d)
        spans += [(path, lo, hi) for lo, hi in file_spans]
        points += [(path, p) for p in file_points]
        key_ranges += [(path, lo.as_py(), hi.as_py()) for lo, hi in d.ranges]
        key_points += [(path, k) for k in d.points.to_pylist()]
    positions = StructType([StructField(_PATH, StringType(), False), StructField(_ROW, LongType(), False)])
    if points:
        df = df.join(F.broadcast(spark.createDataFrame(points, positions)), [_PATH, _ROW], "left_anti")
    if spans:
        span_schema = StructType([*positions.fields[:1], StructField("lo", LongType()), StructField("hi", LongType())])
        s = F.broadcast(spark.createDataFrame(spans, span_schema).withColumnRenamed(_PATH, "p"))
        df = df.join(s, (df[_PATH] == s["p"]) & df[_ROW].between(s["lo"], s["hi"]), "left_anti")
    if key is not None and (key_ranges or key_points):
        key_type = spark_schema(pa.schema([snapshot.schema.field(key)]))[0].dataType
        if key_ranges:
            schema = StructType(
                [StructField("p", StringType()), StructField("lo", key_type), StructField("hi", key_type)]
            )
            r = F.broadcast(spark.createDataFrame(key_ranges, schema))
            above = r["lo"].isNull() | (df[_quoted(key)] >= r["lo"])
            below = r["hi"].isNull() | (df[_quoted(key)] <= r["hi"])
            df = df.join(r, (df[_PATH] == r["p"]) & above & below, "left_anti")
        if key_points:
            schema = StructType([StructField(_PATH, StringType()), StructField(key, key_type)])
            df = df.join(F.broadcast(spark.createDataFrame(key_points, schema)), [_PATH, key], "left_anti")
    return df


def _sql(text: str) -> Column:
    """castable's SQL predicate as a Spark column (the dialects agree on what castable parses)."""
    from pyspark.sql import functions as F

    return F.expr(text)
