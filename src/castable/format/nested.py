"""Field ids inside nested columns (docs/format.md section 4.1): every field of a struct, the
element of a list and the key and value of a map has an id, as in Iceberg, kept as
``PARQUET:field_id`` in the Arrow child field's metadata (pyarrow writes it into Parquet
files as the nested field's id).

Ids are given as Iceberg gives them (``TypeUtil.assignFreshIds``, pyiceberg's
``assign_fresh_schema_ids``): the fields of a struct take the next ids in order, then the
types of those fields are visited, each in turn; a list's element, a map's key then its
value, likewise. A column's nested ids follow the ids of the columns given with it, so a new
table ``id, payload struct<user struct<id, name>, tags list<string>>`` has ``id`` 1,
``payload`` 2, ``user`` 3, ``tags`` 4, ``user.id`` 5, ``user.name`` 6, the element of
``tags`` 7."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa

FIELD_ID = b"PARQUET:field_id"


def field_id(f: pa.Field) -> int | None:
    """The id of field ``f`` (a column, or a field inside one); ``None`` if it has none."""
    raw = (f.metadata or {}).get(FIELD_ID)
    return None if raw is None else int(raw)


def children(t: pa.DataType) -> list[pa.Field]:
    """The fields directly inside type ``t`` (none for a primitive)."""
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if _is_list(t):
        return [t.value_field]
    return []


def _is_list(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    )


def rebuilt(t: pa.DataType, fields: list[pa.Field]) -> pa.DataType:
    """Type ``t`` with ``fields`` (as :func:`children` lists them) in place of its own."""
    if pa.types.is_struct(t):
        return pa.struct(fields)
    if pa.types.is_map(t):
        return pa.map_(fields[0], fields[1], keys_sorted=t.keys_sorted)
    if pa.types.is_fixed_size_list(t):
        return pa.list_(fields[0], t.list_size)
    make = {
        pa.types.is_list: pa.list_,
        pa.types.is_large_list: pa.large_list,
        pa.types.is_list_view: pa.list_view,
        pa.types.is_large_list_view: pa.large_list_view,
    }
    return next(m for test, m in make.items() if test(t))(fields[0])


def nested_fields(t: pa.DataType) -> Iterator[pa.Field]:
    """Every field inside ``t``, at any depth."""
    for f in children(t):
        yield f
        yield from nested_fields(f.type)


def nested_ids(t: pa.DataType) -> list[int | None]:
    """The ids of every field inside ``t`` (``None`` for one without)."""
    return [field_id(f) for f in nested_fields(t)]


def with_nested_ids(t: pa.DataType, next_id: Callable[[], int]) -> pa.DataType:
    """``t`` with an id on every field inside it that has none, taken from ``next_id`` in
    Iceberg's order; fields that have one keep it."""
    inner = children(t)
    if not inner:
        return t
    ids = [fid if (fid := field_id(f)) is not None else next_id() for f in inner]
    fields = [
        f.with_type(with_nested_ids(f.type, next_id)).with_metadata({**(f.metadata or {}), FIELD_ID: str(i).encode()})
        for f, i in zip(inner, ids, strict=True)
    ]
    return rebuilt(t, fields)


def without_nested_metadata(t: pa.DataType) -> pa.DataType:
    """``t`` with no metadata on the fields inside it: the type as a scan returns it."""
    inner = children(t)
    if not inner or not any(f.metadata for f in nested_fields(t)):
        return t
    return rebuilt(t, [f.remove_metadata().with_type(without_nested_metadata(f.type)) for f in inner])
