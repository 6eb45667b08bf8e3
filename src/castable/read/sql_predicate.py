"""SQL predicate text parsed by sqlglot into a :class:`Predicate` of a table's schema.

Columns are resolved as SQL resolves them (exact name first, else ignoring case) and literals are
typed by the column they are compared with, a lossy conversion refused; only what castable can
evaluate on statistics and rows is accepted (comparisons, ``BETWEEN``, ``IN``, ``IS [NOT] NULL``,
``[I]LIKE``, ``AND``/``OR``/``NOT``), anything else refused with where and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

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


@dataclass(frozen=True)
class _Target:
    """What a predicate tests: a column, or the field at ``path`` inside a nested one."""

    column: str
    path: tuple[str, ...]
    type: pa.DataType

    @property
    def shown(self) -> str:
        return ".".join((self.column, *self.path))


def _dotted(node: exp.Expression) -> list[str] | None:
    """The names of ``a.b.c`` (a column, then fields inside it), or ``None`` if ``node`` is not one."""
    if isinstance(node, exp.Column):
        return [part.name for part in node.parts]
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        inner = _dotted(node.this)
        return None if inner is None else [*inner, node.expression.name]
    return None


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
            t = self.column(node.this)
            return And(
                (
                    Compare(t.column, ">=", self.literal(node.args["low"], t), t.path),
                    Compare(t.column, "<=", self.literal(node.args["high"], t), t.path),
                )
            )
        if isinstance(node, exp.In):
            t = self.column(node.this)
            if node.args.get("query") is not None:
                raise self.fail("subqueries are not supported")
            values = [self.literal(v, t) for v in node.expressions]
            if not values:
                raise self.fail("IN needs at least one value")
            return InList(t.column, pa.array(values, type=values[0].type), path=t.path)
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise self.fail("only IS NULL / IS NOT NULL are supported")
            t = self.column(node.this, leaf=False)
            return IsNull(t.column, path=t.path)
        if isinstance(node, exp.Like | exp.ILike):
            t = self.column(node.this)
            if not pa.types.is_string(value_type(t.type)):
                raise self.fail(f"LIKE needs a string column, {t.shown!r} is not")
            pattern = node.expression
            if not (isinstance(pattern, exp.Literal) and pattern.is_string):
                raise self.fail("LIKE needs a string pattern")
            negated = bool(node.args.get("negate"))
            return Like(t.column, pattern.this, negated=negated, ignore_case=isinstance(node, exp.ILike), path=t.path)
        raise self.fail(f"unsupported expression {node.sql()!r}")

    def _negate(self, node: exp.Expression) -> Predicate:
        inner = self.convert(node)
        if isinstance(inner, IsNull | InList | Like):
            return replace(inner, negated=not inner.negated)
        return Not(inner)

    def _comparison(self, left: exp.Expression, op: str, right: exp.Expression) -> Predicate:
        if isinstance(left, exp.Column | exp.Dot):
            t, value = self.column(left), right
        elif isinstance(right, exp.Column | exp.Dot):
            t, value, op = self.column(right), left, _FLIP[op]
        else:
            raise self.fail("a comparison needs a column on one side")
        if isinstance(value, exp.Column):
            raise self._second_column(value)
        if isinstance(value, exp.Null):
            raise self.fail("comparing with NULL is never true; use IS NULL")
        return Compare(t.column, op, self.literal(value, t), t.path)

    def _second_column(self, node: exp.Column) -> InvalidPredicateError:
        """Why ``column <op> name`` fails: usually a text value written without quotes."""
        if node.name in self.schema.names:
            return self.fail(f"comparing two columns ({node.sql()} is a column too) is not supported")
        return InvalidPredicateError(
            f"unknown column {node.name!r} in predicate {self.text!r} {columns_hint(node.name, self.schema.names)}; "
            f"a text value needs single quotes: '{node.name}'"
        )

    def column(self, node: exp.Expression, leaf: bool = True) -> _Target:
        """The column (or, for ``a.b.c``, the field inside nested column ``a``) ``node`` names;
        with ``leaf``, one that holds values to compare (not a struct, list or map)."""
        names = _dotted(node)
        if names is None:
            raise self.fail(f"expected a column name, got {node.sql()!r}")
        found = columns_named(names[0], self.schema.names)
        if len(found) != 1:
            dotted = ".".join(names)
            if len(names) > 1 and columns_named(dotted, self.schema.names):
                raise self.fail(f'{node.sql()} is not a column name; quote the column named {dotted!r}: "{dotted}"')
            raise self.fail(f"unknown column {names[0]!r} {columns_hint(names[0], self.schema.names)}")
        target = _Target(found[0], (), self.schema.field(found[0]).type)
        for name in names[1:]:
            if not pa.types.is_struct(target.type):
                raise self.fail(f"{target.shown} is {target.type}, not a struct: it has no field {name!r}")
            fields = [target.type.field(i).name for i in range(target.type.num_fields)]
            inner = columns_named(name, fields)
            if len(inner) != 1:
                raise self.fail(f"{target.shown} has no field {name!r} {columns_hint(name, fields)}")
            target = _Target(target.column, (*target.path, inner[0]), target.type.field(inner[0]).type)
        if leaf and pa.types.is_nested(target.type):
            raise self.fail(f"{target.shown} is {target.type}: compare one of its fields (a.b = 1)")
        return target

    def literal(self, node: exp.Expression, t: _Target) -> pa.Scalar:
        column = t.shown
        target = compared_type(t.type)
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
