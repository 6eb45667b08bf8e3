"""SQL value expressions parsed by sqlglot and compiled into functions of Arrow rows.

The new values of an update or a merge and the conditions of merge clauses are SQL text; each is
compiled once into an :data:`~castable.read.values.Evaluate` over pyarrow compute, resolving its
columns by the rows' schema (see :mod:`castable.read.expressions` for what is supported).
"""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp
from sqlglot.errors import SqlglotError

from castable.errors import InvalidInputError, columns_hint
from castable.format.stats import value_type
from castable.read.sql_dialect import parse_sql
from castable.read.sql_predicate import parse_problem
from castable.read.values import Datum, Evaluate, aligned, as_array, as_text, cast_like, coerce_literal, columns_named

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


def compile_value(text: str, schema: pa.Schema, what: str, now: datetime, like: pa.DataType | None) -> Evaluate:
    """``text`` compiled against rows of ``schema``; a text literal alone read as type ``like``,
    ``CURRENT_DATE`` and ``CURRENT_TIMESTAMP`` as ``now``."""
    try:
        tree = parse_sql(text)
    except SqlglotError as e:
        raise InvalidInputError(f"cannot parse {what} {text!r}: {parse_problem(e)}") from None
    compiler = _Compiler(schema, text, what, now)
    return compiler.typed_literal(tree, like) if like is not None else compiler.compile(tree)


class _Compiler:
    """sqlglot tree -> a function of the rows, resolving columns by ``schema``."""

    def __init__(self, schema: pa.Schema, text: str, what: str, now: datetime) -> None:
        self.schema = schema
        self.text = text
        self.what = what
        self.now = now

    def fail(self, message: str) -> InvalidInputError:
        return InvalidInputError(f"{message} in {self.what}: {self.text}")

    def compile(self, node: exp.Expr) -> Evaluate:
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
            return lambda rows: pc.binary_join_element_wise(*(as_text(p(rows)) for p in parts), "")
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
            return lambda rows: pc.coalesce(*aligned([p(rows) for p in parts]))
        if isinstance(node, exp.Case):
            return self.case(node)
        if isinstance(node, exp.Cast):
            return self.cast(node)
        raise self.fail(f"unsupported expression {node.sql()!r}")

    def typed_literal(self, node: exp.Expr, like: pa.DataType) -> Evaluate:
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
        raise self.fail(f"unknown column {name!r} {columns_hint(name, self.schema.names)}{hint}")

    def literal(self, node: exp.Expr) -> Evaluate:
        value = node.to_py()
        scalar = pa.scalar(value)
        return lambda rows: scalar

    def binary(self, function: str, left: exp.Expr, right: exp.Expr) -> Evaluate:
        lhs, rhs = self.compile(left), self.compile(right)

        def evaluate(rows: pa.Table) -> Datum:
            a, b = aligned([lhs(rows), rhs(rows)])
            return pc.call_function(function, [a, b])

        return evaluate

    def in_list(self, node: exp.In) -> Evaluate:
        if node.args.get("query") is not None:
            raise self.fail("subqueries are not supported")
        operand = self.compile(node.this)
        values = [self.compile(v) for v in node.expressions]

        def evaluate(rows: pa.Table) -> Datum:
            column = operand(rows)
            items = [v(rows) for v in values]
            if not all(isinstance(i, pa.Scalar) for i in items):
                raise pa.ArrowInvalid("IN takes a list of values")
            options = pa.array([cast_like(i, column.type).as_py() for i in items], type=column.type)
            return pc.is_in(column, value_set=options)

        return evaluate

    def case(self, node: exp.Case) -> Evaluate:
        if node.this is not None:
            raise self.fail("write CASE WHEN <condition> THEN ... (CASE <value> WHEN is not supported)")
        branches = [(self.compile(w.this), self.compile(w.args["true"])) for w in node.args.get("ifs", [])]
        default = self.compile(node.args["default"]) if node.args.get("default") is not None else None

        def evaluate(rows: pa.Table) -> Datum:
            conditions = [pc.fill_null(as_array(c(rows), rows.num_rows), False) for c, _ in branches]
            results = [v(rows) for _, v in branches] + ([default(rows)] if default is not None else [])
            names = [str(i) for i in range(len(conditions))]
            chosen = pa.StructArray.from_arrays(conditions, names)
            return pc.case_when(chosen, *(as_array(r, rows.num_rows) for r in aligned(results)))

        return evaluate

    def cast(self, node: exp.Cast) -> Evaluate:
        to = node.to
        if to.this == exp.DataType.Type.DECIMAL:
            precision, scale = (int(p.this.this) for p in to.expressions) if to.expressions else (38, 9)
            target: pa.DataType = pa.decimal128(precision, scale)
        elif to.this.name in _SQL_TYPES:
            target = _SQL_TYPES[to.this.name]
        else:
            raise self.fail(f"unsupported type {to.sql()!r} in CAST")
        operand = self.compile(node.this)
        return lambda rows: cast_like(operand(rows), target)
