"""Table schemas: their JSON form in the manifest, and checking written data against them (docs/format.md section 4)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from castable.errors import CorruptObjectError, SchemaMismatchError, columns_hint
from castable.format.conversions import convert, refusal, same_values
from castable.format.evolution import LAST_ID, check_ids, field_id


def schema_to_json(schema: pa.Schema) -> dict[str, Any]:
    """The manifest form: the Arrow IPC schema (authoritative) plus a readable column list."""
    return {
        "arrow": base64.b64encode(_kept_metadata(schema).serialize().to_pybytes()).decode(),
        "columns": [_column(f) for f in schema],
    }


def _kept_metadata(schema: pa.Schema) -> pa.Schema:
    """The schema without metadata other engines put there (pandas'), but with the highest column
    id ever given, so a dropped column's id is never given again after the manifest is read."""
    last = (schema.metadata or {}).get(LAST_ID)
    bare = schema.remove_metadata()
    return bare if last is None else bare.with_metadata({LAST_ID: last})


def _column(f: pa.Field) -> dict[str, Any]:
    """A column as the manifest's readable copy lists it (its id, in a table that has ids)."""
    doc: dict[str, Any] = {"name": f.name, "type": str(f.type), "nullable": f.nullable}
    fid = field_id(f)
    if fid is not None:
        doc["id"] = fid
    return doc


def schema_from_json(doc: dict[str, Any]) -> pa.Schema:
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(doc["arrow"])))
        check_ids(schema)
    except (KeyError, TypeError, ValueError, pa.ArrowException) as e:
        raise CorruptObjectError(f"manifest schema is malformed: {e}") from None
    return schema


def conform(data: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table | pa.RecordBatch:
    """Return ``data`` with the table's column order, types and field metadata, or raise.

    Column order may differ, a nullable input field may feed a non-nullable column if it holds
    no nulls, and a column of another type is converted where no value changes
    (:mod:`castable.format.conversions`); anything else is an error, never a silent cast.
    """
    problems = _mismatch(data.schema, schema, refusal)
    if problems:
        raise SchemaMismatchError("data does not match the table schema: " + "; ".join(problems))
    columns = [convert(data.column(f.name), f.name, f.type) for f in schema]
    for f, col in zip(schema, columns, strict=True):
        if not f.nullable and col.null_count:
            raise SchemaMismatchError(f"column {f.name!r} is not nullable but has {col.null_count} nulls")
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, schema=schema)
    return pa.Table.from_arrays(columns, schema=schema)


def describe_mismatch(actual: pa.Schema, expected: pa.Schema) -> list[str]:
    """Human-readable differences between two schemas, ignoring order, nullability and the
    layout of text and bytes (what a file must hold to be registered as it is)."""
    return _mismatch(actual, expected, _other_values)


def _other_values(name: str, actual: pa.DataType, expected: pa.DataType) -> str | None:
    return None if same_values(actual, expected) else f"column {name!r} is {actual}, expected {expected}"


def _mismatch(
    actual: pa.Schema, expected: pa.Schema, type_problem: Callable[[str, pa.DataType, pa.DataType], str | None]
) -> list[str]:
    """Missing, unknown and repeated columns, and what ``type_problem`` says of each column's type."""
    problems = []
    names = set(actual.names)
    if len(names) != len(actual.names):
        problems.append("duplicate column names")
    for f in expected:
        if f.name not in names:
            problems.append(f"missing column {f.name!r} ({f.type})")
        elif (problem := type_problem(f.name, actual.field(f.name).type, f.type)) is not None:
            problems.append(problem)
    extra = sorted(names - set(expected.names))
    if extra:
        problems.append(f"unknown columns {extra} {columns_hint(extra, expected.names)}")
    return problems
