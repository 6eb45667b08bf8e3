"""Manifest segments (format version 2): immutable Arrow IPC files of file entries (docs/format.md section 3.1).

A version-2 manifest lists segments instead of entries. A segment holds one row per data file
(or tombstone file, or recent commit id), in columns, so a reader prunes thousands of entries
with a few vectorised comparisons and builds Python objects only for the files it opens.
Data segments keep each column's statistics typed, in a ``stats`` struct column:
``stats.<column>.min`` / ``.max`` in the column's own Arrow type, ``.nulls`` as int64. A data
segment that lists inline entries (``castable.format.inline``) holds their rows in an ``inline`` column,
a list of the table's rows per entry (null for a file), and is marked segment format 2.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from castable.errors import CorruptObjectError
from castable.format import inline
from castable.format.entries import DataFile, TombstoneFile, dumps
from castable.format.evolution import FIELD_ID, field_id, file_schema, names_of
from castable.format.stats import ColumnStats, decode_values, stat_fields, stats_to_json, supports_stats, value_type

SEGMENT_PREFIX = "segment/"
SEGMENT_FORMAT_VERSION = "1"
INLINE_FORMAT_VERSION = "2"
"""The format of a data segment with an ``inline`` column: readers that know only 1 refuse it."""
INLINE = "inline"
SPEC_ID = "spec_id"
PARTITION = "partition"
"""A data segment listing files of a partitioned table has these two columns: each file's spec id
(int32) and its partition values as the compact JSON of a list, in the spec's field order."""
SORT_ORDER_ID = "sort_order_id"
"""A data segment listing files written in a sort order has this column (int32; 0 or null: none)."""
Kind = Literal["data", "tombstone", "commits"]
KINDS: tuple[Kind, ...] = ("data", "tombstone", "commits")

_OPTIONS = ipc.IpcWriteOptions(compression="zstd")

_DATA_FIELDS = [
    pa.field("path", pa.string(), nullable=False),
    pa.field("size", pa.int64(), nullable=False),
    pa.field("etag", pa.string(), nullable=False),
    pa.field("rows", pa.int64(), nullable=False),
    pa.field("row_groups", pa.int64(), nullable=False),
    pa.field("added_version", pa.int64(), nullable=False),
]
TOMBSTONE_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("etag", pa.string(), nullable=False),
        pa.field("files", pa.list_(pa.string()), nullable=False),
        pa.field("rows", pa.int64()),
        pa.field("added_version", pa.int64(), nullable=False),
    ]
)
COMMITS_SCHEMA = pa.schema(
    [pa.field("commit_id", pa.string(), nullable=False), pa.field("version", pa.int64(), nullable=False)]
)


def new_segment_key() -> str:
    return f"{SEGMENT_PREFIX}{uuid.uuid4()}.arrow"


def data_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema of a data segment for a table of ``schema``."""
    columns = []
    for key, f in stat_fields(schema).items():
        parts = [pa.field("nulls", pa.int64())]
        if supports_stats(f.type):
            t = value_type(f.type)
            parts = [pa.field("min", t), pa.field("max", t), *parts]
        fid = field_id(f)
        columns.append(pa.field(key, pa.struct(parts), metadata=None if fid is None else {FIELD_ID: str(fid)}))
    return pa.schema([*_DATA_FIELDS, pa.field("stats", pa.struct(columns), nullable=False)])


def inline_type(schema: pa.Schema) -> pa.DataType:
    """The type of a data segment's ``inline`` column for a table of ``schema``."""
    return pa.list_(pa.struct(list(file_schema(schema))))


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A data segment's columns as a table of ``schema`` reads them: its statistics
    (:func:`conform_stats`) and its inline rows (:func:`castable.format.inline.conformed`)."""
    table = conform_stats(table, schema)
    if INLINE not in table.column_names or table.schema.field(INLINE).type.equals(
        target := inline_type(schema), check_metadata=True
    ):
        return table
    lists = table.column(INLINE).combine_chunks()
    rows = inline.conformed(pa.Table.from_struct_array(lists.flatten()), schema)
    conformed = _lists(rows, pc.fill_null(lists.value_lengths(), 0).to_pylist(), lists.is_null(), target)
    return table.set_column(table.schema.get_field_index(INLINE), pa.field(INLINE, target), conformed)


def _lists(rows: pa.Table, lengths: list[int], missing: pa.Array, target: pa.DataType) -> pa.ListArray:
    """``rows`` cut into one list per entry of ``lengths`` rows (null where ``missing``)."""
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    values = rows.to_struct_array().combine_chunks() if rows.num_rows else pa.array([], target.value_type)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, type=target, mask=missing)


def conform_stats(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A data segment's ``stats`` column as a table of ``schema`` has it: each column's
    statistics found by field id (by name in a table without ids), renamed, widened, and
    absent for columns the segment's files predate."""
    target = data_schema(schema).field("stats").type
    stats = table.column("stats").combine_chunks()
    if stats.type.equals(target, check_metadata=True):
        return table
    by_id = {field_id(f): key for key, f in stat_fields(schema).items()}
    # A segment written before the table had ids names each column as it was then (since version 0).
    original = {names_of(f)[0]: f.name for f in schema}
    found: dict[str | None, int] = {}
    for i, c in enumerate(stats.type):
        fid = field_id(c)
        found[by_id.get(fid) if fid is not None else original.get((c.name, 0))] = i
    arrays = []
    for column in target:
        at = found.get(column.name)
        arrays.append(pa.nulls(len(stats), column.type) if at is None else stats.field(at).cast(column.type))
    conformed = (
        pa.StructArray.from_arrays(arrays, fields=list(target)) if arrays else pa.array([{}] * len(stats), target)
    )
    return table.set_column(table.schema.get_field_index("stats"), pa.field("stats", target, nullable=False), conformed)


def data_table(files: Sequence[DataFile], schema: pa.Schema) -> pa.Table:
    """Data file entries as the columns of a data segment (statistics typed, vectorised)."""
    target = data_schema(schema)
    stats_type = target.field("stats").type
    fields = stat_fields(schema)
    columns: list[pa.Array] = []
    for f in stats_type:
        name = f.name
        docs = [d.stats.get(name) or {} for d in files]
        has = [("min" in d and "max" in d) for d in docs]
        nulls = pa.array([d.get("nulls") for d in docs], pa.int64())
        parts: list[pa.Array] = [nulls]
        if len(f.type) == 3:
            t = fields[name].type
            los = decode_values([d.get("min") if h else None for d, h in zip(docs, has, strict=True)], t)
            his = decode_values([d.get("max") if h else None for d, h in zip(docs, has, strict=True)], t)
            parts = [los, his, nulls]
        columns.append(pa.StructArray.from_arrays(parts, fields=list(f.type)))
    stats = pa.StructArray.from_arrays(columns, fields=list(stats_type)) if columns else None
    table = pa.table(
        {
            "path": pa.array([f.path for f in files], pa.string()),
            "size": pa.array([f.size for f in files], pa.int64()),
            "etag": pa.array([f.etag for f in files], pa.string()),
            "rows": pa.array([f.rows for f in files], pa.int64()),
            "row_groups": pa.array([f.row_groups for f in files], pa.int64()),
            "added_version": pa.array([f.added_version for f in files], pa.int64()),
            "stats": stats if stats is not None else pa.array([{}] * len(files), stats_type),
        },
        schema=target,
    )
    if any(f.partition for f in files):
        table = table.append_column(
            pa.field(SPEC_ID, pa.int32()), pa.array([f.spec_id for f in files], pa.int32())
        ).append_column(pa.field(PARTITION, pa.string()), pa.array([dumps(list(f.partition)) for f in files]))
    if any(f.sort_order_id for f in files):
        ids = pa.array([f.sort_order_id for f in files], pa.int32())
        table = table.append_column(pa.field(SORT_ORDER_ID, pa.int32()), ids)
    if all(f.inline is None for f in files):
        return table
    kept = [inline.conformed(f.inline, schema) for f in files if f.inline is not None]
    missing = pa.array([f.inline is None for f in files])
    lengths = [0 if f.inline is None else f.inline.num_rows for f in files]
    return table.append_column(
        pa.field(INLINE, t := inline_type(schema)), _lists(pa.concat_tables(kept), lengths, missing, t)
    )


def data_files(table: pa.Table, schema: pa.Schema) -> list[DataFile]:
    """The :class:`DataFile` objects of some rows of a data segment (statistics back in JSON form)."""
    stats = table.column("stats").combine_chunks()
    fields = stat_fields(schema)
    per_column: dict[str, list[dict[str, Any]]] = {}
    for i, f in enumerate(stats.type):
        col = stats.field(i)
        nulls = col.field("nulls").to_pylist()
        if f.type.get_field_index("min") >= 0 and f.name in fields:
            encoded = [_json_values(col.field(k), fields[f.name].type) for k in ("min", "max")]
            per_column[f.name] = [
                _stats_doc(lo, hi, n) for lo, hi, n in zip(encoded[0], encoded[1], nulls, strict=True)
            ]
        else:
            per_column[f.name] = [_stats_doc(None, None, n) for n in nulls]
    kept = _inline_rows(table)
    specs = table.column(SPEC_ID).to_pylist() if SPEC_ID in table.column_names else [0] * table.num_rows
    values = table.column(PARTITION).to_pylist() if PARTITION in table.column_names else [None] * table.num_rows
    orders = table.column(SORT_ORDER_ID).to_pylist() if SORT_ORDER_ID in table.column_names else [0] * table.num_rows
    extra = ("stats", INLINE, SPEC_ID, PARTITION, SORT_ORDER_ID)
    rows = table.drop_columns([c for c in extra if c in table.column_names]).to_pylist()
    return [
        DataFile(
            path=r["path"],
            size=r["size"],
            etag=r["etag"],
            rows=r["rows"],
            row_groups=r["row_groups"],
            stats={name: docs[i] for name, docs in per_column.items() if docs[i]},
            added_version=r["added_version"],
            inline=kept[i],
            spec_id=specs[i] or 0,
            partition=() if values[i] is None else tuple(json.loads(str(values[i]))),
            sort_order_id=orders[i] or 0,
        )
        for i, r in enumerate(rows)
    ]


def _inline_rows(table: pa.Table) -> list[pa.Table | None]:
    """Each entry's inline rows (``None`` for a file), as slices of one table."""
    if INLINE not in table.column_names:
        return [None] * table.num_rows
    lists = table.column(INLINE).combine_chunks()
    rows = pa.Table.from_struct_array(lists.flatten())
    out: list[pa.Table | None] = []
    at = 0
    for n in lists.value_lengths().to_pylist():
        out.append(None if n is None else rows.slice(at, n))
        at += n or 0
    return out


def inline_bytes(table: pa.Table) -> int:
    """The bytes the inline entries of a data segment stand for (their Parquet sizes)."""
    if INLINE not in table.column_names:
        return 0
    held = pc.is_valid(table.column(INLINE))
    return int(pc.sum(pc.if_else(held, table.column("size"), 0)).as_py() or 0)


def _stats_doc(lo: Any, hi: Any, nulls: int | None) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if lo is not None and hi is not None:
        doc["min"], doc["max"] = lo, hi
    if nulls is not None:
        doc["nulls"] = nulls
    return doc


def _json_values(values: pa.Array, t: pa.DataType) -> list[Any]:
    """Statistics as the manifest's JSON encodes them (``stats.encode_value``, vectorised)."""
    t = value_type(t)
    if pa.types.is_date32(t):
        return list(values.cast(pa.int32()).to_pylist())
    if pa.types.is_date64(t) or pa.types.is_timestamp(t):
        return list(values.cast(pa.int64()).to_pylist())
    if pa.types.is_decimal(t):
        return [None if v is None else str(v) for v in values.to_pylist()]
    if pa.types.is_floating(t):
        finite = pc.is_finite(values)
        return list(pc.if_else(finite, values, pa.scalar(None, values.type)).to_pylist())
    return list(values.to_pylist())


def tombstone_table(tombstones: Sequence[TombstoneFile], schema: pa.Schema | None = None) -> pa.Table:
    return pa.table(
        {
            "path": [t.path for t in tombstones],
            "size": [t.size for t in tombstones],
            "etag": [t.etag for t in tombstones],
            "files": [list(t.files) for t in tombstones],
            "rows": [t.rows for t in tombstones],
            "added_version": [t.added_version for t in tombstones],
        },
        schema=TOMBSTONE_SCHEMA,
    )


def tombstone_files(table: pa.Table, schema: pa.Schema | None = None) -> list[TombstoneFile]:
    return [
        TombstoneFile(
            path=r["path"],
            size=r["size"],
            etag=r["etag"],
            files=tuple(r["files"]),
            rows=r["rows"],
            added_version=r["added_version"],
        )
        for r in table.to_pylist()
    ]


def commits_table(commits: Sequence[tuple[str, int]]) -> pa.Table:
    return pa.table({"commit_id": [c for c, _ in commits], "version": [v for _, v in commits]}, schema=COMMITS_SCHEMA)


@dataclass(frozen=True)
class SegmentRef:
    """A segment as the root lists it: where it is, and a summary to prune it by unopened."""

    path: str
    etag: str
    size: int
    kind: Kind
    entries: int
    rows: int | None
    """Rows in the data files (data), rows deleted if known (tombstone), 0 (commits)."""
    bytes: int
    """Bytes of the files the entries name (data and tombstone), 0 (commits)."""
    stats: dict[str, dict[str, Any]]
    """Each column's min, max and null count over the segment's files, JSON-encoded as a
    version-1 file entry's; a column without them is absent or has no bounds."""
    inline_bytes: int = 0
    """Of ``bytes``, those of inline entries (rows held in the segment itself)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "etag": self.etag,
            "size": self.size,
            "kind": self.kind,
            "entries": self.entries,
            "rows": self.rows,
            "bytes": self.bytes,
            "stats": self.stats,
            **({"inline_bytes": self.inline_bytes} if self.inline_bytes else {}),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SegmentRef:
        kind = doc["kind"]
        if kind not in KINDS:
            raise ValueError(f"segment kind {kind!r} is not one of {KINDS}")
        path = str(doc["path"])
        if not path.startswith(SEGMENT_PREFIX):
            raise ValueError(f"segment path {path!r} is not under {SEGMENT_PREFIX}")
        rows = doc["rows"]
        return cls(
            path=path,
            etag=str(doc["etag"]),
            size=int(doc["size"]),
            kind=kind,
            entries=int(doc["entries"]),
            rows=None if rows is None else int(rows),
            bytes=int(doc["bytes"]),
            stats=dict(doc.get("stats") or {}),
            inline_bytes=int(doc.get("inline_bytes", 0)),
        )


def summarize(table: pa.Table, kind: Kind, schema: pa.Schema) -> tuple[int | None, int, dict[str, dict[str, Any]]]:
    """(rows, bytes, stats) of a segment's entries, as :class:`SegmentRef` records them."""
    if kind == "commits":
        return 0, 0, {}
    size = int(pc.sum(table.column("size")).as_py() or 0)
    rows_column = table.column("rows")
    rows = None if rows_column.null_count else int(pc.sum(rows_column).as_py() or 0)
    if kind == "tombstone":
        return rows, size, {}
    stats = table.column("stats").combine_chunks()
    fields = stat_fields(schema)
    summary: dict[str, ColumnStats] = {}
    for i, f in enumerate(stats.type):
        if f.name not in fields:
            continue
        col = stats.field(i)
        nulls = col.field("nulls")
        null_count = None if nulls.null_count else int(pc.sum(nulls).as_py() or 0)
        lo = hi = None
        if (
            f.type.get_field_index("min") >= 0
            and len(col)
            and not (col.field("min").null_count or col.field("max").null_count)
        ):
            lo, hi = pc.min(col.field("min")), pc.max(col.field("max"))
        summary[f.name] = ColumnStats(lo, hi, null_count)
    return rows, size, stats_to_json(summary)


def encode(table: pa.Table, kind: Kind) -> bytes:
    """The bytes of a segment: an Arrow IPC file, zstd-compressed, its kind in the schema metadata
    (format 2 if it holds inline rows; an ``inline`` column of nulls alone is left out)."""
    if INLINE in table.column_names and table.column(INLINE).null_count == table.num_rows:
        table = table.drop_columns([INLINE])
    form = INLINE_FORMAT_VERSION if INLINE in table.column_names else SEGMENT_FORMAT_VERSION
    meta = {b"castable_segment": form.encode(), b"kind": kind.encode()}
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema.with_metadata(meta), options=_OPTIONS) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def decode(data: bytes, kind: Kind, *, key: str) -> pa.Table:
    """A segment's table, checked to be a segment of ``kind`` with the columns that kind needs."""
    try:
        reader = ipc.open_file(pa.py_buffer(data))
        meta = reader.schema.metadata or {}
        if meta.get(b"castable_segment") not in (SEGMENT_FORMAT_VERSION.encode(), INLINE_FORMAT_VERSION.encode()):
            raise ValueError("not a castable segment")
        if meta.get(b"kind") != kind.encode():
            raise ValueError(f"a {meta.get(b'kind', b'?').decode()} segment, not a {kind} segment")
        table = reader.read_all().replace_schema_metadata()
    except (pa.ArrowException, ValueError, UnicodeDecodeError) as e:
        raise CorruptObjectError(f"{key} is not a valid {kind} segment: {e}") from None
    required = {"data": pa.schema(_DATA_FIELDS), "tombstone": TOMBSTONE_SCHEMA, "commits": COMMITS_SCHEMA}[kind]
    for f in required:
        if f.name not in table.schema.names or not table.schema.field(f.name).type.equals(f.type):
            raise CorruptObjectError(f"{key} is not a valid {kind} segment: column {f.name} ({f.type}) is missing")
        if not f.nullable and table.column(f.name).null_count:
            raise CorruptObjectError(f"{key} is not a valid {kind} segment: column {f.name} has nulls")
    if kind == "data" and not pa.types.is_struct(
        table.schema.field("stats").type if "stats" in table.schema.names else pa.null()
    ):
        raise CorruptObjectError(f"{key} is not a valid data segment: column stats is missing")
    if INLINE in table.column_names and not (
        kind == "data" and pa.types.is_list(t := table.schema.field(INLINE).type) and pa.types.is_struct(t.value_type)
    ):
        raise CorruptObjectError(f"{key} is not a valid {kind} segment: its inline column is not a list of rows")
    return table
