"""What callers hand in as a filter, turned into a checked :class:`Predicate`.

A filter comes as castable's SQL (a string), an Arrow expression or a parsed predicate. SQL
text is parsed by sqlglot in :mod:`castable.read.sql_predicate`, imported on the first string:
sqlglot costs a third of a second to import, which a command that filters nothing (or filters
by an Arrow expression) should not pay.
"""

from __future__ import annotations

from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from castable.errors import InvalidPredicateError
from castable.read.predicate import ArrowPredicate, Predicate

Where: TypeAlias = "str | pc.Expression | Predicate"
"""A filter as callers give one: castable's SQL, an Arrow expression, or a parsed predicate."""


def parse_predicate(predicate: Where, schema: pa.Schema) -> Predicate:
    """Turn a SQL string or Arrow expression into a checked :class:`Predicate` for ``schema``."""
    if isinstance(predicate, Predicate):
        return predicate
    if isinstance(predicate, pc.Expression):
        _check_expression(predicate, schema)
        return ArrowPredicate(predicate)
    if not isinstance(predicate, str) or not predicate.strip():
        raise InvalidPredicateError(f"a predicate must be a SQL string or an Arrow expression, not {predicate!r}")
    from castable.read.sql_predicate import predicate_from_sql

    return predicate_from_sql(predicate, schema)


def _check_expression(expression: pc.Expression, schema: pa.Schema) -> None:
    empty = schema.empty_table()
    try:
        result = empty.filter(expression)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidPredicateError(f"invalid filter expression {expression}: {e}") from None
    if result.num_columns != empty.num_columns:
        raise InvalidPredicateError(f"invalid filter expression {expression}")
