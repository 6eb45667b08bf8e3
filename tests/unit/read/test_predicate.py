"""Unit tests of SQL predicate parsing, statistics judgement and key-range recognition."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from castable.format.stats import ColumnStats
from castable.read.predicate import Match
from castable.read.where import parse_predicate

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("price", pa.decimal128(10, 2)),
        ("x", pa.float64()),
        ("flag", pa.bool_()),
    ]
)
DATA = pa.table(
    {
        "id": [1, 2, 3, None],
        "name": ["apple", "banana", None, "avocado"],
        "ts": pa.array([datetime(2025, 1, d) for d in (1, 2, 3, 4)], pa.timestamp("us", tz="UTC")),
        "day": pa.array([datetime(2025, 1, d).date() for d in (1, 2, 3, 4)], pa.date32()),
        "price": pa.array([Decimal("1.50"), Decimal("2.25"), None, Decimal("9.99")], pa.decimal128(10, 2)),
        "x": [0.5, float("nan"), -1.0, None],
        "flag": [True, False, None, True],
    },
    schema=SCHEMA,
)


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        ("id = 2", [1]),
        ("2 < id", [2]),
        ("id BETWEEN 1 AND 2", [0, 1]),
        ("id IN (1, 3)", [0, 2]),
        ("id NOT IN (1, 3)", [1]),
        ("id IS NULL", [3]),
        ("id IS NOT NULL", [0, 1, 2]),
        ("name LIKE 'a%'", [0, 3]),
        ("name NOT LIKE 'a%'", [1]),
        ("name ILIKE 'A%'", [0, 3]),
        ("ts >= TIMESTAMP '2025-01-03 00:00:00'", [2, 3]),
        ("ts < '2025-01-02'", [0]),
        ("day = DATE '2025-01-04'", [3]),
        ("price > 2", [1, 3]),
        ("price <= 2.25", [0, 1]),
        ("x < 0", [2]),
        ("x > -5.5", [0, 2]),
        ("flag", None),
        ("flag = TRUE", [0, 3]),
        ("NOT (id = 1) AND name IS NOT NULL", [1]),
        ("id = 1 OR name = 'avocado'", [0, 3]),
        ('"id" != 2', [0, 2]),
        ("ID = 3", [2]),
        ("TRUE", [0, 1, 2, 3]),
        ("FALSE", []),
    ],
)
def test_sql_evaluates_with_sql_null_semantics(sql: str, rows: list[int] | None) -> None:
    if rows is None:
        with pytest.raises(Exception):  # noqa: B017 - a bare column is not a supported predicate
            parse_predicate(sql, SCHEMA)
        return
    p = parse_predicate(sql, SCHEMA)
    mask = pc.fill_null(DATA.to_batches()[0].to_struct_array().is_valid(), True)
    got = DATA.append_column("__i", pa.array(range(4))).filter(p.to_expression())
    assert mask is not None
    assert got.column("__i").to_pylist() == rows


def stats(lo: object, hi: object, nulls: int, t: pa.DataType | None = None) -> ColumnStats:
    t = t or pa.int64()
    return ColumnStats(pa.scalar(lo, t), pa.scalar(hi, t), nulls)


@pytest.mark.parametrize(
    ("sql", "unit", "expected"),
    [
        ("id = 5", stats(10, 20, 0), Match.NONE),
        ("id = 15", stats(10, 20, 0), Match.SOME),
        ("id = 10", stats(10, 10, 0), Match.ALL),
        ("id = 10", stats(10, 10, 1), Match.SOME),
        ("id > 20", stats(10, 20, 0), Match.NONE),
        ("id > 9", stats(10, 20, 0), Match.ALL),
        ("id >= 10", stats(10, 20, 3), Match.SOME),
        ("id < 10", stats(10, 20, 0), Match.NONE),
        ("id <= 20", stats(10, 20, 0), Match.ALL),
        ("id BETWEEN 0 AND 100", stats(10, 20, 0), Match.ALL),
        ("id BETWEEN 21 AND 100", stats(10, 20, 0), Match.NONE),
        ("id IN (1, 2)", stats(10, 20, 0), Match.NONE),
        ("id IN (1, 15)", stats(10, 20, 0), Match.SOME),
        ("id NOT IN (1, 2)", stats(10, 20, 0), Match.ALL),
        ("id IS NULL", stats(10, 20, 0), Match.NONE),
        ("id IS NOT NULL", stats(10, 20, 0), Match.ALL),
        ("id = 5 OR id = 15", stats(10, 20, 0), Match.SOME),
        ("id = 5 OR id > 1", stats(10, 20, 0), Match.ALL),
        ("NOT (id > 1)", stats(10, 20, 0), Match.NONE),
        ("NOT (id > 100)", stats(10, 20, 0), Match.SOME),
        ("x > 0", stats(1.0, 2.0, 0, pa.float64()), Match.SOME),
        ("x > 5", stats(1.0, 2.0, 0, pa.float64()), Match.NONE),
        ("name LIKE 'a%'", stats("a", "b", 0, pa.string()), Match.SOME),
    ],
)
def test_statistics_judgement(sql: str, unit: ColumnStats, expected: Match) -> None:
    p = parse_predicate(sql, SCHEMA)
    assert p.match(lambda c: unit, 100) is expected


def test_all_null_column_matches_no_comparison() -> None:
    p = parse_predicate("id > 1", SCHEMA)
    assert p.match(lambda c: ColumnStats(None, None, 100), 100) is Match.NONE
    assert parse_predicate("id IS NULL", SCHEMA).match(lambda c: ColumnStats(None, None, 100), 100) is Match.ALL


@pytest.mark.parametrize(
    ("sql", "bounds"),
    [
        ("id = 7", (7, 7)),
        ("id BETWEEN 3 AND 9", (3, 9)),
        ("id > 3", (4, None)),
        ("id < 3", (None, 2)),
        ("id >= 3 AND id <= 5 AND id < 5", (3, 4)),
        ("id = 1 OR id = 2", None),
        ("id IN (1, 2)", None),
        ("id > 1 AND name = 'a'", None),
        ("name = 'a'", None),
        ("id != 3", None),
    ],
)
def test_key_ranges(sql: str, bounds: tuple | None) -> None:
    r = parse_predicate(sql, SCHEMA).key_range("id")
    got = None if r is None else tuple(None if b is None else b.as_py() for b in r)
    assert got == bounds


def test_arrow_expressions_pass_through() -> None:
    expr = (pc.field("id") > 1) & (pc.field("name") == "banana")
    p = parse_predicate(expr, SCHEMA)
    assert p.columns() is None
    assert DATA.filter(p.to_expression()).num_rows == 1


def test_a_time_of_day_literal_is_read_in_the_column_unit_and_never_rounded() -> None:
    """Arrow casts no text to a time, so castable parses it; a literal finer than the column's
    unit is refused rather than rounded to another row's value."""
    from castable.errors import InvalidPredicateError

    schema = pa.schema([pa.field("t", pa.time32("s")), pa.field("u", pa.time64("ns"))])
    times = pa.table(
        {"t": pa.array([3600, 3601], pa.time32("s")), "u": pa.array([10**12, 10**12 + 1000], pa.time64("ns"))}
    )
    for text, rows in (("t = TIME '01:00:01'", [1]), ("u >= '00:16:40.000001'", [1]), ("t < '01:00:01'", [0])):
        mask = parse_predicate(text, schema).to_expression()
        assert times.append_column("i", pa.array([0, 1])).filter(mask).column("i").to_pylist() == rows, text
    with pytest.raises(InvalidPredicateError, match="is not a valid time32"):
        parse_predicate("t = TIME '01:00:00.5'", schema)


def test_a_timestamp_literal_with_zeros_past_the_column_unit_is_read_exactly() -> None:
    """``.226000`` (how Python's ``isoformat`` writes milliseconds) names a milliseconds value
    exactly; ``.226001`` does not and is refused rather than rounded to another row's value."""
    from castable.errors import InvalidPredicateError

    schema = pa.schema([pa.field("ms", pa.timestamp("ms")), pa.field("s", pa.timestamp("s", tz="UTC"))])
    rows = pa.table(
        {
            "ms": pa.array([1_000_226, 1_000_227], pa.timestamp("ms")),
            "s": pa.array([1000, 1001], pa.timestamp("s", tz="UTC")),
            "i": [0, 1],
        }
    )
    for text, found in (
        ("ms = TIMESTAMP '1970-01-01 00:16:40.226000'", [0]),
        ("ms > '1970-01-01T00:16:40.226'", [1]),
        ("s = TIMESTAMP '1970-01-01 00:16:41.000000'", [1]),
        ("s < '1970-01-01T00:16:41.000000+00:00'", [0]),
    ):
        assert rows.filter(parse_predicate(text, schema).to_expression()).column("i").to_pylist() == found, text
    for text in ("ms = TIMESTAMP '1970-01-01 00:16:40.226001'", "s = '1970-01-01 00:16:41.5'"):
        with pytest.raises(InvalidPredicateError, match="is not a valid timestamp"):
            parse_predicate(text, schema)


NAMED = pa.schema([("id", pa.int64()), ("a.b", pa.string()), ("my col", pa.float64()), ('say "hi"', pa.int64())])


@pytest.mark.parametrize(
    ("sql", "column"),
    [
        ("\"a.b\" = 'x'", "a.b"),
        ("`a.b` = 'x'", "a.b"),
        ('"my col" > 1', "my col"),
        ("`my col` > 1", "my col"),
        ('"say ""hi""" = 3', 'say "hi"'),
        ('`say "hi"` = 3', 'say "hi"'),
    ],
)
def test_a_quoted_name_is_one_column_whatever_it_holds(sql: str, column: str) -> None:
    assert parse_predicate(sql, NAMED).columns() == {column}


def test_an_unquoted_dotted_name_is_refused_with_the_quoting_that_names_the_column() -> None:
    with pytest.raises(ValueError, match=re.escape("a.b is not a column name; quote the column named 'a.b': \"a.b\"")):
        parse_predicate("a.b = 'x'", NAMED)
