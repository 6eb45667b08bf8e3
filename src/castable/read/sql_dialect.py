"""The SQL dialect castable's predicates and value expressions are read in: sqlglot's default,
with identifiers quoted either way, ``"my col"`` as in standard SQL, DuckDB and Trino, or
``my`col`` with backticks as in Spark and Hive (a quote inside is doubled: ``"a""b"``). A
quoted name is one column whatever it holds (dots, spaces, a leading ``_``); an unquoted
``a.b`` is never a column named ``a.b``."""

from __future__ import annotations

import sqlglot
from sqlglot import exp, tokens
from sqlglot.dialects.dialect import Dialect


class CastableSQL(Dialect):
    """sqlglot's default dialect, but for the quoting of identifiers."""

    class Tokenizer(tokens.Tokenizer):
        IDENTIFIERS = ['"', "`"]


def parse_sql(text: str) -> exp.Expr:
    """``text`` parsed as one expression in castable's dialect (``SqlglotError`` if it is not)."""
    return sqlglot.parse_one(text, read=CastableSQL)
