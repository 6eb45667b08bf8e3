"""Iceberg schemas as castable's: a new table's schema and primary key (its identifier
fields), and a client's new schema as the castable schema changes that make it, matched by
field id (castable's column ids are Iceberg's field ids)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField

from castable.catalog.errors import BadRequestError, UnsupportedError
from castable.format.evolution import SchemaUpdate, last_column_id
from castable.format.nested import nested_ids, with_nested_ids, without_nested_metadata
from castable.iceberg.schema import iceberg_schema


def arrow_schema(schema: Schema) -> tuple[pa.Schema, list[str]]:
    """The Arrow schema (field ids kept) and primary key columns of an Iceberg schema."""
    key = [schema.find_column_name(i) or "" for i in schema.identifier_field_ids]
    if any("." in k for k in key):
        raise BadRequestError(f"castable's primary key columns are top-level columns, not {key}")
    return schema_to_pyarrow(schema, include_field_ids=True), key


def _check_nested_ids(f: NestedField, column_id: int) -> int:
    """The last id inside new column ``f`` (id ``column_id``); ``BadRequestError`` unless its
    nested fields have the ids castable gives them, in Iceberg's order after the column's."""
    theirs = schema_to_pyarrow(f.field_type, include_field_ids=True)
    ids = iter(range(column_id + 1, column_id + 1 + len(nested_ids(theirs))))
    ours = with_nested_ids(without_nested_metadata(theirs), lambda: next(ids))
    if nested_ids(ours) != nested_ids(theirs):
        raise BadRequestError(
            f"the fields inside new column {f.name!r} have ids {nested_ids(theirs)}; castable gives them "
            f"{nested_ids(ours)}"
        )
    return max([column_id, *(i for i in nested_ids(ours) if i is not None)])


def schema_update(current: pa.Schema, primary_key: tuple[str, ...], wanted: Schema) -> SchemaUpdate[Any]:
    """The castable schema changes that make ``current`` into ``wanted``: columns dropped,
    renamed, added (under the ids castable gives them next, which must be the client's),
    widened, made optional and reordered. Anything else is a ``BadRequestError``."""
    have = iceberg_schema(current, list(primary_key), 0)
    if sorted(wanted.identifier_field_ids) != sorted(have.identifier_field_ids):  # by id: a renamed key is the key
        key = [wanted.find_column_name(i) for i in wanted.identifier_field_ids]
        raise BadRequestError(f"the identifier fields are castable's primary key {list(primary_key)}, not {key}")
    old = {f.field_id: f for f in have.fields}
    new = {f.field_id: f for f in wanted.fields}
    update: SchemaUpdate[Any] = SchemaUpdate()
    for fid, f in old.items():
        if fid not in new:
            update.drop_column(f.name)
    for fid, f in new.items():
        if fid in old and old[fid].name != f.name:
            update.rename_column(old[fid].name, f.name)
    next_id = last_column_id(current)
    for fid, f in new.items():
        if fid in old:
            continue
        next_id += 1
        if fid != next_id:
            raise BadRequestError(f"new column {f.name!r} has field id {fid}; castable gives it {next_id}")
        if f.required:
            raise BadRequestError(f"a new column is optional: {f.name!r} is required, and older rows have no value")
        next_id = _check_nested_ids(f, next_id)
        update.add_column(f.name, schema_to_pyarrow(f.field_type))
    for fid, f in new.items():
        was = old.get(fid)
        if was is None:
            continue
        if was.field_type != f.field_type and (not was.field_type.is_primitive or not f.field_type.is_primitive):
            raise UnsupportedError(
                f"column {f.name!r}: castable does not yet change the fields inside a nested column "
                f"({was.field_type} to {f.field_type}); add a new column instead"
            )
        if was.field_type != f.field_type:
            update.widen_column(f.name, schema_to_pyarrow(f.field_type))
        if was.required and not f.required:
            update.make_nullable(f.name)
        elif f.required and not was.required:
            raise BadRequestError(f"column {f.name!r} cannot become required: its rows may hold NULL")
    made = [fid for fid in old if fid in new] + [fid for fid in new if fid not in old]  # adds come last
    if list(new) != made:
        update.reorder([f.name for f in wanted.fields])
    return update
