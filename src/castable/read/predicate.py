"""Predicates for filters and deletes, as a small tree castable can reason about.

A :class:`Predicate` converts to a ``pyarrow.compute.Expression`` for evaluation, evaluates
three-valued against column statistics (no row / some rows / every row can match) for pruning
and for deleting whole row groups without reading them, and recognises primary-key ranges.
SQL text becomes one in :mod:`castable.read.sql_predicate`; what callers hand in (text, an Arrow
expression, a predicate) is turned into one by :func:`castable.read.where.parse_predicate`.
"""

from __future__ import annotations

import bisect
import enum
import functools
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from castable.format.stats import ColumnStats, leaf_key, ordered, ordered_values

StatsLookup = Callable[[str], ColumnStats | None]


@dataclass(frozen=True)
class StatsColumns:
    """One column's statistics over many units, as Arrow arrays of equal length (null = unknown)."""

    min: pa.Array  # of the column's value type (stats.value_type(field type))
    max: pa.Array
    nulls: pa.Array  # int64


StatsColumnsLookup = Callable[[str], StatsColumns | None]


class Match(enum.Enum):
    """How many rows of a unit (file, row group) can satisfy a predicate, judged from statistics."""

    NONE = "none"
    SOME = "some"
    ALL = "all"


class Predicate(ABC):
    """A boolean condition on the columns of one table."""

    @abstractmethod
    def to_expression(self) -> pc.Expression:
        """The equivalent Arrow expression (SQL semantics: NULL never satisfies it)."""

    @abstractmethod
    def columns(self) -> set[str] | None:
        """Columns the predicate reads, or ``None`` when that cannot be known."""

    def match(self, stats: StatsLookup, rows: int) -> Match:
        """Judge a unit of ``rows`` rows from its column statistics; ``SOME`` when unsure."""
        return Match.SOME

    def match_many(self, stats: StatsColumnsLookup, rows: pa.Array) -> pa.Array:
        """The verdict of :meth:`match` for many units at once: an int8 array, 0 = NONE, 1 = SOME, 2 = ALL
        (so AND is the minimum of its parts and OR the maximum). ``rows`` is an int64 array of unit sizes."""
        return uniform(Match.SOME, len(rows))

    def key_range(self, key: str) -> tuple[pa.Scalar | None, pa.Scalar | None] | None:
        """Inclusive bounds if the predicate is exactly a range of column ``key``, else ``None``."""
        return None

    def key_points(self, key: str) -> pa.Array | None:
        """The non-null values if the predicate is exactly ``key IN (...)``, else ``None``."""
        return None

    def ruled_out(self, lacks: Lacks) -> bool:
        """Whether no row can match in a unit where ``lacks(column, values)`` says the column
        holds none of ``values`` (a bloom filter's answer): points of a column, ANDed or ORed."""
        return False


Lacks = Callable[[str, pa.Array], bool]
"""Whether a unit certainly holds none of some values of a column (see :meth:`Predicate.ruled_out`)."""

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _bounds(s: ColumnStats | None) -> tuple[Any, Any, bool] | None:
    """(min, max, exact) of a unit, ``exact`` meaning no nulls and no NaN can hide in it."""
    if s is None or not s.has_bounds:
        return None
    exact = s.null_count == 0 and not pa.types.is_floating(s.min.type)  # type: ignore[union-attr]
    return ordered(s.min), ordered(s.max), exact


def _all_null(s: ColumnStats | None, rows: int) -> bool:
    return s is not None and s.null_count is not None and s.null_count >= rows


def _judge(s: ColumnStats | None, rows: int) -> Match | tuple[Any, Any, bool]:
    """A comparison's verdict when statistics settle it alone (all NULL, or no bounds), else the bounds."""
    if _all_null(s, rows):
        return Match.NONE
    b = _bounds(s)
    return Match.SOME if b is None else b


_VERDICTS = (Match.NONE, Match.SOME, Match.ALL)


@functools.cache
def verdict_code(verdict: Match) -> pa.Scalar:
    """A verdict as the int8 scalar the vectorised judges combine (made on first use: converting a
    Python value is where pyarrow imports pandas, which a command that never prunes need not pay)."""
    return pa.scalar(_VERDICTS.index(verdict), pa.int8())


def uniform(verdict: Match, n: int) -> pa.Array:
    """The same verdict for ``n`` units."""
    return pa.repeat(verdict_code(verdict), n)


def _exact_many(s: StatsColumns) -> pa.Array:
    """:func:`_bounds`' ``exact`` per unit: no null (an unknown count is not zero) and not floating."""
    return pc.and_(pc.fill_null(pc.equal(s.nulls, 0), False), not pa.types.is_floating(s.min.type))


def _judge_many(s: StatsColumns, rows: pa.Array, none: pa.Array, every: pa.Array) -> pa.Array:
    """:func:`_judge` per unit, then NONE where ``none``, ALL where ``every`` (exactness included), else SOME."""
    all_null = pc.fill_null(pc.greater_equal(s.nulls, rows), False)
    unknown = pc.or_(pc.is_null(s.min), pc.is_null(s.max))
    by_bounds = pc.if_else(
        none, verdict_code(Match.NONE), pc.if_else(every, verdict_code(Match.ALL), verdict_code(Match.SOME))
    )
    return pc.if_else(all_null, verdict_code(Match.NONE), pc.if_else(unknown, verdict_code(Match.SOME), by_bounds))


def _as_type(values: pa.Array, t: pa.DataType) -> pa.Array | None:
    """``values`` cast to ``t`` if that loses nothing (they cast back to themselves), else None.

    NaN is never equal to itself, so values holding NaN (which cannot be ordered) return None too."""
    try:
        cast = values.cast(t)
        back = cast.cast(values.type)
    except pa.ArrowException:
        return None
    return cast if pc.all(pc.equal(back, values)).as_py() is not False else None


def _one_by_one(predicate: Compare | InList, s: StatsColumns, rows: pa.Array) -> pa.Array:
    """``predicate.match`` unit by unit: the slow path, for values Arrow cannot compare as Python does."""
    verdicts = []
    for i, n in enumerate(rows.to_pylist()):
        lo, hi = s.min[i], s.max[i]
        unit = ColumnStats(lo if lo.is_valid else None, hi if hi.is_valid else None, s.nulls[i].as_py())
        verdicts.append(verdict_code(predicate.match({predicate.key: unit}.get, n)))
    return pa.array(verdicts, pa.int8())


def _outside(lo: pa.Array, hi: pa.Array, v: pa.Scalar) -> pa.Array:
    """``v < lo or v > hi`` per unit."""
    return pc.or_(pc.less(v, lo), pc.greater(v, hi))


def _only(lo: pa.Array, hi: pa.Array, v: pa.Scalar) -> pa.Array:
    """``lo == hi == v`` per unit."""
    return pc.and_(pc.equal(lo, hi), pc.equal(hi, v))


# Compare.match's table per unit: (lo, hi, value, exact) -> (no row matches, every row does if exact).
_COMPARE_MANY: dict[str, Callable[[pa.Array, pa.Array, pa.Scalar, pa.Array], tuple[pa.Array, pa.Array]]] = {
    "=": lambda lo, hi, v, exact: (_outside(lo, hi, v), _only(lo, hi, v)),
    "!=": lambda lo, hi, v, exact: (pc.and_(_only(lo, hi, v), exact), _outside(lo, hi, v)),
    "<": lambda lo, hi, v, exact: (pc.greater_equal(lo, v), pc.less(hi, v)),
    "<=": lambda lo, hi, v, exact: (pc.greater(lo, v), pc.less_equal(hi, v)),
    ">": lambda lo, hi, v, exact: (pc.less_equal(hi, v), pc.greater(lo, v)),
    ">=": lambda lo, hi, v, exact: (pc.less(hi, v), pc.greater_equal(lo, v)),
}


def _any_within(values: pa.Array, lo: pa.Array, hi: pa.Array) -> pa.Array:
    """Per unit, whether some of ``values`` (no null, no NaN) lies in [lo, hi], by binary search as in InList.match."""
    if len(values) == 0:
        return pa.array(np.zeros(len(lo), dtype=bool))
    keys = values.sort().to_numpy(zero_copy_only=False)

    def rank(bounds: pa.Array, side: Literal["left", "right"]) -> npt.NDArray[np.intp]:
        """How many keys sort before each bound (unknown bounds are filled; the verdict ignores them)."""
        b = pc.fill_null(bounds, values[0]).to_numpy(zero_copy_only=False)
        at: npt.NDArray[np.intp] = np.searchsorted(keys, b, side=side)
        if b.dtype.kind == "f":
            at[np.isnan(b)] = 0  # bisect stops at 0 for a NaN bound, where numpy sorts NaN last
        return at

    # keys < lo fewer than keys <= hi: the first key >= lo is <= hi.
    return pa.array(rank(lo, "left") < rank(hi, "right"))


def _ref(column: str, path: tuple[str, ...], compared: pa.DataType) -> pc.Expression:
    """``column`` (its field at ``path`` inside it, for a nested column) as compared with values
    of type ``compared``: a float column is cast to it, which widens float16 (Arrow cannot
    compare it) and leaves any other float column as it is."""
    field = pc.field(column, *path)
    return field.cast(compared) if pa.types.is_floating(compared) else field


@dataclass(frozen=True)
class Compare(Predicate):
    """``column op value``; with a ``path``, of the field at that path inside nested column
    ``column`` (``payload.user.id``), judged by that field's statistics where a unit has them
    (a field inside structs only: ``castable.format.stats.stat_fields``)."""

    column: str
    op: str
    value: pa.Scalar
    path: tuple[str, ...] = ()

    def to_expression(self) -> pc.Expression:
        return _OPS[self.op](_ref(self.column, self.path, self.value.type), pc.scalar(self.value))

    def columns(self) -> set[str]:
        return {self.column}

    @property
    def key(self) -> str:
        """The key of the statistics that judge it (the column's, or the nested field's)."""
        return leaf_key(self.column, self.path)

    def match(self, stats: StatsLookup, rows: int) -> Match:
        b = _judge(stats(self.key), rows)
        if isinstance(b, Match):
            return b
        lo, hi, exact = b
        v = ordered(self.value)
        none, every = {
            "=": (v < lo or v > hi, lo == hi == v),
            "!=": (lo == hi == v and exact, v < lo or v > hi),
            "<": (lo >= v, hi < v),
            "<=": (lo > v, hi <= v),
            ">": (hi <= v, lo > v),
            ">=": (hi < v, lo >= v),
        }[self.op]
        if none:
            return Match.NONE
        return Match.ALL if every and exact else Match.SOME

    def match_many(self, stats: StatsColumnsLookup, rows: pa.Array) -> pa.Array:
        s = stats(self.key)
        if s is None:
            return uniform(Match.SOME, len(rows))
        value = _as_type(pa.repeat(self.value, 1), s.min.type)
        if value is None:
            return _one_by_one(self, s, rows)
        exact = _exact_many(s)
        none, every = _COMPARE_MANY[self.op](s.min, s.max, value[0], exact)
        return _judge_many(s, rows, none, pc.and_(every, exact))

    def ruled_out(self, lacks: Lacks) -> bool:
        return not self.path and self.op == "=" and lacks(self.column, pa.repeat(self.value, 1))

    def key_range(self, key: str) -> tuple[pa.Scalar | None, pa.Scalar | None] | None:
        if self.column != key or self.path or self.op == "!=":
            return None
        v = self.value
        if self.op in ("<", ">"):
            if not pa.types.is_integer(v.type):
                return None
            v = pa.scalar(v.as_py() + (1 if self.op == ">" else -1), type=v.type)
        lo = v if self.op in ("=", ">", ">=") else None
        hi = v if self.op in ("=", "<", "<=") else None
        return lo, hi


@dataclass(frozen=True)
class InList(Predicate):
    """``column [NOT] IN values``; ``path`` as for :class:`Compare`."""

    column: str
    values: pa.Array
    negated: bool = False
    path: tuple[str, ...] = ()

    def to_expression(self) -> pc.Expression:
        field = _ref(self.column, self.path, self.values.type)
        inside = field.isin(self.values)
        return (~inside if self.negated else inside) & field.is_valid()

    def columns(self) -> set[str]:
        return {self.column}

    @property
    def key(self) -> str:
        """The key of the statistics that judge it (the column's, or the nested field's)."""
        return leaf_key(self.column, self.path)

    def match(self, stats: StatsLookup, rows: int) -> Match:
        b = _judge(stats(self.key), rows)
        if isinstance(b, Match):
            return b
        lo, hi, exact = b
        values = self._sorted
        at = bisect.bisect_left(values, lo)
        if at < len(values) and values[at] <= hi:
            single = lo == hi and exact
            if self.negated:
                return Match.NONE if single else Match.SOME
            return Match.ALL if single else Match.SOME
        return Match.ALL if self.negated and exact else (Match.SOME if self.negated else Match.NONE)

    def match_many(self, stats: StatsColumnsLookup, rows: pa.Array) -> pa.Array:
        s = stats(self.key)
        if s is None:
            return uniform(Match.SOME, len(rows))
        values = _as_type(pc.drop_null(self.values), s.min.type)
        if values is None:
            return _one_by_one(self, s, rows)
        found = _any_within(values, s.min, s.max)
        exact = _exact_many(s)
        single = pc.and_(pc.equal(s.min, s.max), exact)
        if self.negated:
            return _judge_many(s, rows, pc.and_(found, single), pc.and_(pc.invert(found), exact))
        return _judge_many(s, rows, pc.invert(found), pc.and_(found, single))

    @cached_property
    def _sorted(self) -> list[Any]:
        """The listed values as Python values, sorted, once (a file's bounds are searched in it)."""
        return sorted(ordered_values(self.values))

    def key_points(self, key: str) -> pa.Array | None:
        if self.column != key or self.path or self.negated:
            return None
        return pc.unique(pc.drop_null(self.values))

    def ruled_out(self, lacks: Lacks) -> bool:
        return not self.path and not self.negated and lacks(self.column, pc.drop_null(self.values))


@dataclass(frozen=True)
class IsNull(Predicate):
    """``column IS [NOT] NULL``; ``path`` as for :class:`Compare` (a field inside a NULL struct
    is NULL, as in SQL)."""

    column: str
    negated: bool = False
    path: tuple[str, ...] = ()

    def to_expression(self) -> pc.Expression:
        field = pc.field(self.column, *self.path)
        return field.is_valid() if self.negated else field.is_null()

    def columns(self) -> set[str]:
        return {self.column}

    @property
    def key(self) -> str:
        return leaf_key(self.column, self.path)

    def match(self, stats: StatsLookup, rows: int) -> Match:
        s = stats(self.key)
        if s is None or s.null_count is None:
            return Match.SOME
        nulls = s.null_count
        if nulls == 0:
            return Match.ALL if self.negated else Match.NONE
        if nulls >= rows:
            return Match.NONE if self.negated else Match.ALL
        return Match.SOME

    def match_many(self, stats: StatsColumnsLookup, rows: pa.Array) -> pa.Array:
        s = stats(self.key)
        if s is None:
            return uniform(Match.SOME, len(rows))
        no_null, all_null = (Match.ALL, Match.NONE) if self.negated else (Match.NONE, Match.ALL)
        some_null = pc.if_else(pc.greater_equal(s.nulls, rows), verdict_code(all_null), verdict_code(Match.SOME))
        verdict = pc.if_else(pc.equal(s.nulls, 0), verdict_code(no_null), some_null)
        return pc.fill_null(verdict, verdict_code(Match.SOME))  # an unknown null count


@dataclass(frozen=True)
class Like(Predicate):
    """``column [NOT] [I]LIKE pattern``; ``path`` as for :class:`Compare`."""

    column: str
    pattern: str
    negated: bool = False
    ignore_case: bool = False
    path: tuple[str, ...] = ()

    def to_expression(self) -> pc.Expression:
        field = pc.field(self.column, *self.path)
        like = pc.match_like(field, self.pattern, ignore_case=self.ignore_case)
        return (~like if self.negated else like) & field.is_valid()

    def columns(self) -> set[str]:
        return {self.column}


@dataclass(frozen=True)
class Constant(Predicate):
    value: bool

    def to_expression(self) -> pc.Expression:
        return pc.scalar(self.value)

    def columns(self) -> set[str]:
        return set()

    def match(self, stats: StatsLookup, rows: int) -> Match:
        return Match.ALL if self.value else Match.NONE

    def match_many(self, stats: StatsColumnsLookup, rows: pa.Array) -> pa.Array:
        return uniform(Match.ALL if self.value else Match.NONE, len(rows))


@dataclass(frozen=True)
class _Junction(Predicate):
    """AND / OR of several predicates: one operator, and the verdict that decides it alone."""

    parts: tuple[Predicate, ...]
    join: ClassVar[Callable[[Any, Any], Any]]
    decisive: ClassVar[Match]
    neutral: ClassVar[Match]
    fold: ClassVar[Callable[[pa.Array, pa.Array], pa.Array]]  # element-wise min (AND) or max (OR) of the codes

    def to_expression(self) -> pc.Expression:
        return functools.reduce(type(self).join, (p.to_expression() for p in self.parts))

    def columns(self) -> set[str] | None:
        return _union_columns(self.parts)

    def match(self, stats: StatsLookup, rows: int) -> Match:
        results = [p.match(stats, rows) for p in self.parts]
        if self.decisive in results:
            return self.decisive
        return self.neutral if all(r is self.neutral for r in results) else Match.SOME

    def match_many(self, stats: StatsColumnsLookup, rows: pa.Array) -> pa.Array:
        verdicts = (p.match_many(stats, rows) for p in self.parts)
        return functools.reduce(type(self).fold, verdicts, uniform(self.neutral, len(rows)))


class And(_Junction):
    join = operator.and_
    decisive = Match.NONE
    neutral = Match.ALL
    fold = pc.min_element_wise

    def ruled_out(self, lacks: Lacks) -> bool:
        return any(p.ruled_out(lacks) for p in self.parts)

    def key_range(self, key: str) -> tuple[pa.Scalar | None, pa.Scalar | None] | None:
        lo: pa.Scalar | None = None
        hi: pa.Scalar | None = None
        for p in self.parts:
            r = p.key_range(key)
            if r is None:
                return None
            if r[0] is not None and (lo is None or ordered(r[0]) > ordered(lo)):
                lo = r[0]
            if r[1] is not None and (hi is None or ordered(r[1]) < ordered(hi)):
                hi = r[1]
        return lo, hi


class Or(_Junction):
    join = operator.or_
    decisive = Match.ALL
    neutral = Match.NONE
    fold = pc.max_element_wise

    def ruled_out(self, lacks: Lacks) -> bool:
        return bool(self.parts) and all(p.ruled_out(lacks) for p in self.parts)


@dataclass(frozen=True)
class Not(Predicate):
    part: Predicate

    def to_expression(self) -> pc.Expression:
        return ~self.part.to_expression()

    def columns(self) -> set[str] | None:
        return self.part.columns()

    def match(self, stats: StatsLookup, rows: int) -> Match:
        # NOT of "every row true" is "no row true"; nothing else follows once NULLs are possible.
        return Match.NONE if self.part.match(stats, rows) is Match.ALL else Match.SOME

    def match_many(self, stats: StatsColumnsLookup, rows: pa.Array) -> pa.Array:
        every = pc.equal(self.part.match_many(stats, rows), verdict_code(Match.ALL))
        return pc.if_else(every, verdict_code(Match.NONE), verdict_code(Match.SOME))


@dataclass(frozen=True)
class ArrowPredicate(Predicate):
    """A ``pyarrow.compute.Expression`` given by the caller, evaluated as is."""

    expression: pc.Expression

    def to_expression(self) -> pc.Expression:
        return self.expression

    def columns(self) -> None:
        return None


def _union_columns(parts: tuple[Predicate, ...]) -> set[str] | None:
    out: set[str] = set()
    for p in parts:
        cols = p.columns()
        if cols is None:
            return None
        out |= cols
    return out


def renamed(predicate: Predicate, names: Mapping[str, str]) -> Predicate:
    """``predicate`` with the columns ``names`` maps renamed (the others as they are): the same
    test, put to a version of the table whose schema named those columns otherwise."""
    if isinstance(predicate, _Junction):
        return replace(predicate, parts=tuple(renamed(p, names) for p in predicate.parts))
    if isinstance(predicate, Not):
        return Not(renamed(predicate.part, names))
    if isinstance(predicate, Compare | InList | IsNull | Like) and predicate.column in names:
        return replace(predicate, column=names[predicate.column])
    return predicate
