"""What a run measured: the operations and roles, and each system's samples per operation and scale."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

APPEND = "append whole table"
SCATTERED = "delete 1,000 scattered keys"
RANGE = "delete 1 key range"
FULL = "full scan"
FILTERED = "filtered scan"
S3_FULL = "full scan, moto S3"
S3_FILTERED = "filtered scan, moto S3"
UPSERT = "upsert 10,000 rows"
REPLACE = "replace-where 1% (event_time range)"
UPSERTED_SCAN = "full scan after upserts"
UPSERTS = "upserts before compaction, each"
COMPACT = "compact after upserts"
COMMIT = "commit 10-row append"
NEW_ROWS = "pyarrow, the new rows alone as one Parquet file"
SUBJECT, PEER, FLOOR, REFERENCE = "subject", "peer", "floor", "reference"
SMALL_ROWS = 10


@dataclass
class Result:
    """The samples of one operation at one scale for one system (or reader)."""

    op: str
    scale: int
    system: str
    family: str
    role: str
    times: list[float] = field(default_factory=list)
    written: list[int] = field(default_factory=list)
    rewritten: list[int] = field(default_factory=list)
    rows_out: int | None = None
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times)


class Results:
    """All results of a run, keyed by (operation, scale, system), in the order they were first seen."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, int, str], Result] = {}

    def get(self, op: str, scale: int, system: str, family: str, role: str) -> Result:
        key = (op, scale, system)
        if key not in self.items:
            self.items[key] = Result(op, scale, system, family, role)
        return self.items[key]

    def find(self, op: str, scale: int, system: str) -> Result | None:
        r = self.items.get((op, scale, system))
        return r if r is not None and r.times else None

    def group(self, op: str, scale: int) -> list[Result]:
        return [r for r in self.items.values() if r.op == op and r.scale == scale and r.times]

    def floor(self, op: str, scale: int) -> Result | None:
        return next((r for r in self.group(op, scale) if r.role == FLOOR), None)

    def best_peer(self, r: Result) -> Result | None:
        """The fastest system or reader of another family than ``r`` (the floor and references excluded)."""
        rivals = [x for x in self.group(r.op, r.scale) if x.role in (SUBJECT, PEER) and x.family != r.family]
        return min(rivals, key=lambda x: x.median, default=None)

    def fastest(self, op: str, scale: int, role: str) -> Result | None:
        return min((r for r in self.group(op, scale) if r.role == role), key=lambda x: x.median, default=None)
