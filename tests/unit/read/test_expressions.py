"""SQL value expressions on Arrow rows: each construct, NULL semantics, and clear errors."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from castable.errors import InvalidInputError
from castable.read.expressions import Assignments, parse_value

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("score", pa.float64()),
        ("small", pa.int8()),
        ("day", pa.date32()),
        ("price", pa.decimal128(10, 2)),
        ("t.qty", pa.int64()),
        ("s.qty", pa.int64()),
    ]
)
ROWS = pa.table(
    {
        "id": [1, 2, 3],
        "name": ["ann", None, " bo "],
        "score": [1.5, None, -2.0],
        "small": pa.array([1, 100, -3], pa.int8()),
        "day": [date(2026, 11, 20), date(2026, 11, 21), None],
        "price": pa.array([Decimal("1.10"), Decimal("2.00"), None], pa.decimal128(10, 2)),
        "t.qty": [5, 6, 7],
        "s.qty": [1, None, 3],
    },
    schema=SCHEMA,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("'x'", ["x", "x", "x"]),
        ("NULL", [None, None, None]),
        ("id * 10 - 1", [9, 19, 29]),
        ("-id", [-1, -2, -3]),
        ("score / 2", [0.75, None, -1.0]),
        ("name || '!'", ["ann!", None, " bo !"]),
        ("CONCAT(name, id)", ["ann1", None, " bo 3"]),
        ("UPPER(name)", ["ANN", None, " BO "]),
        ("TRIM(name)", ["ann", None, "bo"]),
        ("LENGTH(name)", [3, None, 4]),
        ("ABS(score)", [1.5, None, 2.0]),
        ("COALESCE(score, 0)", [1.5, 0.0, -2.0]),
        ("CASE WHEN score > 0 THEN 'up' WHEN score < 0 THEN 'down' ELSE 'none' END", ["up", "none", "down"]),
        ("CASE WHEN id = 1 THEN score END", [1.5, None, None]),
        ("id IN (1, 3)", [True, False, True]),
        ("name IS NULL", [False, True, False]),
        ("NOT name IS NULL", [True, False, True]),
        ("name IS NOT NULL AND id > 1", [False, False, True]),
        ("score > 0 OR id = 2", [True, True, False]),
        ("day = '2026-11-21'", [False, True, None]),
        ("day > '2026-11-20'", [False, True, None]),
        ("CAST(id AS VARCHAR)", ["1", "2", "3"]),
        ("CAST(score AS DECIMAL(5, 1))", [Decimal("1.5"), None, Decimal("-2.0")]),
        ("price * 2", [Decimal("2.200"), Decimal("4.000"), None]),
        ("t.qty + COALESCE(s.qty, 0)", [6, 6, 10]),
        ("qty", None),
    ],
)
def test_each_construct_computes_one_value_per_row(text: str, expected: list[object] | None) -> None:
    if expected is None:
        with pytest.raises(InvalidInputError, match=r"column 'qty' is ambiguous \(write one of t.qty, s.qty\)"):
            parse_value(text, SCHEMA)
        return
    assert parse_value(text, SCHEMA).evaluate(ROWS).to_pylist() == expected


def test_current_time_is_one_instant_for_every_row() -> None:
    before = datetime.now(UTC)
    got = parse_value("CURRENT_TIMESTAMP", SCHEMA).evaluate(ROWS).to_pylist()
    assert len(set(got)) == 1 and before <= got[0] <= datetime.now(UTC)
    assert parse_value("CURRENT_DATE", SCHEMA).evaluate(ROWS).to_pylist()[0] == datetime.now(UTC).date()


def test_arrow_expressions_and_python_values_are_values_too() -> None:
    assert parse_value(pc.field("id") + 1, SCHEMA).evaluate(ROWS).to_pylist() == [2, 3, 4]
    assert parse_value(7, SCHEMA).evaluate(ROWS).to_pylist() == [7, 7, 7]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "is empty"),
        ("id +", "cannot parse"),
        ("nope", "unknown column 'nope'.*single quotes: 'nope'"),
        ("x.id", "unknown column 'x.id'"),
        ("name + 1", "add_checked is not defined for"),
        ("id + 9223372036854775807", "overflow"),
        ("CASE id WHEN 1 THEN 2 END", "CASE WHEN"),
        ("id IN (SELECT 1)", "subqueries"),
        ("CAST(id AS GEOGRAPHY)", "unsupported type"),
        ("RAND()", "unsupported expression"),
        ("day = '2026-13-01'", "'2026-13-01' as a scalar of type date32"),
    ],
)
def test_bad_expressions_are_clear_errors(text: str, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        parse_value(text, SCHEMA).evaluate(ROWS)


def test_assignments_see_the_old_row_and_cast_without_loss() -> None:
    table = SCHEMA.remove(SCHEMA.get_field_index("t.qty")).remove(SCHEMA.get_field_index("s.qty") - 1)
    rows = ROWS.select(table.names)
    changed = Assignments.parse({"id": "id + 1", "score": "id", "day": "'2026-01-01'"}, table).apply(rows, rows)
    assert changed.column("id").to_pylist() == [2, 3, 4] and changed.column("score").to_pylist() == [1.0, 2.0, 3.0]
    assert changed.column("day").to_pylist() == [date(2026, 1, 1)] * 3
    with pytest.raises(InvalidInputError, match=r"'small \+ 100' does not fit column 'small' \(int8\)"):
        Assignments.parse({"small": "small + 100"}, table).apply(rows, rows)
    with pytest.raises(InvalidInputError, match="column 'id' is int64, and 'score' gives double"):
        Assignments.parse({"id": "score"}, table)
    with pytest.raises(InvalidInputError, match="cannot set the primary key 'id'"):
        Assignments.parse({"id": "1"}, table, key="id")
