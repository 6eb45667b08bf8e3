"""Partition specs: Iceberg's transforms, the values they give each row, and the specs a table has had
(docs/format.md section 4.2).

Partitioning is hidden, as in Iceberg: a spec names source columns (by field id) and a transform
of each, every row's partition values are computed from its columns, and no user ever writes a
partition column. castable's writer puts the rows of one partition in files of their own and
records each file's spec id and partition values, so a scan rules files out by them before it
reads any statistics. A spec never changes: evolving the partitioning adds a spec, the new one
becomes the default, and files keep the spec they were written with.

The transforms are Iceberg's, value for value (the spec's "Partition Transforms" and "Appendix B:
32-bit Hash Requirements"): ``bucket[N]`` hashes Iceberg's single-value serialization with
Murmur3 (x86, 32-bit, seed 0), ``truncate[W]`` keeps ``v - (v mod W)`` of numbers and the first
``W`` code points of text, ``year``, ``month``, ``day`` and ``hour`` count from 1970-01-01 00:00
UTC. Values keep the JSON form of statistics (``castable.format.stats``), binary values as hex.
"""

from __future__ import annotations

import datetime as dt
import re
import struct
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from castable.errors import InvalidInputError
from castable.format.entries import DataFile
from castable.format.nested import children, field_id
from castable.format.stats import JsonValue, decode_values, encode_values

FIRST_FIELD_ID = 1000
"""Partition field ids start here, as Iceberg's do (above any column id a table may use first)."""

_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1}
_DAY = 86_400_000_000
_HOUR = 3_600_000_000
_TEMPORAL = ("year", "month", "day", "hour")
_SIMPLE = ("identity", "void", *_TEMPORAL)
_DERIVED = ("void", "bucket", *_TEMPORAL)
"""Transforms whose values are not the data's own, which a partition's folder may name."""
_ICEBERG = re.compile(r"^(bucket|truncate)\[(\d+)\]$")
_SUFFIX = {"bucket": "bucket", "truncate": "trunc", "year": "year", "month": "month", "day": "day", "hour": "hour"}
_FOLDER_LIMIT = 200
"""The longest ``name=value`` folder of a partition path: a local file system holds names of 255 bytes."""
_PATH_LIMIT = 512
"""The longest partition path: S3 keys hold 1,024 bytes, and the table's prefix comes before it."""


@dataclass(frozen=True)
class Transform:
    """One of Iceberg's partition transforms: ``name`` and, for ``bucket`` and ``truncate``, its ``width``."""

    name: str
    width: int | None = None

    @classmethod
    def parse(cls, text: str) -> Transform:
        """Iceberg's string form: ``identity``, ``bucket[16]``, ``truncate[4]``, ``day``..."""
        if text in _SIMPLE:
            return cls(text)
        found = _ICEBERG.match(text)
        if found is None or int(found.group(2)) < 1:
            raise InvalidInputError(
                f"{text!r} is not a partition transform (identity, year, month, day, hour, bucket[N], "
                "truncate[W] or void)"
            )
        return cls(found.group(1), int(found.group(2)))

    def __str__(self) -> str:
        return self.name if self.width is None else f"{self.name}[{self.width}]"

    def refusal(self, source: pa.DataType) -> str | None:
        """Why this transform cannot apply to a column of type ``source`` (``None``: it can)."""
        ok = {
            "identity": _primitive(source),
            "void": True,
            "bucket": _hashable(source),
            "truncate": pa.types.is_integer(source)
            or pa.types.is_decimal(source)
            or _text(source)
            or pa.types.is_binary(source)
            or pa.types.is_large_binary(source),
            "year": pa.types.is_date32(source) or pa.types.is_timestamp(source),
            "month": pa.types.is_date32(source) or pa.types.is_timestamp(source),
            "day": pa.types.is_date32(source) or pa.types.is_timestamp(source),
            "hour": pa.types.is_timestamp(source),
        }[self.name]
        return None if ok else f"the {self} transform does not apply to a column of type {source}"

    def result_type(self, source: pa.DataType) -> pa.DataType:
        """The type of this transform's values for a column of type ``source``."""
        if self.name in ("identity", "truncate", "void"):
            return source
        return pa.int32()

    def apply(self, values: pa.Array) -> pa.Array:
        """Each value's partition value (a null stays null; ``void`` gives only nulls)."""
        t = values.type
        if self.name == "identity":
            return values
        if self.name == "void":
            return pa.nulls(len(values), t)
        if self.name == "bucket":
            return _bucket(values, self.width or 1)
        if self.name == "truncate":
            return _truncate(values, self.width or 1)
        if self.name == "day" and pa.types.is_date32(t):
            return values.cast(pa.int32())
        if self.name in ("day", "hour"):
            micros, valid = _micros(values)
            out = np.floor_divide(micros, _DAY if self.name == "day" else _HOUR)
            return pa.array(out.astype(np.int32), mask=~valid)
        naive = _naive(values)
        years = pc.subtract(pc.year(naive), 1970)
        if self.name == "month":
            years = pc.add(pc.multiply(years, 12), pc.subtract(pc.month(naive), 1))
        return years.cast(pa.int32())

    def bounds(self, value: JsonValue | None, source: pa.DataType) -> tuple[Any, Any] | None:
        """The least and greatest values (JSON-encoded, of the source's type) a row of partition
        value ``value`` can hold, where this transform tells them; ``None`` where it does not."""
        if value is None or self.name in ("bucket", "void"):
            return None
        if self.name == "identity":
            return (value, value) if _primitive(source) and not _binary(source) else None
        if self.name == "truncate":
            width = self.width or 1
            if not pa.types.is_integer(source) or not isinstance(value, int):
                return None
            greatest = 2 ** (source.bit_width - (1 if pa.types.is_signed_integer(source) else 0)) - 1
            if value <= greatest - width + 1:
                return value, value + width - 1
            return None  # a value near the greatest may be one a value near the least wrapped to
        assert isinstance(value, int)
        if self.name in ("year", "month"):
            months = value * 12 if self.name == "year" else value
            step = 12 if self.name == "year" else 1
            first, after = _month_start(months), _month_start(months + step)
            if pa.types.is_date32(source):
                return first, after - 1
            return _in_unit(first * _DAY, source), _in_unit(after * _DAY, source) - 1
        if pa.types.is_date32(source):
            return value, value
        size = _DAY if self.name == "day" else _HOUR
        return _in_unit(value * size, source), _in_unit((value + 1) * size, source) - 1


@dataclass(frozen=True)
class PartitionField:
    """One field of a spec: ``transform`` of the column with id ``source_id``, named ``name``."""

    source_id: int
    field_id: int
    name: str
    transform: Transform

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transform": str(self.transform),
            "source-id": self.source_id,
            "field-id": self.field_id,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PartitionField:
        return cls(
            int(doc["source-id"]), int(doc["field-id"]), str(doc["name"]), Transform.parse(str(doc["transform"]))
        )


@dataclass(frozen=True)
class PartitionSpec:
    """A spec as Iceberg writes it: its id and fields (none: not partitioned)."""

    spec_id: int = 0
    fields: tuple[PartitionField, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"spec-id": self.spec_id, "fields": [f.to_json() for f in self.fields]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PartitionSpec:
        return cls(int(doc["spec-id"]), tuple(PartitionField.from_json(f) for f in doc.get("fields", ())))

    def values(self, rows: pa.Table, schema: pa.Schema) -> list[pa.Array]:
        """Each field's partition value of every row of ``rows`` (of the table's ``schema``)."""
        return [f.transform.apply(source_values(rows, schema, f.source_id)) for f in self.fields]

    def same_fields(self, other: PartitionSpec) -> bool:
        """Whether both partition alike (the same fields), whatever their spec ids."""
        return self.fields == other.fields

    def path(self, values: Sequence[JsonValue | None]) -> str:
        """The folders a partition's files go in, named as Iceberg's writers name them
        (``ts_day=2026-12-04/id_bucket=3``): one per field, up to the first whose values are the
        data's own (identity, truncate), which an object's key would keep after an erasure of
        them; ``""`` where no field comes before that, or where the path would be longer than a
        file system or S3 holds (the files then lie with unpartitioned ones)."""
        folders = []
        for f, v in zip(self.fields, values, strict=True):
            if f.transform.name not in _DERIVED:
                break
            try:
                folders.append(f"{_escape(f.name)}={_escape(human(v, f.transform))}")
            except OverflowError:  # a day past year 9999, which Python's datetime does not hold
                return ""
        path = "/".join(folders)
        if any(len(f.encode()) > _FOLDER_LIMIT for f in folders) or len(path.encode()) > _PATH_LIMIT:
            return ""
        return path


UNPARTITIONED = PartitionSpec()


@dataclass(frozen=True)
class Partitioning:
    """Every spec a table has had, the one new files are written with, and the highest partition
    field id given (never given again, as Iceberg's ``last-partition-id``). Spec 0 is always the
    unpartitioned spec, so that a file without partition values (registered from another engine,
    say) is a file of spec 0 in any table; a table created partitioned has its spec as spec 1."""

    specs: tuple[PartitionSpec, ...] = (UNPARTITIONED,)
    default_spec_id: int = 0
    last_field_id: int = FIRST_FIELD_ID - 1

    @property
    def default(self) -> PartitionSpec:
        return self.spec(self.default_spec_id)

    @property
    def partitioned(self) -> bool:
        """Whether any spec, the current one or an older one, has fields."""
        return any(s.fields for s in self.specs)

    def spec(self, spec_id: int) -> PartitionSpec:
        for s in self.specs:
            if s.spec_id == spec_id:
                return s
        raise KeyError(f"no partition spec {spec_id}")

    def evolved(self, fields: Sequence[tuple[int, Transform, str | None]], schema: pa.Schema) -> Partitioning:
        """This partitioning with a new default spec of ``fields`` (source id, transform, name or
        ``None`` for Iceberg's default name); a field as an earlier spec had it keeps its id, as in
        Iceberg, and an existing spec of the same fields becomes the default again."""
        earlier = {(f.source_id, f.transform): f for s in self.specs for f in s.fields}
        last = self.last_field_id
        built = []
        for source_id, transform, name in fields:
            column = source_field(schema, source_id)
            problem = transform.refusal(column.type)
            if problem is not None:
                raise InvalidInputError(f"cannot partition by {column.name!r}: {problem}")
            known = earlier.get((source_id, transform))
            if known is not None and (name is None or name == known.name):
                built.append(known)
                continue
            last += 1
            built.append(PartitionField(source_id, last, name or default_name(column.name, transform), transform))
        if len({(f.source_id, f.transform) for f in built}) != len(built):
            raise InvalidInputError("a partition spec cannot hold the same transform of one column twice")
        names = [f.name for f in built]
        if len(set(names)) != len(names):
            raise InvalidInputError(f"partition field names must differ: {names}")
        wanted = PartitionSpec(0, tuple(built))
        for s in self.specs:
            if s.same_fields(wanted):
                return Partitioning(self.specs, s.spec_id, max(last, self.last_field_id))
        spec = PartitionSpec(max(s.spec_id for s in self.specs) + 1, tuple(built))
        return Partitioning((*self.specs, spec), spec.spec_id, last)

    def to_json(self) -> dict[str, Any]:
        return {
            "specs": [s.to_json() for s in self.specs],
            "default_spec_id": self.default_spec_id,
            "last_field_id": self.last_field_id,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any] | None) -> Partitioning:
        if doc is None:
            return cls()
        specs = tuple(PartitionSpec.from_json(s) for s in doc["specs"])
        found = cls(specs, int(doc["default_spec_id"]), int(doc["last_field_id"]))
        found.spec(found.default_spec_id)
        if found.spec(0).fields:
            raise ValueError("partition spec 0 is not the unpartitioned spec")
        return found


def misplaced(f: DataFile, spec: PartitionSpec, schema: pa.Schema) -> str | None:
    """Why file ``f`` cannot be in the partition it names (``None``: its statistics allow it):
    a column's bounds outside what a field's value tells, or values in a column whose partition
    value is null. Only what statistics show is checked (not ``bucket``, nor fields inside structs)."""
    for f_field, value in zip(spec.fields, f.partition, strict=True):
        column = source_field(schema, f_field.source_id)
        stats = f.stats.get(column.name) if column.name in schema.names else None
        if stats is None or f_field.transform.name == "void":
            continue
        if value is None:
            if stats.get("nulls") is not None and stats["nulls"] < f.rows:
                return f"{f_field.name} is null, and {column.name!r} holds values"
            continue
        bounds = f_field.transform.bounds(value, column.type)
        exact = (
            pa.types.is_integer(column.type) or pa.types.is_date32(column.type) or pa.types.is_timestamp(column.type)
        )
        if bounds is None or "min" not in stats or not (exact or _text(column.type)):
            continue
        if stats["min"] < bounds[0] or stats["max"] > bounds[1]:
            return (
                f"{f_field.name} is {value!r}, and {column.name!r} holds values from {stats['min']!r} to "
                f"{stats['max']!r}, outside that partition"
            )
    return None


def check_sources(partitioning: Partitioning, schema: pa.Schema) -> None:
    """``InvalidInputError`` unless every source column of every spec is in ``schema`` (as in
    Iceberg, a column a spec partitions by, the current one or an older one, cannot be dropped)."""
    for spec in partitioning.specs:
        for f in spec.fields:
            if _source_path(schema, f.source_id) is None:
                raise InvalidInputError(
                    f"partition spec {spec.spec_id} partitions by the column with id {f.source_id} ({f.name} = "
                    f"{f.transform}(...)): a column a partition spec uses cannot be dropped"
                )


def default_name(column: str, transform: Transform) -> str:
    """Iceberg's name for a partition field: the column's for identity, else ``column_<transform>``."""
    if transform.name == "identity":
        return column
    if transform.name == "void":
        return f"{column}_null"
    return f"{column}_{_SUFFIX[transform.name]}"


def described(f: PartitionField, schema: pa.Schema) -> str:
    """A field as people read it: ``ts_day = day(ts)``."""
    return f"{f.name} = {f.transform}({source_field(schema, f.source_id).name})"


def source_field(schema: pa.Schema, source_id: int) -> pa.Field:
    """The column (or struct field) with id ``source_id``; ``InvalidInputError`` if none holds primitives."""
    path = _source_path(schema, source_id)
    if path is None:
        raise InvalidInputError(f"no column of the table has field id {source_id} (or it is inside a list or map)")
    return path[-1]


def source_values(rows: pa.Table, schema: pa.Schema, source_id: int) -> pa.Array:
    """The values of the column (or struct field) with id ``source_id`` in ``rows``."""
    path = _source_path(schema, source_id)
    assert path is not None
    values: pa.Array = rows.column(path[0].name).combine_chunks()
    for f in path[1:]:
        values = pc.struct_field(values, f.name)
    return values


def _source_path(schema: pa.Schema, source_id: int) -> list[pa.Field] | None:
    """The fields from a column down to the one with id ``source_id``, through structs only."""

    def walk(fields: Sequence[pa.Field]) -> Iterator[list[pa.Field]]:
        for f in fields:
            if field_id(f) == source_id:
                yield [f]
            elif pa.types.is_struct(f.type):
                for below in walk(children(f.type)):
                    yield [f, *below]

    return next(walk(list(schema)), None)


def split(
    rows: pa.Table, spec: PartitionSpec, schema: pa.Schema
) -> list[tuple[tuple[JsonValue | None, ...], pa.Table]]:
    """``rows`` cut into one table per partition of ``spec`` (with each partition's values, in
    JSON form), in order of first appearance, each keeping its rows' order."""
    if not spec.fields or not rows.num_rows:
        return [((), rows)] if rows.num_rows else []
    values = spec.values(rows, schema)
    codes = np.stack(
        [pc.dictionary_encode(v, null_encoding="encode").indices.to_numpy(zero_copy_only=False) for v in values], axis=1
    )
    _, first, inverse, counts = np.unique(codes, axis=0, return_index=True, return_inverse=True, return_counts=True)
    grouped = np.argsort(inverse.reshape(-1), kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    keys = zip(
        *(encode_partition(v.take(pa.array(first)), f) for v, f in zip(values, spec.fields, strict=True)), strict=True
    )
    by_group = dict(enumerate(keys))
    groups = [
        (tuple(by_group[g]), rows.take(pa.array(grouped[starts[g] : starts[g] + counts[g]]))) for g in np.argsort(first)
    ]
    return groups


def encode_partition(values: pa.Array, f: PartitionField) -> list[JsonValue | None]:
    """Partition values of field ``f`` in their JSON form (binary as hex)."""
    if _binary(values.type):
        return [None if v is None else v.hex() for v in values.to_pylist()]
    return encode_values(values)


def decode_partition(values: Sequence[JsonValue | None], f: PartitionField, schema: pa.Schema) -> pa.Array:
    """Partition values of field ``f`` from their JSON form, in the transform's result type."""
    t = f.transform.result_type(source_field(schema, f.source_id).type)
    if _binary(t):
        return pa.array([None if v is None else bytes.fromhex(str(v)) for v in values], t)
    return decode_values(values, t)


def human(value: JsonValue | None, transform: Transform) -> str:
    """A value of a derived partition field (:data:`_DERIVED`) as Iceberg's ``toHumanString``
    writes it: ``null``, a bucket's number, a year, ``2026-12``, ``2026-12-04``, ``2026-12-04-17``."""
    if value is None:
        return "null"
    assert isinstance(value, int)
    if transform.name in _TEMPORAL:
        if transform.name == "year":
            return f"{1970 + value:04d}"
        if transform.name == "month":
            year, month = divmod(value, 12)
            return f"{1970 + year:04d}-{month + 1:02d}"
        if transform.name == "day":
            return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
        return (dt.datetime(1970, 1, 1) + dt.timedelta(hours=value)).isoformat("-", "hours")
    return str(value)


def _escape(text: str) -> str:
    """``text`` as one folder name, form-encoded as Iceberg's writers encode it (Java's
    ``URLEncoder``, pyiceberg's ``quote_plus``): a space as ``+``, every byte but letters, digits
    and ``-_.~`` percent-escaped."""
    return urllib.parse.quote_plus(text, safe="")


def _primitive(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t) or pa.types.is_null(t))


def _text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))


def _hashable(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_date32(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_time(t)
        or pa.types.is_decimal(t)
        or _text(t)
        or _binary(t)
    )


def _micros(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds since the epoch of dates or timestamps, or since midnight of times (floor, for
    nanoseconds), and which are valid."""
    t = values.type
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_date32(t):
        return values.cast(pa.int32()).fill_null(0).to_numpy().astype(np.int64) * _DAY, valid
    raw = values.cast(pa.int64()).fill_null(0).to_numpy()
    if t.unit == "ns":
        return np.floor_divide(raw, 1000), valid
    return raw * _MICROS[t.unit], valid


def _naive(values: pa.Array) -> pa.Array:
    """Dates as they are, timestamps as UTC wall-clock times (Iceberg counts years and months in UTC)."""
    if pa.types.is_timestamp(values.type) and values.type.tz is not None:
        return values.cast(pa.int64()).cast(pa.timestamp(values.type.unit))
    return values


def _month_start(months: int) -> int:
    """Days since 1970-01-01 of the first day of month ``months`` (months since 1970-01)."""
    year, month = divmod(months, 12)
    return (dt.date(1970 + year, month + 1, 1) - dt.date(1970, 1, 1)).days


def _in_unit(micros: int, source: pa.DataType) -> int:
    """Microseconds as a count of the timestamp type's unit (rounded up, so a bound stays inside)."""
    if source.unit == "ns":
        return micros * 1000
    return -(-micros // _MICROS[source.unit])


def _hash_bytes(value: Any, t: pa.DataType) -> bytes:
    """Iceberg's single-value serialization that ``bucket`` hashes."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes):
        return value
    if isinstance(value, Decimal):
        unscaled = int(value.scaleb(t.scale))
        length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        return unscaled.to_bytes(length, "big", signed=True)
    return struct.pack("<q", value)


def _bucket(values: pa.Array, n: int) -> pa.Array:
    """Iceberg's ``bucket[n]``: Murmur3 of each distinct value, hashed once."""
    import mmh3

    t = values.type
    if pa.types.is_date32(t):
        values = values.cast(pa.int32()).cast(pa.int64())  # days, hashed as a long
    elif pa.types.is_time(t) or pa.types.is_timestamp(t):
        micros, valid = _micros(values)
        values = pa.array(micros, mask=~valid)
    encoded = pc.dictionary_encode(values)
    hashes = [(mmh3.hash(_hash_bytes(v, t), 0, signed=True) & 0x7FFFFFFF) % n for v in encoded.dictionary.to_pylist()]
    return pa.array(hashes, pa.int32()).take(encoded.indices)


def _truncate(values: pa.Array, width: int) -> pa.Array:
    """Iceberg's ``truncate[width]``: numbers down to a multiple of ``width``, text and bytes cut."""
    t = values.type
    if _text(t):
        return pc.utf8_slice_codeunits(values, 0, width)
    if _binary(t):
        return pc.binary_slice(values, 0, width)
    if pa.types.is_decimal(t):
        out: list[Decimal | None] = []
        for v in values.to_pylist():
            if v is None:
                out.append(None)
                continue
            unscaled = int(v.scaleb(t.scale))
            out.append(Decimal(unscaled - unscaled % width).scaleb(-t.scale))
        return pa.array(out, t)
    raw = values.cast(pa.int64()).fill_null(0).to_numpy()
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    with np.errstate(over="ignore"):  # wrapping at the type's least value, as Java's and Rust's do
        truncated = (raw - np.mod(raw, width)).astype(t.to_pandas_dtype())
    return pa.array(truncated, type=t, mask=~valid)
