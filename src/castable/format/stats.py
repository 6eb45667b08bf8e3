"""Column statistics: reading them from Parquet footers and their JSON form in the manifest (docs/format.md section 5).

Min/max are kept only for types whose order is well defined and cheap to compare: integers,
floats, booleans, strings, dates, timestamps and decimals. Temporal values are stored as the
integer of their Arrow storage type (days, or units since the epoch), decimals as strings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from castable.format.nested import children, field_id

JsonValue = int | float | str | bool


@dataclass(frozen=True)
class ColumnStats:
    """Min, max (both inclusive, ``None`` if unknown) and null count of one column in one unit."""

    min: pa.Scalar | None
    max: pa.Scalar | None
    null_count: int | None

    @property
    def has_bounds(self) -> bool:
        return self.min is not None and self.max is not None


def value_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def compared_type(t: pa.DataType) -> pa.DataType:
    """The type a column's values are compared as: its own, but float16 (which Arrow's compute
    kernels do not support) as float32."""
    t = value_type(t)
    return pa.float32() if pa.types.is_float16(t) else t


def supports_stats(t: pa.DataType) -> bool:
    """Whether castable keeps min/max statistics of a column of type ``t`` (not float16: Arrow
    cannot compare it)."""
    t = value_type(t)
    return bool(
        pa.types.is_integer(t)
        or (pa.types.is_floating(t) and not pa.types.is_float16(t))
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
    )


def _storage_type(t: pa.DataType) -> pa.DataType | None:
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_date64(t) or pa.types.is_timestamp(t):
        return pa.int64()
    return None


_SCALE = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


def ordered(value: pa.Scalar) -> Any:
    """A Python value that orders as ``value`` does, to compare statistics and literals of any
    unit: dates as milliseconds, timestamps as nanoseconds, both as exact integers (``as_py``
    would drop nanoseconds, or fail without pandas)."""
    t = value.type
    if pa.types.is_timestamp(t):
        return value.cast(pa.int64()).as_py() * _SCALE[t.unit]
    if pa.types.is_date32(t):
        return value.cast(pa.int32()).as_py() * 86_400_000
    if pa.types.is_date64(t):
        return value.cast(pa.int64()).as_py()
    return value.as_py()


def ordered_values(values: pa.Array) -> list[Any]:
    """The valid ``values`` as :func:`ordered` gives each, converted at once."""
    values = pc.drop_null(values)
    t = values.type
    if pa.types.is_timestamp(t):
        return [v * _SCALE[t.unit] for v in values.cast(pa.int64()).to_pylist()]
    if pa.types.is_date32(t):
        return [v * 86_400_000 for v in values.cast(pa.int32()).to_pylist()]
    if pa.types.is_date64(t):
        return cast(list[Any], values.cast(pa.int64()).to_pylist())
    return cast(list[Any], values.to_pylist())


def encode_values(values: pa.Array) -> list[JsonValue | None]:
    """The JSON form of each of ``values``, as :func:`encode_value` gives it, converted at once."""
    storage = _storage_type(values.type)
    if storage is not None:
        return cast(list[JsonValue | None], values.cast(storage).to_pylist())
    if pa.types.is_decimal(values.type):
        return [None if v is None else str(v) for v in values.to_pylist()]
    if pa.types.is_floating(values.type):
        return [v if v is None or math.isfinite(v) else None for v in values.to_pylist()]
    return cast(list[JsonValue | None], values.to_pylist())


def encode_value(value: pa.Scalar) -> JsonValue | None:
    """JSON form of a statistic, or ``None`` when it has none (NaN, infinities)."""
    storage = _storage_type(value.type)
    if storage is not None:
        return cast(JsonValue, value.cast(storage).as_py())
    if pa.types.is_decimal(value.type):
        return str(value.as_py())
    py = value.as_py()
    if isinstance(py, float) and not math.isfinite(py):
        return None
    return cast(JsonValue, py)


def decode_value(value: JsonValue, t: pa.DataType) -> pa.Scalar:
    t = value_type(t)
    storage = _storage_type(t)
    if storage is not None:
        return pa.scalar(value, type=storage).cast(t)
    if pa.types.is_decimal(t):
        from decimal import Decimal

        return pa.scalar(Decimal(str(value)), type=t)
    return pa.scalar(value, type=t)


def decode_values(values: Sequence[JsonValue | None], t: pa.DataType) -> pa.Array:
    """Many JSON-encoded values of one type at once (:func:`decode_value`, vectorised)."""
    t = value_type(t)
    storage = _storage_type(t)
    if storage is not None:
        return pa.array(values, type=storage).cast(t)
    if pa.types.is_decimal(t):
        from decimal import Decimal

        return pa.array([None if v is None else Decimal(str(v)) for v in values], type=t)
    return pa.array(values, type=t)


NESTED = "\x00"
"""Joins the names of a field inside structs into the key of its statistics: ``payload``, ``user``,
``id`` is ``"payload\x00user\x00id"``, which no column name of a table holds (names hold no NUL)."""


def leaf_key(column: str, path: Sequence[str]) -> str:
    """The key of the statistics of the field at ``path`` inside ``column`` (``column`` if none)."""
    return NESTED.join((column, *path))


def stat_fields(schema: pa.Schema) -> dict[str, pa.Field]:
    """Every unit castable keeps statistics of, by key: each column by its name, and each leaf
    inside struct columns (through structs only, of a type that keeps bounds, with a field id)
    by :func:`leaf_key`, each as its field (id included)."""
    out = {f.name: f for f in schema}
    for f in schema:
        if pa.types.is_struct(f.type):
            out |= {leaf_key(f.name, path): leaf for path, leaf in _struct_leaves(f.type)}
    return out


def _struct_leaves(t: pa.StructType) -> Sequence[tuple[tuple[str, ...], pa.Field]]:
    found: list[tuple[tuple[str, ...], pa.Field]] = []
    for child in (t.field(i) for i in range(t.num_fields)):
        if pa.types.is_struct(child.type):
            found += [((child.name, *path), leaf) for path, leaf in _struct_leaves(child.type)]
        elif supports_stats(child.type) and field_id(child) is not None:
            found.append(((child.name,), child))
    return found


def stats_to_json(stats: dict[str, ColumnStats]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, s in stats.items():
        entry: dict[str, Any] = {}
        if s.has_bounds:
            lo, hi = encode_value(s.min), encode_value(s.max)
            if lo is not None and hi is not None:
                entry["min"], entry["max"] = lo, hi
        if s.null_count is not None:
            entry["nulls"] = s.null_count
        if entry:
            out[name] = entry
    return out


def stats_from_json(doc: dict[str, dict[str, Any]], schema: pa.Schema) -> dict[str, ColumnStats]:
    """Statistics from their JSON form, for the keys of :func:`stat_fields` (others are left out)."""
    fields = stat_fields(schema)
    out = {}
    for name, entry in doc.items():
        if name not in fields:
            continue
        t = fields[name].type
        has = "min" in entry and "max" in entry
        out[name] = ColumnStats(
            min=decode_value(entry["min"], t) if has else None,
            max=decode_value(entry["max"], t) if has else None,
            null_count=entry.get("nulls"),
        )
    return out


def file_rows(metadata: pq.FileMetaData) -> int:
    """The rows of a Parquet file: the sum over its row groups, which is what readers decode
    (pyarrow, DuckDB). A file's own total can disagree with it (parquet-testing's
    ``repeated_no_annotation.parquet`` says 0 beside a row group of 6): castable counts by the
    row groups, wherever it takes a count from a footer."""
    return sum(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))


def row_group_stats(
    metadata: pq.FileMetaData,
    row_group: int,
    schema: pa.Schema,
    where: Mapping[str, str | None] | None = None,
    units: list[HeldUnit] | None = None,
) -> dict[str, ColumnStats]:
    """Statistics of one row group, from the Parquet footer, keyed as :func:`stat_fields` keys
    them: the top-level columns, and the leaves inside structs; ``where`` says which file column
    holds each column (default: the same name), and a leaf is found in it by its field id
    (``units``: :func:`held_units` of the file, when the caller has them already)."""
    rg = metadata.row_group(row_group)
    chunks = {rg.column(j).path_in_schema: j for j in range(rg.num_columns)}
    out: dict[str, ColumnStats] = {}
    for key, field, name, held in held_units(metadata, schema, where) if units is None else units:
        if name not in chunks:
            continue
        t = value_type(field.type)
        s = rg.column(chunks[name]).statistics
        if s is None:
            out[key] = ColumnStats(None, None, None)
            continue
        nulls = s.null_count if s.has_null_count else None
        lo = hi = None
        if supports_stats(t) and s.has_min_max:
            stored = value_type(held.type) if held is not None else t
            storage = _storage_type(stored)
            try:
                if storage is not None and s.physical_type in ("INT32", "INT64"):
                    # Dates and timestamps from their physical integers, in the file's own unit: pyarrow's
                    # ``min`` needs pandas for nanoseconds, and without it the statistics were lost.
                    lo, hi = (pa.scalar(v, type=storage).cast(stored).cast(t) for v in (s.min_raw, s.max_raw))
                else:
                    lo, hi = (pa.scalar(v, type=stored).cast(t) for v in (s.min, s.max))
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                lo = hi = None
        out[key] = ColumnStats(lo, hi, nulls)
    return out


HeldUnit = tuple[str, pa.Field, str, pa.Field | None]
"""A unit of :func:`stat_fields` in one file: its key, its field, the Parquet path of the column
chunk holding it, and the file's field (``None``: not known)."""


def held_units(metadata: pq.FileMetaData, schema: pa.Schema, where: Mapping[str, str | None] | None) -> list[HeldUnit]:
    """Each unit of :func:`stat_fields` the file of ``metadata`` holds (see :data:`HeldUnit`)."""
    file_schema = metadata.schema.to_arrow_schema()
    units = []
    held_names = file_schema.names
    for key, field in stat_fields(schema).items():
        column, *path = key.split(NESTED)
        name = column if where is None else where.get(column)
        if name is None:
            continue
        held = file_schema.field(name) if name in held_names else None
        names = [name]
        for step, wanted in zip(path, _ids_down(schema.field(column), path), strict=True):
            held = _child(held, step, wanted)
            if held is None:
                break
            names.append(held.name)
        else:
            units.append((key, field, ".".join(names), held))
    return units


def _ids_down(column: pa.Field, path: Sequence[str]) -> list[int | None]:
    """The field ids of the fields along ``path`` inside ``column``."""
    ids: list[int | None] = []
    t = column.type
    for step in path:
        child = t.field(step)
        ids.append(field_id(child))
        t = child.type
    return ids


def _child(held: pa.Field | None, name: str, wanted: int | None) -> pa.Field | None:
    """The field of struct ``held`` with id ``wanted`` (by ``name`` in a file without nested ids)."""
    if held is None or not pa.types.is_struct(held.type):
        return None
    fields = children(held.type)
    if any(field_id(f) is not None for f in fields):
        return next((f for f in fields if field_id(f) == wanted), None)
    return next((f for f in fields if f.name == name), None)


def merge(a: ColumnStats, b: ColumnStats) -> ColumnStats:
    """Statistics of the union of two units (a file from its row groups)."""
    lo = hi = None
    if a.has_bounds and b.has_bounds:
        lo = a.min if ordered(a.min) <= ordered(b.min) else b.min
        hi = a.max if ordered(a.max) >= ordered(b.max) else b.max
    nulls = None if a.null_count is None or b.null_count is None else a.null_count + b.null_count
    return ColumnStats(lo, hi, nulls)


def file_stats(
    metadata: pq.FileMetaData, schema: pa.Schema, where: Mapping[str, str | None] | None = None
) -> dict[str, ColumnStats]:
    """Per-column statistics of a whole file: the merge over its row groups."""
    merged: dict[str, ColumnStats] = {}
    units = held_units(metadata, schema, where)
    for i in range(metadata.num_row_groups):
        for name, s in row_group_stats(metadata, i, schema, where, units).items():
            merged[name] = merge(merged[name], s) if name in merged else s
    return merged
