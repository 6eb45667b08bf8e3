"""A castable schema as an Iceberg schema, and whether Iceberg readers read a data file as
castable does.

castable's column ids are Iceberg field ids (``PARQUET:field_id`` in the manifest schema and in
every file castable writes), so renames, drops and re-added names read correctly by id. What
Iceberg v2 cannot say is refused, naming the column, rather than published to read wrong:
nested fields without ids (a table's nested columns made before castable gave them ids, until
its next schema change gives them theirs), unsigned integers, 16-bit floats,
nanosecond timestamps, times not in microseconds (seconds and milliseconds timestamps are
written in microseconds, Iceberg's unit, and instants in UTC), durations, decimals past 38 digits, a widening v2
does not promote (date to timestamp), a column default that files written before the column
would have to supply, and a file without ids whose names now belong to other columns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache

import pyarrow as pa
from pyiceberg.io.pyarrow import UnsupportedPyArrowTypeException, pyarrow_to_schema
from pyiceberg.schema import Schema
from pyiceberg.types import DecimalType, DoubleType, FloatType, IcebergType, IntegerType, LongType

from castable.errors import CastableError
from castable.format.evolution import FIELD_ID, default_of, field_id, file_schema, names_of, stored_type, with_ids
from castable.format.nested import children, nested_fields, nested_ids


class IcebergPublishError(CastableError):
    """The version cannot be published as Iceberg metadata that reads exactly its rows."""


def iceberg_schema(schema: pa.Schema, primary_key: list[str], schema_id: int) -> Schema:
    """``schema`` (a version's) with castable's ids, its primary key as identifier field (if
    the column is NOT NULL, as Iceberg requires of identifier fields)."""
    schema = with_ids(schema)  # a table of format 1 has none: the ids its first schema change gives
    converted = pyarrow_to_schema(
        file_schema(pa.schema([f.with_type(_as_stored(f)) for f in schema])), format_version=2
    )
    required = {f.name: f.field_id for f in converted.fields if f.required}
    return Schema(  # Iceberg's identifier fields must be required: a nullable key column is not one
        *converted.fields,
        schema_id=schema_id,
        identifier_field_ids=[required[k] for k in primary_key if k in required],
    )


def _as_stored(f: pa.Field) -> pa.DataType:
    """The type of ``f`` as its Parquet files hold it, where Iceberg v2 has that type; else
    ``IcebergPublishError`` naming the column and why."""
    t = f.type
    refused = _refusal(t)
    if refused is None and None in nested_ids(t):
        refused = "its nested fields have no ids yet (any schema change gives them theirs: castable alter)"
    if refused is not None:
        raise IcebergPublishError(f"column {f.name!r} is {t}: {refused}")
    if pa.types.is_date64(t):  # Parquet holds dates as days whatever Arrow's unit
        return pa.date32()
    return stored_type(t)  # castable's files: times in microseconds, instants in UTC, nested fields likewise


def _refusal(t: pa.DataType) -> str | None:
    """Why Iceberg v2 readers cannot read a column of type ``t`` as castable does (``None``:
    they can); for a nested column, the first of its fields that they cannot."""
    inner = children(t)
    if pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        for c in inner:
            why = _refusal(c.type)
            if why is not None:
                return f"its field {c.name!r} is {c.type}: {why}"
        return None
    if inner:
        return "Iceberg has no fixed-size or view lists (cast it to a list)"
    return _leaf_refusal(t)


@lru_cache(maxsize=256)
def _leaf_refusal(t: pa.DataType) -> str | None:
    """Why Iceberg v2 readers cannot read a value of primitive type ``t`` as castable does."""
    if pa.types.is_unsigned_integer(t):
        return "Iceberg has no unsigned integers"
    if pa.types.is_float16(t):
        return "Iceberg has no 16-bit float (widen it to float32, then compact the table)"
    if (pa.types.is_timestamp(t) and t.unit == "ns") or (pa.types.is_time(t) and t.unit != "us"):
        return "Iceberg v2 stores times and timestamps in microseconds"
    if pa.types.is_duration(t) or pa.types.is_interval(t):
        return "Iceberg has no duration type"
    if pa.types.is_null(t):
        return "Iceberg v2 has no null type"
    if pa.types.is_decimal(t) and (t.precision > 38 or not pa.types.is_decimal128(t)):
        return "Iceberg decimals are decimal128, of 38 digits at most"
    try:
        _iceberg_type(stored_type(t))
    except (ValueError, TypeError, UnsupportedPyArrowTypeException) as e:
        return f"it has no Iceberg type ({e})"
    return None


@lru_cache(maxsize=256)
def _iceberg_type(t: pa.DataType) -> IcebergType:
    """The Iceberg type pyiceberg reads an Arrow type as."""
    field = pa.field("c", t, metadata={FIELD_ID: b"1"})
    return pyarrow_to_schema(pa.schema([field]), format_version=2).fields[0].field_type


def _promotes(old: IcebergType, new: IcebergType) -> bool:
    """Whether Iceberg v2 reads a file's ``old`` column as ``new``: the same type, int to long,
    float to double, or a decimal of more digits at the same scale."""
    if old == new:
        return True
    if isinstance(new, DecimalType) and isinstance(old, DecimalType):
        return old.scale == new.scale and old.precision <= new.precision
    return (isinstance(old, IntegerType) and isinstance(new, LongType)) or (
        isinstance(old, FloatType) and isinstance(new, DoubleType)
    )


def name_mapping(schema: pa.Schema) -> str:
    """``schema.name-mapping.default``: the names Iceberg readers find the columns of files
    written without ids by (registered files). One name maps to one field id, as Java Iceberg
    requires: a column's current name is always its own; a name it had before is listed only if
    no other column has ever had it (a name used again after a rename, or two swapped names,
    belong to their current owners)."""
    mapped = mapped_names(schema)
    return json.dumps(
        [
            {"field-id": fid, "names": sorted(n for n, i in mapped.items() if i == fid)}
            for fid in (field_id(f) for f in with_ids(schema))
        ]
    )


def mapped_names(schema: pa.Schema) -> dict[str, int | None]:
    """Each name of :func:`name_mapping` and the field id it maps to."""
    named = with_ids(schema)
    had: dict[str, set[int | None]] = {}
    for f in named:
        for n, _ in names_of(f):
            had.setdefault(n, set()).add(field_id(f))
    mapped: dict[str, int | None] = {}
    for f in named:
        mapped.update({n: field_id(f) for n, _ in names_of(f) if had[n] == {field_id(f)}})
        mapped[f.name] = field_id(f)
    return mapped


def check_file(path: str, file: pa.Schema, schema: pa.Schema, found: dict[str, str | None]) -> None:
    """Refuse a data file (footer schema ``file``) whose rows Iceberg readers would read other
    than castable does: ``found`` is where castable finds each column in it."""
    ids = {fid: f.name for f in file if (fid := field_id(f)) is not None}
    for held in file:  # readers convert a file's whole schema, columns since dropped included
        refused = _refusal(held.type)
        if refused is not None:
            raise IcebergPublishError(
                f"data file {path} holds column {held.name!r} as {held.type}: {refused}; once the column is dropped "
                "or widened, compact the table to rewrite the file"
            )
    for f in schema:
        source = found[f.name]
        if source is None:
            if default_of(f) is not None:
                raise IcebergPublishError(
                    f"data file {path} predates column {f.name!r}, whose default Iceberg v2 readers would read "
                    "as NULL: compact the table first"
                )
            continue
        fid = field_id(f)
        if ids and ids.get(-1 if fid is None else fid) != source:
            raise IcebergPublishError(
                f"data file {path} holds column {f.name!r} as {source!r} under another field id: "
                "Iceberg readers would not find it"
            )
        held = file.field(source).type
        if children(f.type):
            _check_nested(path, f, held)
        elif held != f.type:
            _check_promotion(path, f, held)
    misread = None if ids else maps_otherwise(file, schema, found, mapped_names(schema))
    if misread is not None:
        raise IcebergPublishError(
            f"data file {path} has no field ids, and Iceberg readers would find its column {misread!r} "
            "under a column castable does not read it as (its name now belongs to another column): "
            "compact the table to rewrite it with ids"
        )


def maps_otherwise(
    file: pa.Schema, schema: pa.Schema, found: Mapping[str, str | None], mapped: Mapping[str, int | None]
) -> str | None:
    """A column of a data file without field ids (footer schema ``file``) that the name mapping
    (``mapped``, :func:`mapped_names` of ``schema``) gives another column than castable reads it
    as (``found``: where castable finds each of ``schema``'s columns in the file); ``None`` if
    none, or if the file has ids. Readers find such a file's columns through the mapping,
    castable by the names the columns had when the file was added."""
    if any(field_id(f) is not None for f in file):
        return None
    read = {found[f.name]: field_id(n) for f, n in zip(schema, with_ids(schema), strict=True)}
    return next((held.name for held in file if mapped.get(held.name) != read.get(held.name)), None)


def _check_nested(path: str, f: pa.Field, held: pa.DataType) -> None:
    """Refuse a data file whose nested column ``f`` (held as ``held``) Iceberg readers would
    read otherwise than castable: fields without ids (written before the table gave them ids,
    or by another writer), or a field whose type the table widened further than v2 promotes.
    Fields added or dropped since the file was written are found by id, as castable does."""
    if None in nested_ids(held):
        raise IcebergPublishError(
            f"data file {path} holds nested column {f.name!r} without the ids of its fields (it was written "
            "before they had ids, or by another writer): Iceberg readers would not find them; compact the "
            "table to rewrite it"
        )
    had = {i: t for i, t in _leaf_types(held)}
    for fid, t in _leaf_types(f.type):
        old = had.get(fid)
        if old is not None and not old.equals(t) and not _promotes(_iceberg_type(old), _iceberg_type(t)):
            raise IcebergPublishError(
                f"data file {path} holds a field of {f.name!r} as {old}, which Iceberg v2 readers cannot read as "
                f"{t} (v2 promotes int to long, float to double and decimal precision only): compact the table"
            )


def _leaf_types(t: pa.DataType) -> list[tuple[int | None, pa.DataType]]:
    """The id and the type, as Iceberg sees it, of each primitive field inside nested type ``t``."""
    return [(field_id(c), stored_type(c.type)) for c in nested_fields(t) if not children(c.type)]


def _check_promotion(path: str, f: pa.Field, held: pa.DataType) -> None:
    """Refuse a data file that holds column ``f`` as ``held`` (a type ``check_file`` found
    Iceberg has), where Iceberg v2 readers cannot read ``held`` as the column's type (castable
    widens more than v2 promotes: date to timestamp, for example)."""
    old, new = _iceberg_type(_as_stored(f.with_type(held))), _iceberg_type(_as_stored(f))
    if not _promotes(old, new):
        raise IcebergPublishError(
            f"data file {path} holds column {f.name!r} as {held}, which Iceberg v2 readers cannot read as {f.type} "
            "(v2 promotes int to long, float to double and decimal precision only): compact the table to "
            "rewrite its files in the column's type"
        )
