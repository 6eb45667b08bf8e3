"""Sort fields as users write them, in SQL's words: ``ts``, ``id DESC``, ``name ASC NULLS LAST``,
``day(ts) DESC NULLS FIRST`` (a column or a transform of one, as :mod:`castable.inputs.partitions`
reads them). A field without a direction is ascending; without a null order, nulls come first
when ascending and last when descending, as in Spark and Iceberg.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa

from castable.errors import InvalidInputError
from castable.format.sorting import SortField
from castable.inputs.partitions import parse_field

_SUFFIX = re.compile(r"^(.*?)(?:\s+(ASC|DESC))?(?:\s+NULLS\s+(FIRST|LAST))?\s*$", re.IGNORECASE | re.DOTALL)

SortBy = str | Sequence[str | SortField]
"""What ``sort_by`` takes: fields as users write them, or resolved already (a catalog's)."""


def parse_sort_by(items: SortBy, schema: pa.Schema) -> list[SortField]:
    """Each of ``items`` as a :class:`SortField` (one given as one is taken as it is)."""
    listed = [items] if isinstance(items, str) else items
    return [item if isinstance(item, SortField) else parse_sort_field(item, schema) for item in listed]


def parse_sort_field(item: str, schema: pa.Schema) -> SortField:
    found = _SUFFIX.match(item) if isinstance(item, str) else None
    if found is None or not found.group(1).strip():
        raise InvalidInputError(f"a sort field is a string such as 'ts DESC NULLS LAST', not {item!r}")
    source_id, transform, _ = parse_field(found.group(1), schema)
    descending = (found.group(2) or "asc").lower() == "desc"
    first = (found.group(3) or ("last" if descending else "first")).lower() == "first"
    return SortField(source_id, transform, "desc" if descending else "asc", "nulls-first" if first else "nulls-last")
