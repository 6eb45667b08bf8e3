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
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from castable.errors import InvalidInputError
from castable.format.stats import value_type
from castable.read.predicate import coerce_literal, columns_named, parse_problem

Datum: TypeAlias = pa.Array | pa.ChunkedArray | pa.Scalar
_Eval = Callable[[pa.Table], Datum]

_BINARY: dict[type[exp.Expr], str] = {
    exp.Add: "add_checked",
    exp.Sub: "subtract_checked",
    exp.Mul: "multiply_checked",
    exp.Div: "divide_checked",
    exp.EQ: "equal",
    exp.NEQ: "not_equal",
    exp.LT: "less",
    exp.LTE: "less_equal",
    exp.GT: "greater",
    exp.GTE: "greater_equal",
    exp.And: "and_kleene",
    exp.Or: "or_kleene",
}
_UNARY: dict[type[exp.Expr], str] = {
    exp.Neg: "negate_checked",
    exp.Not: "invert",
    exp.Upper: "utf8_upper",
    exp.Lower: "utf8_lower",
    exp.Trim: "utf8_trim_whitespace",
    exp.Length: "utf8_length",
    exp.Abs: "abs_checked",
}
_SQL_TYPES: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "VARCHAR": pa.string(),
    "TEXT": pa.string(),
    "CHAR": pa.string(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us"),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
}


@dataclass(frozen=True)
class Value:
    """A checked expression: ``evaluate(rows)`` gives one value per row."""

    text: str
    type: pa.DataType
    _evaluate: _Eval

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
    if isinstance(value, pc.Expression):
        expression = value
        text, evaluate = str(value), lambda rows: ds.dataset(rows).to_table(columns={"v": expression}).column("v")
    elif isinstance(value, str):
        if not value.strip():
            raise InvalidInputError(f"the {what} is empty")
        text = value
        try:
            tree = sqlglot.parse_one(value)
        except SqlglotError as e:
            raise InvalidInputError(f"cannot parse {what} {value!r}: {parse_problem(e)}") from None
        compiler = _Compiler(schema, value, what, datetime.now(UTC))
        evaluate = compiler.typed_literal(tree, like) if like is not None else compiler.compile(tree)
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


class _Compiler:
    """sqlglot tree -> a function of the rows, resolving columns by ``schema``."""

    def __init__(self, schema: pa.Schema, text: str, what: str, now: datetime) -> None:
        self.schema = schema
        self.text = text
        self.what = what
        self.now = now

    def fail(self, message: str) -> InvalidInputError:
        return InvalidInputError(f"{message} in {self.what}: {self.text}")

    def compile(self, node: exp.Expr) -> _Eval:
        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, exp.Column):
            name = self.column(node)
            return lambda rows: rows.column(name)
        if isinstance(node, exp.Null):
            return lambda rows: pa.scalar(None)
        if isinstance(node, exp.Boolean):
            flag = pa.scalar(bool(node.this))
            return lambda rows: flag
        if isinstance(node, exp.Literal):
            return self.literal(node)
        if isinstance(node, exp.CurrentTimestamp):
            moment = pa.scalar(self.now, type=pa.timestamp("us", tz="UTC"))
            return lambda rows: moment
        if isinstance(node, exp.CurrentDate):
            today = pa.scalar(self.now.date())
            return lambda rows: today
        if isinstance(node, exp.DPipe | exp.Concat):
            parts = [self.compile(p) for p in (node.expressions if isinstance(node, exp.Concat) else node.flatten())]
            return lambda rows: pc.binary_join_element_wise(*(_text(p(rows)) for p in parts), "")
        if type(node) in _BINARY:
            return self.binary(_BINARY[type(node)], node.this, node.expression)
        if isinstance(node, exp.Not) and isinstance(node.this, exp.Is):
            inner = self.compile(node.this)
            return lambda rows: pc.invert(inner(rows))
        if type(node) in _UNARY:
            function, operand = _UNARY[type(node)], self.compile(node.this)
            return lambda rows: pc.call_function(function, [operand(rows)])
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise self.fail("only IS NULL / IS NOT NULL are supported")
            operand = self.compile(node.this)
            return lambda rows: pc.is_null(operand(rows))
        if isinstance(node, exp.In):
            return self.in_list(node)
        if isinstance(node, exp.Coalesce):
            parts = [self.compile(p) for p in [node.this, *node.expressions]]
            return lambda rows: pc.coalesce(*_aligned([p(rows) for p in parts]))
        if isinstance(node, exp.Case):
            return self.case(node)
        if isinstance(node, exp.Cast):
            return self.cast(node)
        raise self.fail(f"unsupported expression {node.sql()!r}")

    def typed_literal(self, node: exp.Expr, like: pa.DataType) -> _Eval:
        """``node``, a text literal read as ``like`` (any other expression as it is)."""
        if not (isinstance(node, exp.Literal) and node.is_string) or pa.types.is_string(value_type(like)):
            return self.compile(node)
        try:
            scalar = coerce_literal(node.this, value_type(like))
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            raise self.fail(f"{node.sql()} is not a valid {like} value") from None
        return lambda rows: scalar

    def column(self, node: exp.Column) -> str:
        name = f"{node.table}.{node.name}" if node.table else node.name
        found = columns_named(name, self.schema.names)
        if not found and not node.table:  # an alias left out: s.qty or t.qty
            found = [n for n in self.schema.names if n.lower().endswith("." + name.lower())]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise self.fail(f"column {name!r} is ambiguous (write one of {', '.join(found)})")
        hint = f"; a text value needs single quotes: '{node.name}'" if not node.table else ""
        raise self.fail(f"unknown column {name!r} (columns: {', '.join(self.schema.names)}){hint}")

    def literal(self, node: exp.Expr) -> _Eval:
        value = node.to_py()
        scalar = pa.scalar(value)
        return lambda rows: scalar

    def binary(self, function: str, left: exp.Expr, right: exp.Expr) -> _Eval:
        lhs, rhs = self.compile(left), self.compile(right)

        def evaluate(rows: pa.Table) -> Datum:
            a, b = _aligned([lhs(rows), rhs(rows)])
            return pc.call_function(function, [a, b])

        return evaluate

    def in_list(self, node: exp.In) -> _Eval:
        if node.args.get("query") is not None:
            raise self.fail("subqueries are not supported")
        operand = self.compile(node.this)
        values = [self.compile(v) for v in node.expressions]

        def evaluate(rows: pa.Table) -> Datum:
            column = operand(rows)
            items = [v(rows) for v in values]
            if not all(isinstance(i, pa.Scalar) for i in items):
                raise pa.ArrowInvalid("IN takes a list of values")
            options = pa.array([_like(i, column.type).as_py() for i in items], type=column.type)
            return pc.is_in(column, value_set=options)

        return evaluate

    def case(self, node: exp.Case) -> _Eval:
        if node.this is not None:
            raise self.fail("write CASE WHEN <condition> THEN ... (CASE <value> WHEN is not supported)")
        branches = [(self.compile(w.this), self.compile(w.args["true"])) for w in node.args.get("ifs", [])]
        default = self.compile(node.args["default"]) if node.args.get("default") is not None else None

        def evaluate(rows: pa.Table) -> Datum:
            conditions = [pc.fill_null(_array(c(rows), rows.num_rows), False) for c, _ in branches]
            results = [v(rows) for _, v in branches] + ([default(rows)] if default is not None else [])
            names = [str(i) for i in range(len(conditions))]
            chosen = pa.StructArray.from_arrays(conditions, names)
            return pc.case_when(chosen, *(_array(r, rows.num_rows) for r in _aligned(results)))

        return evaluate

    def cast(self, node: exp.Cast) -> _Eval:
        to = node.to
        if to.this == exp.DataType.Type.DECIMAL:
            precision, scale = (int(p.this.this) for p in to.expressions) if to.expressions else (38, 9)
            target: pa.DataType = pa.decimal128(precision, scale)
        elif to.this.name in _SQL_TYPES:
            target = _SQL_TYPES[to.this.name]
        else:
            raise self.fail(f"unsupported type {to.sql()!r} in CAST")
        operand = self.compile(node.this)
        return lambda rows: _like(operand(rows), target)


def _like(value: Datum, target: pa.DataType) -> Datum:
    """``value`` as ``target``: a text literal parsed as the type, anything else cast."""
    if isinstance(value, pa.Scalar) and pa.types.is_string(value.type) and not pa.types.is_string(target):
        return coerce_literal(value.as_py(), target)
    if isinstance(value, pa.Scalar) and pa.types.is_null(value.type):
        return pa.scalar(None, type=target)
    return value.cast(target)


def _aligned(values: list[Datum]) -> list[Datum]:
    """Text literals and NULLs among ``values`` typed as the first value that is neither."""
    typed = [v.type for v in values if not _loose(v)]
    if not typed:
        return values
    return [_like(v, typed[0]) if _loose(v) else v for v in values]


def _loose(value: Datum) -> bool:
    return isinstance(value, pa.Scalar) and (pa.types.is_null(value.type) or pa.types.is_string(value.type))


def _text(value: Datum) -> Datum:
    return value if pa.types.is_string(value.type) or pa.types.is_large_string(value.type) else value.cast(pa.string())


def _array(value: Datum, rows: int) -> pa.Array:
    """``value`` as one array of ``rows`` values (a scalar repeated)."""
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, rows)
    return value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value


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
                raise InvalidInputError(f"cannot set unknown column {name!r} (columns: {', '.join(table.names)})")
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
