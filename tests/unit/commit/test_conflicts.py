"""The conflict model: each footprint field against each kind of concurrent commit."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from helpers.tables import EVENTS

from castable.commit.conflicts import Commits, Footprint, Verdict, check_member, check_sources, judge, judge_base
from castable.errors import CommitConflictError
from castable.format.manifest import CommitInfo, DataFile, Manifest, TombstoneFile
from castable.format.stats import ColumnStats, stats_to_json
from castable.read.where import parse_predicate


def data_file(path: str, lo: int, hi: int) -> DataFile:
    stats = ColumnStats(min=pa.scalar(lo), max=pa.scalar(hi), null_count=0)
    return DataFile(path, 100, "etag", rows=hi - lo + 1, row_groups=1, stats=stats_to_json({"id": stats}))


A, B, C = (
    data_file("data/a.parquet", 0, 99),
    data_file("data/b.parquet", 100, 199),
    data_file("data/c.parquet", 200, 299),
)
T1 = TombstoneFile("tombstone/1.del", 10, "e", ("data/a.parquet",))
BASE = Manifest(
    table_uuid="u",
    version=5,
    previous=4,
    created_at=datetime.now(UTC),
    schema=EVENTS,
    primary_key=("id",),
    properties={},
    commit=CommitInfo("append", "x"),
    data_files=(A, B),
    tombstones=(T1,),
)


def newer(**changes: object) -> Commits:
    return Commits.between(BASE, replace(BASE, version=6, **changes))  # type: ignore[arg-type]


def test_what_was_committed_is_seen() -> None:
    t2 = TombstoneFile("tombstone/2.del", 10, "e", ("data/b.parquet",))
    c = newer(data_files=(B, C), tombstones=(t2,))
    assert c.removed == {"data/a.parquet"} and [f.path for f in c.added] == ["data/c.parquet"]
    assert c.deleted_in == {"data/b.parquet"} and c.tombstones_removed == {"tombstone/1.del"}


@pytest.mark.parametrize(
    ("footprint", "changes", "verdict"),
    [
        (Footprint(targets=frozenset({A.path})), {"data_files": (B, C)}, Verdict.REPLAN),  # a target compacted away
        (Footprint(targets=frozenset({A.path})), {"data_files": (A, B, C)}, Verdict.KEEP),  # an append
        (
            Footprint(targets=frozenset({A.path})),
            {"tombstones": (T1, TombstoneFile("tombstone/2.del", 1, "e", (A.path,)))},
            Verdict.KEEP,
        ),  # deleting twice is harmless
        (
            Footprint(reads=frozenset({A.path})),
            {"tombstones": (T1, TombstoneFile("tombstone/2.del", 1, "e", (A.path,)))},
            Verdict.REPLAN,
        ),  # rows it copied were deleted meanwhile
        (Footprint(reads=frozenset({A.path})), {"data_files": (B,)}, Verdict.REPLAN),
        (Footprint(reads=frozenset({A.path})), {"data_files": (A, B, C)}, Verdict.KEEP),
        (Footprint(merges=frozenset({T1.path})), {"tombstones": ()}, Verdict.REPLAN),
        (Footprint(merges=frozenset({T1.path})), {"data_files": (A, B, C)}, Verdict.KEEP),
        (Footprint(claims=parse_predicate("id >= 300", EVENTS)), {"data_files": (A, B, C)}, Verdict.KEEP),
    ],
)
def test_verdicts(footprint: Footprint, changes: dict, verdict: Verdict) -> None:
    assert judge(footprint, newer(**changes), operation="test") is verdict


def test_claimed_rows_added_meanwhile_are_a_conflict() -> None:
    """A replace-where must not silently drop rows another writer added inside its range."""
    claims = parse_predicate("id BETWEEN 250 AND 260", EVENTS)
    with pytest.raises(CommitConflictError, match=r"overwrite conflicts .* data/c\.parquet"):
        judge(Footprint(claims=claims), newer(data_files=(A, B, C)), operation="overwrite")


def test_a_change_holds_across_a_schema_change_only_if_it_declares_it() -> None:
    widened = replace(BASE, version=6, schema=EVENTS.set(2, pa.field("value", pa.float64(), nullable=False)))
    judge_base(BASE, widened, operations="append", across_schema=True)
    judge_base(BASE, replace(BASE, version=6), operations="delete", across_schema=False)  # same schema
    with pytest.raises(CommitConflictError, match="delete was planned on the schema of version 5"):
        judge_base(BASE, widened, operations="delete", across_schema=False)


def test_an_input_consumed_by_a_recent_commit_is_a_conflict() -> None:
    consumed = BASE.next(
        commit=CommitInfo("append", "y"),
        created_at=datetime.now(UTC),
        data_files=BASE.data_files,
        tombstones=BASE.tombstones,
        commit_retention=10,
        source_ids=("s3://in/a.parquet@e1",),
    )
    check_sources(consumed, ("s3://in/b.parquet@e1",))
    with pytest.raises(CommitConflictError, match=r"already appended \(version 6\)"):
        check_sources(consumed, ("s3://in/a.parquet@e1", "s3://in/b.parquet@e1"))


def test_a_member_table_dropped_or_recreated_meanwhile_is_a_conflict() -> None:
    check_member("orders", BASE.table_uuid, BASE, 7)
    for found in (None, "another-uuid"):
        with pytest.raises(CommitConflictError, match="'orders' was dropped or re-created by database version 7"):
            check_member("orders", found, BASE, 7)
