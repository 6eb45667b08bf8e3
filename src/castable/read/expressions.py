"""SQL value expressions evaluated on Arrow columns: the new values of an update or a merge, and
the conditions of merge clauses.

``parse_value("amount * 1.1", schema)`` gives a :class:`Value` that computes a column from a
table of rows with pyarrow compute (checked arithmetic, so an overflow is an error rather than a
wrapped number). Supported: literals and NULL, columns (``t.amount`` when the rows' columns are
named with an alias prefix), ``+ - * /``, ``||``, comparisons, ``AND OR NOT``, ``IS [NOT] NULL``,
``IN (...)``, ``CASE WHEN``, ``COALESCE``, ``UPPER``/``LOWER``/``TRIM``/``LENGTH``/``ABS``,
``CAST(x AS type)``, ``CURRENT_DATE`` and ``CURRENT_TIMESTAMP``. A text literal next to a value
of another type (``event_date = '2026-11-21'``) is read as that type, as in a predicate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from castable.errors import InvalidInputError, columns_hint
from castable.format.stats import value_type
from castable.read.values import Evaluate


@dataclass(frozen=True)
class Value:
    """A checked expression: ``evaluate(rows)`` gives one value per row."""

    text: str
    type: pa.DataType
    _evaluate: Evaluate

    def evaluate(self, rows: pa.Table) -> pa.ChunkedArray:
        try:
            result = self._evaluate(rows)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise InvalidInputError(f"cannot compute {self.text!r}: {_arrow_problem(e)}") from None
        if isinstance(result, pa.Scalar):
            return pa.chunked_array([pa.repeat(result, rows.num_rows)], type=result.type)
        return result if isinstance(result, pa.ChunkedArray) else pa.chunked_array([result], type=result.type)

    def mask(self, rows: pa.Table) -> pa.ChunkedArray:
        """A condition's value per row, NULL read as false (SQL's WHERE)."""
        return pc.fill_null(self.evaluate(rows), False)


def parse_value(value: object, schema: pa.Schema, *, what: str = "value", like: pa.DataType | None = None) -> Value:
    """``value`` (SQL text, an Arrow expression, or a Python literal) checked against rows of
    ``schema``: every column known and every operation defined for its types. A value that is
    a text literal alone is read as type ``like`` (``'2026-11-21'`` for a date column)."""
    import pyarrow.dataset as ds  # imported where used: it imports pandas, when installed

    if isinstance(value, pc.Expression):
        expression = value
        text, evaluate = str(value), lambda rows: ds.dataset(rows).to_table(columns={"v": expression}).column("v")
    elif isinstance(value, str):
        if not value.strip():
            raise InvalidInputError(f"the {what} is empty")
        from castable.read.sql_value import compile_value

        text, evaluate = value, compile_value(value, schema, what, datetime.now(UTC), like)
    else:
        try:
            scalar = pa.scalar(value)
        except (pa.ArrowException, TypeError) as e:
            raise InvalidInputError(f"{value!r} is not a value castable can store: {e}") from None
        text, evaluate = repr(value), lambda rows: scalar
    probe = Value(text, pa.null(), evaluate).evaluate(schema.empty_table())
    return Value(text, probe.type, evaluate)


def assign(value: Value, rows: pa.Table, field: pa.Field) -> pa.ChunkedArray:
    """``value`` computed for ``rows`` as a column of ``field``'s type, cast without loss."""
    result = value.evaluate(rows)
    try:
        return result.cast(field.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise InvalidInputError(f"{value.text!r} does not fit column {field.name!r} ({field.type}): {e}") from None


def check_assignable(value: Value, field: pa.Field) -> None:
    """Refuse a value whose type cannot become the column's without changing its meaning."""
    source, target = value_type(value.type), value_type(field.type)
    if not _assignable(source, target):
        raise InvalidInputError(
            f"column {field.name!r} is {field.type}, and {value.text!r} gives {value.type}; "
            "write a value of the column's type (or CAST it)"
        )


def _assignable(source: pa.DataType, target: pa.DataType) -> bool:
    if source == target or pa.types.is_null(source):
        return True
    kinds: Sequence[Callable[[pa.DataType], bool]] = (
        pa.types.is_string,
        pa.types.is_large_string,
        pa.types.is_binary,
        pa.types.is_boolean,
        pa.types.is_date,
        pa.types.is_time,
    )
    if any(kind(source) and kind(target) for kind in kinds):
        return True
    if pa.types.is_integer(source):
        return bool(pa.types.is_integer(target) or pa.types.is_floating(target) or pa.types.is_decimal(target))
    if pa.types.is_floating(source) or pa.types.is_decimal(source):
        return bool(pa.types.is_floating(target) or pa.types.is_decimal(target))
    if pa.types.is_timestamp(source) or pa.types.is_date(source):
        return bool(pa.types.is_timestamp(target))
    return False


def _arrow_problem(error: Exception) -> str:
    message = str(error).splitlines()[0]
    return re.sub(r"^Function '(\w+)' has no kernel matching input types", r"\1 is not defined for", message)


@dataclass(frozen=True)
class Assignments:
    """Checked SET clauses: the new value of each named column of a table."""

    values: dict[str, Value]

    @classmethod
    def parse(
        cls, values: Mapping[str, object], table: pa.Schema, *, rows: pa.Schema | None = None, key: str | None = None
    ) -> Assignments:
        """``values`` by column of ``table``, computed from rows of ``rows`` (default: ``table``);
        the primary key ``key`` is never set."""
        if not isinstance(values, Mapping) or not values:
            raise InvalidInputError("give at least one column to set, as {column: SQL expression}")
        checked = {}
        for name, value in values.items():
            if name not in table.names:
                raise InvalidInputError(f"cannot set unknown column {name!r} {columns_hint(name, table.names)}")
            if name == key:
                raise InvalidInputError(f"cannot set the primary key {key!r}: delete the row and insert another")
            field = table.field(name)
            parsed = parse_value(value, table if rows is None else rows, what=f"the value of {name!r}", like=field.type)
            check_assignable(parsed, field)
            checked[name] = parsed
        return cls(checked)

    def apply(self, rows: pa.Table, into: pa.Table) -> pa.Table:
        """``into`` (rows of the table) with the assigned columns computed from ``rows`` (the
        same rows, as the expressions see them); every value sees the row before the change."""
        computed = {name: assign(value, rows, into.schema.field(name)) for name, value in self.values.items()}
        for name, column in computed.items():
            into = into.set_column(into.schema.get_field_index(name), into.schema.field(name), column)
        return into
