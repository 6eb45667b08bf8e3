"""Sort orders: the order a table's writers and compaction put rows in within each file
(docs/format.md section 4.3), as Iceberg declares them.

An order is a list of fields, each a transform of a source column (Iceberg's transforms, as for
partitions), a direction and where nulls go. Rows are sorted within each file written (each
partition's, in a partitioned table), so row-group statistics and page indexes of a sorted
column are narrow, and a filter on it skips most of a file. Order 0 is always "unsorted"; a
new order takes the next id, and one with the same fields as an earlier one makes it the
default again. Each file records the order it was written with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from castable.errors import InvalidInputError
from castable.format.partitioning import Transform, source_field, source_values

Direction = Literal["asc", "desc"]
NullOrder = Literal["nulls-first", "nulls-last"]


@dataclass(frozen=True)
class SortField:
    """``transform`` of the column with id ``source_id``, in ``direction``, nulls where ``null_order`` says."""

    source_id: int
    transform: Transform
    direction: Direction = "asc"
    null_order: NullOrder = "nulls-first"

    def to_json(self) -> dict[str, Any]:
        return {
            "transform": str(self.transform),
            "source-id": self.source_id,
            "direction": self.direction,
            "null-order": self.null_order,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SortField:
        direction, nulls = str(doc["direction"]), str(doc["null-order"])
        if direction not in ("asc", "desc") or nulls not in ("nulls-first", "nulls-last"):
            raise ValueError(f"a sort field's direction and null order are {direction!r} and {nulls!r}")
        return cls(int(doc["source-id"]), Transform.parse(str(doc["transform"])), direction, nulls)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SortOrder:
    """An order as Iceberg writes it: its id and fields (none: unsorted)."""

    order_id: int = 0
    fields: tuple[SortField, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"order-id": self.order_id, "fields": [f.to_json() for f in self.fields]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SortOrder:
        return cls(int(doc["order-id"]), tuple(SortField.from_json(f) for f in doc.get("fields", ())))

    def sort(self, rows: pa.Table, schema: pa.Schema) -> pa.Table:
        """``rows`` (of the table's ``schema``) in this order (stable: ties keep their order)."""
        if not self.fields or rows.num_rows < 2:
            return rows
        keys: dict[str, pa.Array] = {}
        order: list[tuple[str, str]] = []
        for i, f in enumerate(self.fields):
            values = f.transform.apply(source_values(rows, schema, f.source_id))
            # nulls placed per field: a flag sorted first, as Arrow places nulls for all keys at once
            keys[f"n{i}"] = pc.is_valid(values) if f.null_order == "nulls-first" else pc.is_null(values)
            keys[f"v{i}"] = values
            order += [(f"n{i}", "ascending"), (f"v{i}", "ascending" if f.direction == "asc" else "descending")]
        indices = pc.sort_indices(pa.table(keys), sort_keys=order)
        return rows.take(indices)


UNSORTED = SortOrder()


def sort_described(f: SortField, schema: pa.Schema) -> str:
    """A field as people read it: ``day(ts) DESC NULLS LAST``."""
    column = source_field(schema, f.source_id).name
    shown = column if f.transform.name == "identity" else f"{f.transform}({column})"
    return f"{shown} {f.direction.upper()} {f.null_order.upper().replace('-', ' ')}"


def check_sort_sources(sorting: Sorting, schema: pa.Schema) -> None:
    """``InvalidInputError`` unless every source column of every sort order is in ``schema``."""
    for order in sorting.orders:
        for f in order.fields:
            try:
                source_field(schema, f.source_id)
            except InvalidInputError:
                raise InvalidInputError(
                    f"sort order {order.order_id} sorts by the column with id {f.source_id}: a column a sort "
                    "order uses cannot be dropped"
                ) from None


@dataclass(frozen=True)
class Sorting:
    """Every sort order a table has had and the one writes follow (order 0: unsorted)."""

    orders: tuple[SortOrder, ...] = (UNSORTED,)
    default_order_id: int = 0

    @property
    def default(self) -> SortOrder:
        return self.order(self.default_order_id)

    def order(self, order_id: int) -> SortOrder:
        for o in self.orders:
            if o.order_id == order_id:
                return o
        raise KeyError(f"no sort order {order_id}")

    def evolved(self, fields: Sequence[SortField], schema: pa.Schema) -> Sorting:
        """This sorting with ``fields`` as the default order: an earlier order of the same fields, or a new one."""
        for f in fields:
            column = source_field(schema, f.source_id)
            problem = f.transform.refusal(column.type)
            if problem is None and f.transform.name == "void":
                problem = "a void transform orders nothing"
            if problem is not None:
                raise InvalidInputError(f"cannot sort by {column.name!r}: {problem}")
        for o in self.orders:
            if o.fields == tuple(fields):
                return Sorting(self.orders, o.order_id)
        order = SortOrder(max(o.order_id for o in self.orders) + 1, tuple(fields))
        return Sorting((*self.orders, order), order.order_id)

    def to_json(self) -> dict[str, Any]:
        return {"orders": [o.to_json() for o in self.orders], "default_order_id": self.default_order_id}

    @classmethod
    def from_json(cls, doc: dict[str, Any] | None) -> Sorting:
        if doc is None:
            return cls()
        found = cls(tuple(SortOrder.from_json(o) for o in doc["orders"]), int(doc["default_order_id"]))
        found.order(found.default_order_id)
        if found.order(0).fields:
            raise ValueError("sort order 0 is not the unsorted order")
        return found
