"""The inputs every system is given alike: the layout, the event table, and its deletes, upserts and replace-wheres."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.expressions import And, BooleanExpression, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

from bench.common.benchlib import SCHEMA, event_batches


@dataclass(frozen=True)
class Layout:
    """The physical layout every system is asked for, so that only the table formats differ."""

    codec: str
    file_bytes: int
    row_group_rows: int


@dataclass(frozen=True)
class DeleteCase:
    """One delete, the same for every system: a set of scattered keys or an inclusive key range."""

    keys: tuple[int, ...] = ()
    lo: int = 0
    hi: int = -1

    def sql(self) -> str:
        if self.keys:
            return f"id IN ({', '.join(map(str, self.keys))})"
        return f"id BETWEEN {self.lo} AND {self.hi}"

    def expression(self) -> pc.Expression:
        if self.keys:
            return pc.field("id").isin(list(self.keys))
        return (pc.field("id") >= self.lo) & (pc.field("id") <= self.hi)

    def iceberg(self) -> BooleanExpression:
        if self.keys:
            return In("id", set(self.keys))
        return And(GreaterThanOrEqual("id", self.lo), LessThanOrEqual("id", self.hi))


def delete_cases(rows: int, repeats: int) -> list[tuple[DeleteCase, DeleteCase]]:
    """Per repeat, a scattered and a key-range delete (fixed seed); ranges stay clear of the scan range."""
    rng = np.random.default_rng(7)
    count = key_count(rows)
    out = []
    for r in range(repeats):
        keys = tuple(sorted(rng.choice(rows, count, replace=False).tolist()))
        lo = (rows // 8) * (1 + r % 3) + r * count
        out.append((DeleteCase(keys=keys), DeleteCase(lo=lo, hi=lo + count - 1)))
    return out


def key_count(rows: int) -> int:
    """Keys per delete: 1,000, or a tenth of a tiny (smoke-test) table."""
    return min(1000, max(1, rows // 10))


def scan_range(rows: int) -> tuple[int, int]:
    """The filtered scan's 1% key range, in the upper half of the table."""
    lo = rows * 3 // 4
    return lo, lo + max(1, rows // 100) - 1


def generate(rows: int) -> pa.Table:
    """The synthetic event table of ``rows`` rows, in memory."""
    return pa.Table.from_batches(list(event_batches(rows)), schema=SCHEMA)


def time_axis() -> tuple[int, int]:
    """The generator's event_time of id 0 and its step per id, in microseconds: it increases with id."""
    first, second = next(event_batches(2)).column("event_time").cast(pa.int64()).to_pylist()
    return first, second - first


def event_rows(ids: np.ndarray, seed: int) -> pa.Table:
    """Rows with these ids and the generator's event_time for them, with new payloads and categories."""
    origin, step = time_axis()
    rows = pa.Table.from_batches(list(event_batches(len(ids), seed=seed)), schema=SCHEMA)
    rows = rows.set_column(0, SCHEMA.field("id"), pa.array(ids, pa.int64()))
    return rows.set_column(
        1, SCHEMA.field("event_time"), pa.array(origin + ids * step, SCHEMA.field("event_time").type)
    )


def upsert_count(rows: int) -> int:
    """Rows per upsert: 10,000, or a tenth of a tiny (smoke-test) table."""
    return min(10_000, max(2, rows // 10))


def upsert_rows(rows: int, count: int) -> Iterator[pa.Table]:
    """``count`` upserts in turn (fixed seed, the same for every system): each half new keys past the
    current maximum, half existing keys scattered over the table, all with new payloads."""
    rng = np.random.default_rng(11)
    half = upsert_count(rows) // 2
    for r in range(count):
        old = np.sort(rng.choice(rows, half, replace=False))
        new = np.arange(rows + r * half, rows + (r + 1) * half)
        yield event_rows(np.concatenate([old, new]), seed=100 + r)


@dataclass(frozen=True)
class ReplaceCase:
    """One replace-where, the same for every system: the rows whose event_time lies in
    ``start..end`` (end excluded) replaced by ``rows``, every one of which lies in it too."""

    start: datetime
    end: datetime
    rows: pa.Table

    def sql(self) -> str:
        return f"event_time >= '{self.start.isoformat()}' AND event_time < '{self.end.isoformat()}'"

    def expression(self) -> pc.Expression:
        kind = SCHEMA.field("event_time").type
        return (pc.field("event_time") >= pa.scalar(self.start, kind)) & (
            pc.field("event_time") < pa.scalar(self.end, kind)
        )

    def iceberg(self) -> BooleanExpression:
        return And(
            GreaterThanOrEqual("event_time", self.start.isoformat()), LessThan("event_time", self.end.isoformat())
        )


def replace_cases(rows: int, repeats: int) -> list[ReplaceCase]:
    """Per repeat, another contiguous 1% of the ids (their event_time range, since event_time grows with
    id), replaced by as many new rows with the same ids and times and new payloads."""
    origin, step = time_axis()
    n = max(1, rows // 100)
    out = []
    for r in range(repeats):
        lo = (rows // 10) * (1 + r % 8) + (r // 8) * n
        start, end = (
            datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=origin + i * step) for i in (lo, lo + n)
        )
        out.append(ReplaceCase(start, end, event_rows(np.arange(lo, lo + n), seed=200 + r)))
    return out


def write_parquet(path: Path, data: pa.Table, layout: Layout) -> None:
    """``data`` as one plain Parquet file with the layout's codec and row-group size."""
    pq.write_table(data, path, compression=layout.codec, row_group_size=layout.row_group_rows)
