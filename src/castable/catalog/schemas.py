"""Iceberg schemas as castable's: a new table's schema and primary key (its identifier
fields), and a client's new schema as the castable schema changes that make it, matched by
field id (castable's column ids are Iceberg's field ids); a client's partition spec as the
fields castable partitions by."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortOrder
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from castable.catalog.errors import BadRequestError
from castable.errors import InvalidInputError
from castable.format.evolution import SchemaUpdate, last_column_id
from castable.format.nested import nested_ids, with_nested_ids, without_nested_metadata
from castable.format.partitioning import Transform
from castable.format.sorting import SortField
from castable.iceberg.schema import iceberg_schema
from castable.inputs.partitions import FieldSpec


def arrow_schema(schema: Schema) -> tuple[pa.Schema, list[str]]:
    """The Arrow schema (field ids kept) and primary key columns of an Iceberg schema."""
    key = [schema.find_column_name(i) or "" for i in schema.identifier_field_ids]
    if any("." in k for k in key):
        raise BadRequestError(f"castable's primary key columns are top-level columns, not {key}")
    return schema_to_pyarrow(schema, include_field_ids=True), key


def partition_fields(spec: PartitionSpec) -> list[FieldSpec]:
    """The fields of an Iceberg partition spec as castable partitions by them (source ids are
    castable's column ids; a field keeps the name the client gave it)."""
    try:
        return [(f.source_id, Transform.parse(str(f.transform)), f.name) for f in spec.fields]
    except InvalidInputError as e:
        raise BadRequestError(str(e)) from None


def sort_fields(order: SortOrder) -> list[SortField]:
    """The fields of an Iceberg sort order as castable sorts by them (source ids are castable's column ids)."""
    try:
        return [
            SortField(f.source_id, Transform.parse(str(f.transform)), f.direction.value, f.null_order.value)
            for f in order.fields
        ]
    except InvalidInputError as e:
        raise BadRequestError(str(e)) from None


def _check_nested_ids(f: NestedField, column_id: int) -> int:
    """The last id inside new field ``f`` (id ``column_id``); ``BadRequestError`` unless its
    nested fields have the ids castable gives them, in Iceberg's order after the field's."""
    theirs = schema_to_pyarrow(f.field_type, include_field_ids=True)
    ids = iter(range(column_id + 1, column_id + 1 + len(nested_ids(theirs))))
    ours = with_nested_ids(without_nested_metadata(theirs), lambda: next(ids))
    if nested_ids(ours) != nested_ids(theirs):
        raise BadRequestError(
            f"the fields inside new field {f.name!r} have ids {nested_ids(theirs)}; castable gives them "
            f"{nested_ids(ours)}"
        )
    return max([column_id, *(i for i in nested_ids(ours) if i is not None)])


@dataclass
class _Diff:
    """The changes found between two schemas, by field id, in the order they are made: drops
    (paths in the old names), renames (each path in its ancestors' new names, parents first),
    adds (by the client's new ids), widenings and NULLs allowed (paths in the new names)."""

    drops: list[tuple[str, ...]] = field(default_factory=list)
    renames: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    adds: list[tuple[int, tuple[str, ...], NestedField]] = field(default_factory=list)
    widens: list[tuple[tuple[str, ...], pa.DataType]] = field(default_factory=list)
    nullable: list[tuple[str, ...]] = field(default_factory=list)
    reorders: list[tuple[tuple[str, ...], list[str]]] = field(default_factory=list)
    """Structs whose fields the client put in another order (paths and names new), inner ones last."""

    def struct(self, old_path: tuple[str, ...], path: tuple[str, ...], was: StructType, now: StructType) -> None:
        """The changes inside a struct (the schema itself at the path ``()``)."""
        old = {f.field_id: f for f in was.fields}
        new = {f.field_id: f for f in now.fields}
        self.drops += [(*old_path, f.name) for fid, f in old.items() if fid not in new]
        self.renames += [
            ((*path, old[fid].name), f.name) for fid, f in new.items() if fid in old and old[fid].name != f.name
        ]
        self.adds += [(fid, path, f) for fid, f in new.items() if fid not in old]
        kept = [f for f in now.fields if f.field_id in old]
        if path and [f.field_id for f in now.fields] != [fid for fid in old if fid in new] + [
            fid for fid in new if fid not in old
        ]:
            self.reorders.append((path, [f.name for f in now.fields]))
        for f in kept:
            self.field((*old_path, old[f.field_id].name), (*path, f.name), old[f.field_id], f)

    def field(self, old_path: tuple[str, ...], path: tuple[str, ...], was: NestedField, now: NestedField) -> None:
        if was.required and not now.required:
            self.nullable.append(path)
        elif now.required and not was.required:
            raise BadRequestError(f"{'.'.join(path)} cannot become required: its rows may hold NULL")
        self.type(old_path, path, was.field_type, now.field_type)

    def type(self, old_path: tuple[str, ...], path: tuple[str, ...], was: IcebergType, now: IcebergType) -> None:
        shown = ".".join(path)
        if was.is_primitive and now.is_primitive:
            if was != now:
                self.widens.append((path, schema_to_pyarrow(now)))
        elif isinstance(was, StructType) and isinstance(now, StructType):
            self.struct(old_path, path, was, now)
        elif isinstance(was, ListType) and isinstance(now, ListType) and was.element_id == now.element_id:
            if was.element_required and not now.element_required:
                self.nullable.append((*path, "element"))
            elif now.element_required and not was.element_required:
                raise BadRequestError(f"{shown}'s elements cannot become required: they may hold NULL")
            self.type((*old_path, "element"), (*path, "element"), was.element_type, now.element_type)
        elif (
            isinstance(was, MapType)
            and isinstance(now, MapType)
            and (was.key_id, was.value_id) == (now.key_id, now.value_id)
        ):
            if was.value_required and not now.value_required:
                self.nullable.append((*path, "value"))
            elif now.value_required and not was.value_required:
                raise BadRequestError(f"{shown}'s values cannot become required: they may hold NULL")
            self.type((*old_path, "key"), (*path, "key"), was.key_type, now.key_type)
            self.type((*old_path, "value"), (*path, "value"), was.value_type, now.value_type)
        else:
            raise BadRequestError(f"{shown} cannot change from {was} to {now}")


def schema_update(current: pa.Schema, primary_key: tuple[str, ...], wanted: Schema) -> SchemaUpdate[Any]:
    """The castable schema changes that make ``current`` into ``wanted``, found by field id at
    every depth: columns and fields inside structs dropped, renamed, added (under the ids
    castable gives them next, which must be the client's), widened and made optional, and
    columns and fields inside structs reordered; a list's element and a map's key and value
    widened, and made optional; the identifier fields set, changed or dropped as castable's
    primary key (a commit checks its live rows). Anything else is a ``BadRequestError``."""
    have = iceberg_schema(current, list(primary_key), 0)
    diff = _Diff()
    diff.struct((), (), have.as_struct(), wanted.as_struct())
    update: SchemaUpdate[Any] = SchemaUpdate()
    for path in diff.drops:
        update.drop_column(path)
    for path, name in diff.renames:
        update.rename_column(path, name)
    next_id = last_column_id(current)
    for fid, parent, f in sorted(diff.adds, key=lambda a: a[0]):
        next_id += 1
        if fid != next_id:
            raise BadRequestError(
                f"new field {'.'.join((*parent, f.name))!r} has id {fid}; castable gives it {next_id}"
            )
        if f.required:
            raise BadRequestError(f"a new field is optional: {f.name!r} is required, and older rows have no value")
        next_id = _check_nested_ids(f, next_id)
        update.add_column((*parent, f.name), schema_to_pyarrow(f.field_type))
    for path, t in diff.widens:
        update.widen_column(path, t)
    for path in diff.nullable:
        update.make_nullable(path)
    for path, names in diff.reorders:
        update.reorder(names, inside=path)
    old_ids = [f.field_id for f in have.fields]
    new_ids = [f.field_id for f in wanted.fields]
    made = [i for i in old_ids if i in new_ids] + [i for i in new_ids if i not in old_ids]  # adds come last
    if new_ids != made:
        update.reorder([f.name for f in wanted.fields])
    if sorted(wanted.identifier_field_ids) != sorted(have.identifier_field_ids):  # by id: a renamed key is the key
        key = [wanted.find_column_name(i) or "" for i in wanted.identifier_field_ids]
        if key:
            update.set_primary_key(key)
        else:
            update.drop_primary_key()
    return update
