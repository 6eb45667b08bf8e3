"""Vectorised statistics pruning: ``Predicate.match_many`` must give, for every unit, exactly the
verdict of the scalar ``Predicate.match`` on the same statistics."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from castable.format.stats import ColumnStats
from castable.read.predicate import (
    And,
    ArrowPredicate,
    Compare,
    Constant,
    InList,
    IsNull,
    Like,
    Match,
    Not,
    Or,
    Predicate,
    StatsColumns,
)
from castable.read.where import parse_predicate

CODE = {Match.NONE: 0, Match.SOME: 1, Match.ALL: 2}

# Small domains, so that bounds and compared values often coincide.
_ints = st.integers(-6, 6)
_floats = st.one_of(_ints.map(lambda i: i / 2), st.sampled_from([-0.0, float("nan"), float("inf"), -float("inf")]))
_days = _ints.map(lambda d: date(2024, 1, 10) + timedelta(days=d))
_instants = _ints.map(lambda us: datetime(2024, 1, 1, tzinfo=UTC) + timedelta(microseconds=us))

# Column -> (its type, its values) and other types a compared value may come as (cast, or judged one by one).
COLUMNS: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "i64": (pa.int64(), _ints),
    "i32": (pa.int32(), _ints),
    "f64": (pa.float64(), _floats),
    "s": (pa.string(), st.text(alphabet="ab\x00é", max_size=3)),
    "b": (pa.bool_(), st.booleans()),
    "d": (pa.date32(), _days),
    "ts": (pa.timestamp("us", tz="UTC"), _instants),
    "dec": (pa.decimal128(10, 2), _ints.map(lambda c: Decimal(c).scaleb(-2))),
}
OTHER_VALUES: dict[str, list[tuple[pa.DataType, st.SearchStrategy[Any]]]] = {
    "i64": [(pa.int32(), _ints), (pa.float64(), _floats)],
    "i32": [(pa.int64(), st.one_of(_ints, st.just(2**40)))],
    "f64": [(pa.int64(), _ints), (pa.float32(), _floats)],
    "s": [(pa.large_string(), st.text(alphabet="ab", max_size=2))],
    "b": [],
    "d": [(pa.date64(), _days)],
    "ts": [
        (pa.timestamp("ms", tz="UTC"), _ints.map(lambda d: datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=d))),
        (pa.timestamp("ns", tz="UTC"), _instants),
    ],
    "dec": [(pa.decimal128(12, 3), _ints.map(lambda c: Decimal(c).scaleb(-3))), (pa.int64(), st.integers(-1, 1))],
}


def _typed_values(column: str) -> st.SearchStrategy[tuple[pa.DataType, st.SearchStrategy[Any]]]:
    return st.sampled_from([COLUMNS[column], *OTHER_VALUES[column]])


@st.composite
def _leaf(draw: st.DrawFn, columns: list[str]) -> Predicate:
    column = draw(st.sampled_from(columns))
    kind = draw(st.sampled_from(["compare", "in", "null", "constant"]))
    if kind == "compare":
        t, values = draw(_typed_values(column))
        return Compare(column, draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="])), pa.scalar(draw(values), t))
    if kind == "in":
        t, values = draw(_typed_values(column))
        listed = draw(st.lists(st.one_of(values, st.none()), max_size=5))
        return InList(column, pa.array(listed, type=t), negated=draw(st.booleans()))
    if kind == "null":
        return IsNull(column, negated=draw(st.booleans()))
    return Constant(draw(st.booleans()))


_predicates = st.recursive(
    _leaf(sorted(COLUMNS)),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3).map(lambda ps: And(tuple(ps))),
        st.lists(kids, max_size=3).map(lambda ps: Or(tuple(ps))),
        kids.map(Not),
    ),
    max_leaves=6,
)

Unit = tuple[Any, Any, int | None]  # min, max (None = unknown), null count


@st.composite
def _units(draw: st.DrawFn, rows: list[int], values: st.SearchStrategy[Any]) -> list[Unit]:
    out = []
    for n in rows:
        lo, hi = draw(values), draw(values)
        if draw(st.booleans()):
            lo, hi = sorted((lo, hi))  # half the time ordered (NaN aside): inverted bounds must agree too
        lo, hi = draw(st.sampled_from([(lo, hi)] * 4 + [(lo, lo), (None, None), (lo, None), (None, hi)]))
        nulls = draw(st.sampled_from([0, 0, 0, None, n, n + 1, *range(1, n)]))  # none, unknown, all, some
        out.append((lo, hi, nulls))
    return out


Statistics = tuple[list[int], dict[str, list[Unit] | None]]


@st.composite
def _statistics(draw: st.DrawFn, columns: list[str], min_units: int, max_units: int) -> Statistics:
    """Unit sizes, and per column either no statistics at all or each unit's (min, max, null count)."""
    rows = draw(st.lists(st.integers(0, 4), min_size=min_units, max_size=max_units))
    stats: dict[str, list[Unit] | None] = {}
    for name in columns:
        stats[name] = None if draw(st.integers(0, 9)) == 0 else draw(_units(rows, COLUMNS[name][1]))
    return rows, stats


def _columns(name: str, units: list[Unit]) -> StatsColumns:
    t = COLUMNS[name][0]
    return StatsColumns(
        min=pa.array([u[0] for u in units], type=t),
        max=pa.array([u[1] for u in units], type=t),
        nulls=pa.array([u[2] for u in units], type=pa.int64()),
    )


def _unit(name: str, unit: Unit) -> ColumnStats:
    t = COLUMNS[name][0]
    lo, hi, nulls = unit
    return ColumnStats(None if lo is None else pa.scalar(lo, t), None if hi is None else pa.scalar(hi, t), nulls)


def _check(predicate: Predicate, statistics: Statistics) -> None:
    """``match_many`` against ``match`` unit by unit, on the same statistics."""
    rows, stats = statistics
    many = {name: None if units is None else _columns(name, units) for name, units in stats.items()}
    got = predicate.match_many(many.get, pa.array(rows, pa.int64()))
    assert got.type == pa.int8()
    expected = []
    for i, n in enumerate(rows):
        unit = {name: _unit(name, units[i]) for name, units in stats.items() if units is not None}
        expected.append(CODE[predicate.match(unit.get, n)])
    assert got.to_pylist() == expected


@pytest.mark.parametrize("column", sorted(COLUMNS))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_match_many_equals_match_for_each_kind_of_predicate(column: str, data: st.DataObject) -> None:
    _check(data.draw(_leaf([column])), data.draw(_statistics([column], min_units=8, max_units=24)))


@settings(max_examples=500, deadline=None)
@given(_predicates, _statistics(sorted(COLUMNS), min_units=0, max_units=12))
def test_match_many_equals_match_for_nested_predicates(predicate: Predicate, statistics: Statistics) -> None:
    _check(predicate, statistics)


SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _sequential_files(count: int, size: int) -> tuple[dict[str, StatsColumns], pa.Array]:
    """``count`` files of ``size`` rows holding ids in order (file i: ids size*i .. size*i + size - 1)."""
    lo = pa.array([size * i for i in range(count)], pa.int64())
    stats = {"id": StatsColumns(lo, pc.add(lo, size - 1), pa.array([0] * count, pa.int64()))}
    return stats, pa.array([size] * count, pa.int64())


def test_key_range_over_sequential_files_prunes_to_exactly_the_overlapping_files() -> None:
    stats, rows = _sequential_files(100, 10)
    predicate = parse_predicate("id BETWEEN 235 AND 512", SCHEMA)
    verdicts = predicate.match_many(stats.get, rows).to_pylist()
    assert [i for i, v in enumerate(verdicts) if v != 0] == list(range(23, 52))
    assert [i for i, v in enumerate(verdicts) if v == 2] == list(range(24, 51))
    listed = parse_predicate("id IN (5, 5, 999, 420) OR id < 0", SCHEMA).match_many(stats.get, rows).to_pylist()
    assert [i for i, v in enumerate(listed) if v != 0] == [0, 42, 99]


def test_opaque_predicates_and_missing_statistics_prune_nothing() -> None:
    stats, rows = _sequential_files(5, 10)
    for predicate in (
        parse_predicate("name LIKE 'a%'", SCHEMA),
        parse_predicate(pc.field("id") > 1000, SCHEMA),
        ArrowPredicate(pc.field("id") > 1000),
        Like("name", "a%", negated=True),
        parse_predicate("name = 'x'", SCHEMA),  # no statistics for name
    ):
        assert predicate.match_many(stats.get, rows).to_pylist() == [1] * 5


def test_values_arrow_cannot_compare_exactly_are_judged_one_by_one() -> None:
    stats, rows = _sequential_files(4, 10)
    # 12.5 does not cast to int64 exactly: judged unit by unit, with the same answer.
    assert Compare("id", "<", pa.scalar(12.5)).match_many(stats.get, rows).to_pylist() == [2, 1, 0, 0]
    assert InList("id", pa.array([12.5, 35.0])).match_many(stats.get, rows).to_pylist() == [0, 1, 0, 1]


def test_no_units() -> None:
    stats, rows = _sequential_files(0, 10)
    assert parse_predicate("id = 3 OR id IN (1, 2)", SCHEMA).match_many(stats.get, rows).to_pylist() == []


def test_many_units_are_judged_quickly() -> None:
    stats, rows = _sequential_files(65_536, 100)
    predicate = parse_predicate("id = 4242424", SCHEMA)
    predicate.match_many(stats.get, rows)
    start = time.perf_counter()
    verdicts = predicate.match_many(stats.get, rows)
    assert time.perf_counter() - start < 0.5  # well under a millisecond; generous for loaded CI machines
    assert pc.sum(pc.not_equal(verdicts, 0)).as_py() == 1
