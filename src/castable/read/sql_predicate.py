"""SQL predicate text parsed by sqlglot into a :class:`Predicate` of a table's schema.

Columns are resolved as SQL resolves them (exact name first, else ignoring case) and literals are
typed by the column they are compared with, a lossy conversion refused; only what castable can
evaluate on statistics and rows is accepted (comparisons, ``BETWEEN``, ``IN``, ``IS [NOT] NULL``,
``[I]LIKE``, ``AND``/``OR``/``NOT``), anything else refused with where and why.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import SqlglotError

from castable.errors import InvalidPredicateError, columns_hint
from castable.format.stats import compared_type, value_type
from castable.read.predicate import And, Compare, Constant, InList, IsNull, Like, Not, Or, Predicate
from castable.read.sql_dialect import parse_sql
from castable.read.values import coerce_literal, columns_named

_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def predicate_from_sql(text: str, schema: pa.Schema) -> Predicate:
    """``text``, a SQL boolean expression, as a checked predicate on rows of ``schema``."""
    try:
        tree = parse_sql(text)
    except SqlglotError as e:
        raise InvalidPredicateError(f"cannot parse predicate {text!r}: {parse_problem(e)}") from None
    if not isinstance(tree, exp.Expression):
        raise InvalidPredicateError(f"cannot parse predicate {text!r}")
    return _SqlConverter(schema, text).convert(tree)


def parse_problem(error: SqlglotError) -> str:
    """sqlglot's complaint as plain text: where it stopped and why, without terminal escapes."""
    found = getattr(error, "errors", None)
    if not found:
        return re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    first = found[0]
    why = re.sub(r"<class '[\w.]*?(\w+)'>", r"\1", first["description"])
    return f"{why}, at column {first['col']} near {first['highlight']!r}"


class _SqlConverter:
    """sqlglot tree -> :class:`Predicate`, resolving columns and typing literals by the schema."""

    _COMPARISONS = {
        exp.EQ: "=",
        exp.NEQ: "!=",
        exp.LT: "<",
        exp.LTE: "<=",
        exp.GT: ">",
        exp.GTE: ">=",
    }

    def __init__(self, schema: pa.Schema, text: str) -> None:
        self.schema = schema
        self.text = text

    def fail(self, message: str) -> InvalidPredicateError:
        return InvalidPredicateError(f"{message} in predicate {self.text!r}")

    def convert(self, node: exp.Expression) -> Predicate:
        if isinstance(node, exp.Paren):
            return self.convert(node.this)
        if isinstance(node, exp.And):
            return And((self.convert(node.this), self.convert(node.expression)))
        if isinstance(node, exp.Or):
            return Or((self.convert(node.this), self.convert(node.expression)))
        if isinstance(node, exp.Not):
            return self._negate(node.this)
        if isinstance(node, exp.Boolean):
            return Constant(bool(node.this))
        for cls, op in self._COMPARISONS.items():
            if isinstance(node, cls):
                return self._comparison(node.this, op, node.expression)
        if isinstance(node, exp.Between):
            column = self.column(node.this)
            return And(
                (
                    Compare(column, ">=", self.literal(node.args["low"], column)),
                    Compare(column, "<=", self.literal(node.args["high"], column)),
                )
            )
        if isinstance(node, exp.In):
            column = self.column(node.this)
            if node.args.get("query") is not None:
                raise self.fail("subqueries are not supported")
            values = [self.literal(v, column) for v in node.expressions]
            if not values:
                raise self.fail("IN needs at least one value")
            return InList(column, pa.array(values, type=values[0].type))
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise self.fail("only IS NULL / IS NOT NULL are supported")
            return IsNull(self.column(node.this))
        if isinstance(node, exp.Like | exp.ILike):
            column = self.column(node.this)
            if not pa.types.is_string(value_type(self.schema.field(column).type)):
                raise self.fail(f"LIKE needs a string column, {column!r} is not")
            pattern = node.expression
            if not (isinstance(pattern, exp.Literal) and pattern.is_string):
                raise self.fail("LIKE needs a string pattern")
            negated = bool(node.args.get("negate"))
            return Like(column, pattern.this, negated=negated, ignore_case=isinstance(node, exp.ILike))
        raise self.fail(f"unsupported expression {node.sql()!r}")

    def _negate(self, node: exp.Expression) -> Predicate:
        inner = self.convert(node)
        if isinstance(inner, IsNull | InList | Like):
            return replace(inner, negated=not inner.negated)
        return Not(inner)

    def _comparison(self, left: exp.Expression, op: str, right: exp.Expression) -> Predicate:
        if isinstance(left, exp.Column):
            column, value = self.column(left), right
        elif isinstance(right, exp.Column):
            column, value, op = self.column(right), left, _FLIP[op]
        else:
            raise self.fail("a comparison needs a column on one side")
        if isinstance(value, exp.Column):
            raise self._second_column(value)
        if isinstance(value, exp.Null):
            raise self.fail("comparing with NULL is never true; use IS NULL")
        return Compare(column, op, self.literal(value, column))

    def _second_column(self, node: exp.Column) -> InvalidPredicateError:
        """Why ``column <op> name`` fails: usually a text value written without quotes."""
        if node.name in self.schema.names:
            return self.fail(f"comparing two columns ({node.sql()} is a column too) is not supported")
        return InvalidPredicateError(
            f"unknown column {node.name!r} in predicate {self.text!r} {columns_hint(node.name, self.schema.names)}; "
            f"a text value needs single quotes: '{node.name}'"
        )

    def column(self, node: exp.Expression) -> str:
        if isinstance(node, exp.Column) and node.table:
            dotted = ".".join(part.name for part in node.parts)
            if columns_named(dotted, self.schema.names):
                raise self.fail(f'{node.sql()} is not a column name; quote the column named {dotted!r}: "{dotted}"')
        if not isinstance(node, exp.Column) or node.table:
            raise self.fail(f"expected a column name, got {node.sql()!r}")
        name = node.name
        found = columns_named(name, self.schema.names)
        if len(found) == 1:
            return found[0]
        raise self.fail(f"unknown column {name!r} {columns_hint(name, self.schema.names)}")

    def literal(self, node: exp.Expression, column: str) -> pa.Scalar:
        target = compared_type(self.schema.field(column).type)
        if isinstance(node, exp.Cast):
            node = node.this
        try:
            value = node.to_py()
        except ValueError:
            raise self.fail(f"expected a literal, got {node.sql()!r}") from None
        if value is None:
            raise self.fail(f"NULL is not a valid value for {column!r}")
        try:
            return coerce_literal(value, target)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            raise self.fail(f"{node.sql()} is not a valid {target} value for column {column!r}") from None
