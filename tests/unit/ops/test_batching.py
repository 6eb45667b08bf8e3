"""BatchWriter: many small appends, few commits, nothing lost or doubled."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.tables import EVENTS, events

import castable
from castable.table import Table


@pytest.fixture
def table(tmp_path: Path) -> Table:
    return castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id")


def test_commits_every_max_rows_and_the_rest_on_exit(table: Table) -> None:
    with table.batch_writer(max_rows=10) as writer:
        committed = [writer.append(events(i, i + 1)) for i in range(25)]
        assert writer.pending_rows == 5
    assert [r.version for r in committed if r is not None] == [1, 2]
    assert writer.versions == [1, 2, 3]
    assert sorted(table.scan(["id"]).to_arrow().column("id").to_pylist()) == list(range(25))


def test_commits_when_the_oldest_row_has_waited_long_enough(table: Table) -> None:
    writer = table.batch_writer(max_seconds=0.05)
    assert writer.append(events(0, 1)) is None
    time.sleep(0.1)
    flushed = writer.append(events(1, 2))
    assert flushed is not None and flushed.version == 1 and flushed.rows_added == 2
    assert writer.pending_rows == 0 and table.count() == 2


def test_an_exception_in_the_block_commits_nothing_buffered(table: Table) -> None:
    with pytest.raises(RuntimeError), table.batch_writer() as writer:
        writer.append(events(0, 5))
        raise RuntimeError("producer failed")
    assert table.refresh().version == 0


def test_a_bad_batch_fails_at_its_own_call_and_spoils_nothing(table: Table) -> None:
    with table.batch_writer() as writer:
        writer.append(events(0, 3))
        with pytest.raises(castable.SchemaMismatchError):
            writer.append(pa.table({"id": [1.5]}))
        writer.append(events(3, 4))
    assert table.count() == 4 and writer.versions == [1]


def test_a_rerun_with_the_same_prefix_commits_nothing_twice(table: Table) -> None:
    for _ in range(2):
        with table.batch_writer(max_rows=4, commit_id_prefix="load-2026-11-23") as writer:
            for i in range(10):
                writer.append(events(i, i + 1))
        assert writer.versions == [1, 2, 3]
    assert table.count() == 10


def test_bad_limits_are_refused(table: Table) -> None:
    with pytest.raises(castable.InvalidInputError):
        table.batch_writer(max_rows=0)
