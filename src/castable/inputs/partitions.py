"""Partition fields as users write them: ``day(ts)``, ``bucket(16, id)``, ``truncate(4, name)``,
``region`` (docs/guides/partitioning.md).

Spark's and Trino's spellings are taken as well (``days(ts)``, ``hours(ts)``...), and a column may
be a field inside a struct (``payload.user_id``) or quoted (``"event time"``). What comes out is
what :meth:`castable.format.partitioning.Partitioning.evolved` takes: source field ids and transforms.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa

from castable.errors import InvalidInputError
from castable.format.nested import children, field_id
from castable.format.partitioning import Transform
from castable.inputs.names import parse_path

_CALL = re.compile(r"^\s*([A-Za-z_]+)\s*\((.*)\)\s*$", re.DOTALL)
_WIDTH = re.compile(r"^\s*(\d+)\s*,(.*)$", re.DOTALL)
_NAMES = {
    "identity": "identity",
    "year": "year",
    "years": "year",
    "month": "month",
    "months": "month",
    "day": "day",
    "days": "day",
    "date": "day",
    "hour": "hour",
    "hours": "hour",
    "bucket": "bucket",
    "truncate": "truncate",
    "void": "void",
}
_FORMS = "a column, identity(c), year(c), month(c), day(c), hour(c), bucket(N, c), truncate(W, c) or void(c)"

FieldSpec = tuple[int, Transform, str | None]
"""A partition field as :meth:`Partitioning.evolved` takes it: source field id, transform, name
(``None``: Iceberg's default name)."""
PartitionBy = str | Sequence[str | FieldSpec]
"""What ``partition_by`` takes: fields as users write them, or resolved already (a catalog's)."""


def parse_partition_by(items: PartitionBy, schema: pa.Schema) -> list[FieldSpec]:
    """Each of ``items`` as a :data:`FieldSpec` (one given as one is taken as it is)."""
    return [
        item if isinstance(item, tuple) else parse_field(item, schema)
        for item in ([items] if isinstance(items, str) else items)
    ]


def parse_field(item: str, schema: pa.Schema) -> FieldSpec:
    if not isinstance(item, str) or not item.strip():
        raise InvalidInputError(f"a partition field is a string such as 'day(ts)', not {item!r}")
    call = _CALL.match(item)
    if call is None or call.group(1).lower() not in _NAMES:
        return _source_id(item, schema), Transform("identity"), None
    name, inside = _NAMES[call.group(1).lower()], call.group(2)
    width = None
    if name in ("bucket", "truncate"):
        sized = _WIDTH.match(inside)
        if sized is None or int(sized.group(1)) < 1:
            raise InvalidInputError(f"{item!r}: {name} takes a positive width and a column, as in {name}(16, id)")
        width, inside = int(sized.group(1)), sized.group(2)
    return _source_id(inside, schema), Transform(name, width), None


def _source_id(text: str, schema: pa.Schema) -> int:
    """The field id of the column (or struct field) ``text`` names."""
    path, end = parse_path(text)
    if text[end:].strip():
        raise InvalidInputError(f"{text.strip()!r} is not a partition field ({_FORMS})")
    names = (path,) if isinstance(path, str) else path
    fields = list(schema)
    found: pa.Field | None = None
    for name in names:
        found = next((f for f in fields if f.name == name), None)
        if found is None:
            joined = ".".join(names)
            hint = f' (a column named {joined!r} is quoted: "{joined}")' if joined in schema.names else ""
            raise InvalidInputError(f"cannot partition by {text.strip()!r}: no such column or field{hint}")
        fields = children(found.type) if pa.types.is_struct(found.type) else []
    assert found is not None
    fid = field_id(found)
    if fid is None:
        raise InvalidInputError("a partitioned table needs field ids: upgrade the table first (castable upgrade)")
    return fid
