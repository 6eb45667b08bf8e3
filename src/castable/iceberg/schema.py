"""A castable schema as an Iceberg schema, and whether Iceberg readers read a data file as
castable does.

castable's column ids are Iceberg field ids (``PARQUET:field_id`` in the manifest schema and in
every file castable writes), so renames, drops and re-added names read correctly by id. What
Iceberg v2 cannot say is refused, naming the column, rather than published to read wrong:
nested columns (castable gives ids to top-level columns only), nanosecond timestamps, unsigned
integers, and a column default that files written before the column would have to supply.
"""

from __future__ import annotations

import json

import pyarrow as pa
from pyiceberg.io.pyarrow import pyarrow_to_schema
from pyiceberg.schema import Schema

from castable.errors import CastableError
from castable.evolution import default_of, field_id, file_schema, names_of, with_ids


class IcebergPublishError(CastableError):
    """The version cannot be published as Iceberg metadata that reads exactly its rows."""


def iceberg_schema(schema: pa.Schema, primary_key: list[str], schema_id: int) -> Schema:
    """``schema`` (a version's) with castable's ids, its primary key as identifier field (if
    the column is NOT NULL, as Iceberg requires of identifier fields)."""
    schema = with_ids(schema)  # a table of format 1 has none: the ids its first schema change gives
    for f in schema:
        t = f.type
        if pa.types.is_nested(t):
            raise IcebergPublishError(
                f"column {f.name!r} is nested ({t}): castable gives ids to top-level columns only"
            )
        if pa.types.is_unsigned_integer(t):
            raise IcebergPublishError(f"column {f.name!r} is {t}: Iceberg has no unsigned integers")
        if pa.types.is_timestamp(t) and t.unit == "ns":
            raise IcebergPublishError(f"column {f.name!r} is {t}: Iceberg v2 stores timestamps in microseconds")
    try:
        converted = pyarrow_to_schema(file_schema(schema), format_version=2)
    except (ValueError, TypeError) as e:
        raise IcebergPublishError(f"the schema has no Iceberg form: {e}") from e
    required = {f.name: f.field_id for f in converted.fields if f.required}
    return Schema(  # Iceberg's identifier fields must be required: a nullable key column is not one
        *converted.fields,
        schema_id=schema_id,
        identifier_field_ids=[required[k] for k in primary_key if k in required],
    )


def name_mapping(schema: pa.Schema) -> str:
    """``schema.name-mapping.default``: every name each column has had, so Iceberg readers find
    the columns of files written without ids (registered files) as castable does."""
    named = with_ids(schema)
    return json.dumps([{"field-id": field_id(f), "names": sorted({n for n, _ in names_of(f)})} for f in named])


def check_file(path: str, file: pa.Schema, schema: pa.Schema, found: dict[str, str | None]) -> None:
    """Refuse a data file (footer schema ``file``) whose rows Iceberg readers would read other
    than castable does: ``found`` is where castable finds each column in it."""
    ids = {fid: f.name for f in file if (fid := field_id(f)) is not None}
    for f in schema:
        source = found[f.name]
        if source is None:
            if default_of(f) is not None:
                raise IcebergPublishError(
                    f"data file {path} predates column {f.name!r}, whose default Iceberg v2 readers would read "
                    "as NULL: compact the table first"
                )
            continue
        if ids and ids.get(field_id(f) or -1) != source:
            raise IcebergPublishError(
                f"data file {path} holds column {f.name!r} as {source!r} under another field id: "
                "Iceberg readers would not find it"
            )
    if not ids:
        owners: dict[str, int | None] = {}
        for f in schema:
            for n, _ in names_of(f):
                if owners.setdefault(n, field_id(f)) != field_id(f):
                    raise IcebergPublishError(
                        f"data file {path} has no field ids and the name {n!r} has belonged to two columns"
                    )
