"""Pruning by partition values (docs/format.md section 4.2): what a file's partition tells of its rows.

Every row of a file has the file's partition values, so a value tells bounds of the source column
(``day(ts) = 19723``: every ``ts`` lies in that day; ``region = 'eu'``: every region is ``eu``) and
that the column holds no null (a null source value has a null partition value; ``void`` aside).
Those bounds are intersected with the file's own statistics, so every judge of
:mod:`castable.read.predicate` uses them, ``ALL`` included: a delete of whole partitions drops
files unread. ``bucket`` tells no bounds; an equality or ``IN`` on its column is judged
separately, against the bucket of each listed value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from castable.format.nested import field_id
from castable.format.partitioning import PartitionField, Partitioning, source_field
from castable.format.stats import JsonValue, compared_type, decode_values
from castable.read.predicate import (
    And,
    Compare,
    InList,
    Match,
    Or,
    Predicate,
    StatsColumns,
    StatsColumnsLookup,
    uniform,
    verdict_code,
)


@dataclass(frozen=True)
class FilePartitions:
    """The spec id and partition values of many files, in order, under one partitioning."""

    partitioning: Partitioning
    schema: pa.Schema
    spec_ids: Sequence[int]
    values: Sequence[tuple[JsonValue | None, ...]]

    def spec_fields(self, spec_id: int, source_id: int) -> list[tuple[int, PartitionField]]:
        """(position in the spec, field) of each field of spec ``spec_id`` that tells of the column ``source_id``."""
        spec = self.partitioning.spec(spec_id)
        return [(i, f) for i, f in enumerate(spec.fields) if f.source_id == source_id and f.transform.name != "void"]

    def stats(self, column: str) -> StatsColumns | None:
        """What the partition values tell of ``column`` in each file (``None``: nothing, anywhere)."""
        if column not in self.schema.names:
            return None
        fid = field_id(self.schema.field(column))
        if fid is None or not any(self.spec_fields(s.spec_id, fid) for s in self.partitioning.specs):
            return None
        source = self.schema.field(column).type
        lows: list[JsonValue | None] = []
        highs: list[JsonValue | None] = []
        nulls: list[int | None] = []
        for spec_id, values in zip(self.spec_ids, self.values, strict=True):
            lo = hi = None
            null: int | None = None
            for i, f in self.spec_fields(spec_id, fid) if values else []:
                value = values[i]
                if value is None:
                    null = -1  # every row is null: filled with the file's row count below
                    continue
                null = 0 if null is None else null
                bounds = f.transform.bounds(value, source)
                if bounds is not None:
                    lo = bounds[0] if lo is None else max(lo, bounds[0])
                    hi = bounds[1] if hi is None else min(hi, bounds[1])
            lows.append(lo)
            highs.append(hi)
            nulls.append(null)
        t = compared_type(source)
        return StatsColumns(
            decode_values(lows, source).cast(t), decode_values(highs, source).cast(t), pa.array(nulls, pa.int64())
        )

    def buckets(self, predicate: Predicate, rows: pa.Array) -> pa.Array:
        """The verdicts the bucket fields give each file: NONE where no listed value hashes to a
        file's bucket (or a file's column is all null), else SOME."""
        return _bucket_verdicts(self, predicate, len(rows))


def narrowed(stats: StatsColumnsLookup, partitions: FilePartitions, rows: pa.Array) -> StatsColumnsLookup:
    """``stats`` (the files' own) intersected with what their partition values tell (worked out
    once per column, however many parts of a predicate ask)."""
    told_of: dict[str, StatsColumns | None] = {}

    def lookup(column: str) -> StatsColumns | None:
        if column not in told_of:
            told_of[column] = partitions.stats(column)
        own, told = stats(column), told_of[column]
        if told is None:
            return own
        nulls = pc.if_else(pc.equal(told.nulls, -1), rows, told.nulls)
        if own is None:
            return StatsColumns(told.min, told.max, nulls)
        return StatsColumns(
            _tighter(own.min, told.min, pc.greater),
            _tighter(own.max, told.max, pc.less),
            pc.coalesce(nulls, own.nulls),
        )

    return lookup


def _tighter(a: pa.Array, b: pa.Array, first: Callable[[pa.Array, pa.Array], pa.Array]) -> pa.Array:
    """Element-wise the bound of ``a`` and ``b`` that ``first(a, b)`` prefers, either where the other is unknown."""
    b = b.cast(a.type)
    return pc.coalesce(pc.if_else(first(a, b), a, b), a, b)


def _bucket_verdicts(partitions: FilePartitions, predicate: Predicate, n: int) -> pa.Array:
    if isinstance(predicate, And):
        out = uniform(Match.SOME, n)
        for p in predicate.parts:
            out = pc.min_element_wise(out, _bucket_verdicts(partitions, p, n))
        return out
    if isinstance(predicate, Or):
        out = uniform(Match.NONE, n)
        for p in predicate.parts:
            out = pc.max_element_wise(out, _bucket_verdicts(partitions, p, n))
        return out
    if isinstance(predicate, Compare) and predicate.op == "=" and not predicate.path:
        return _bucket_of(partitions, predicate.column, pa.repeat(predicate.value, 1), n)
    if isinstance(predicate, InList) and not predicate.negated and not predicate.path:
        return _bucket_of(partitions, predicate.column, predicate.values, n)
    return uniform(Match.SOME, n)


def _bucket_of(partitions: FilePartitions, column: str, listed: pa.Array, n: int) -> pa.Array:
    """NONE for files whose bucket of ``column`` none of ``listed`` has, SOME otherwise."""
    schema = partitions.schema
    if column not in schema.names or (fid := field_id(schema.field(column))) is None:
        return uniform(Match.SOME, n)
    source = source_field(schema, fid).type
    try:
        listed = listed.drop_null().cast(source)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return uniform(Match.SOME, n)
    hashed: dict[int, set[int]] = {}
    ruled_out = []
    for spec_id, values in zip(partitions.spec_ids, partitions.values, strict=True):
        out = False
        for i, f in partitions.spec_fields(spec_id, fid) if values else []:
            if f.transform.name != "bucket":
                continue
            if f.field_id not in hashed:
                hashed[f.field_id] = set(f.transform.apply(listed).to_pylist())
            out = out or values[i] is None or values[i] not in hashed[f.field_id]
        ruled_out.append(out)
    return pc.if_else(pa.array(ruled_out, pa.bool_()), verdict_code(Match.NONE), verdict_code(Match.SOME))


def judged(predicate: Predicate, stats: StatsColumnsLookup, rows: pa.Array, partitions: FilePartitions) -> pa.Array:
    """:meth:`Predicate.match_many` of files by their statistics and their partition values."""
    verdicts = predicate.match_many(narrowed(stats, partitions, rows), rows)
    return pc.if_else(
        pc.equal(partitions.buckets(predicate, rows), verdict_code(Match.NONE)), verdict_code(Match.NONE), verdicts
    )
