"""Reads from S3 as S3 rewards them: one client per process, the open's requests overlapped,
large ranges fetched as parallel pieces, and row groups read ahead by a byte budget."""

from __future__ import annotations

import itertools
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import castable
from castable.store.ranges import split
from castable.store.readahead import beside, read_ahead

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("value", pa.string())])


def id_rows(start: int, stop: int) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(start, stop), pa.int64()), "value": [f"v{i:08d}" for i in range(start, stop)]}
    )


class _Weighed:
    """A task of a known size that records how much was running beside it."""

    def __init__(self, i: int, size: int, running: dict[str, int], lock: threading.Lock) -> None:
        self.i, self.weight, self.running, self.lock = i, size, running, lock

    def size(self) -> int:
        return self.weight

    def __call__(self) -> int:
        with self.lock:
            self.running["now"] += self.weight
            self.running["most"] = max(self.running["most"], self.running["now"])
        time.sleep(0.01)
        with self.lock:
            self.running["now"] -= self.weight
        return self.i


def test_read_ahead_keeps_within_its_byte_budget_and_order() -> None:
    running = {"now": 0, "most": 0}
    lock = threading.Lock()
    sizes = [30, 10, 50, 20, 20, 40, 10, 10, 90, 5] * 3
    tasks = [_Weighed(i, s, running, lock) for i, s in enumerate(sizes)]
    assert list(read_ahead(iter(tasks), 16, budget=100)) == list(range(len(sizes)))
    assert 0 < running["most"] <= 100
    running["most"] = 0
    assert list(read_ahead(iter(tasks), 16, budget=0)) == list(range(len(sizes)))
    assert running["most"] > 100, "without a budget, the depth alone limits what runs"


def test_a_task_over_the_whole_budget_still_runs() -> None:
    running = {"now": 0, "most": 0}
    task = _Weighed(7, 500, running, threading.Lock())
    assert list(read_ahead(iter([task]), 4, budget=100)) == [7]


def test_beside_runs_both_and_reports_the_first_failure() -> None:
    threads: list[str] = []

    def name(tag: str) -> str:
        threads.append(threading.current_thread().name)
        return tag

    assert beside(partial(name, "a"), partial(name, "b")) == ("a", "b")
    assert len(set(threads)) == 2, "the side ran on a pool thread"

    def fail() -> str:
        raise ValueError("main failed")

    with pytest.raises(ValueError, match="main failed"):
        beside(fail, partial(name, "c"))


@pytest.mark.parametrize(("start", "end", "piece"), [(0, 1, 8), (4, 20, 8), (0, 16, 8), (3, 3 + 100_003, 8192)])
def test_split_covers_the_range_exactly_in_equal_pieces(start: int, end: int, piece: int) -> None:
    pieces = split(start, end, piece)
    assert pieces[0][0] == start and pieces[-1][1] == end
    assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))
    lengths = [b - a for a, b in pieces]
    assert max(lengths) <= piece and max(lengths) - min(lengths) <= 1


"""Each GET :func:`_gets` saw: its key, and when it was held from and to."""


def test_a_failed_read_ahead_of_a_version_not_needed_fails_nothing(tmp_path: Path) -> None:
    """The next version is read beside the pointer's; if the search stops at the pointer's (a
    database member, a writer with a newer base), an error reading the next one is not raised."""
    from castable.commit.log import newest_log_entry, read_manifest
    from castable.store import LocalStore, StoreUnavailableError

    castable.create_table(str(tmp_path / "t"), SCHEMA).append(id_rows(0, 3))
    store = LocalStore(tmp_path / "t")

    def read(version: int) -> Any:
        if version == 2:
            raise StoreUnavailableError("the store is down for version 2")
        return read_manifest(store, version)

    entry, pointer = newest_log_entry(store, read, owner=lambda m: m.table_uuid, done=lambda m: True)
    assert entry.version == pointer.version == 1
    with pytest.raises(StoreUnavailableError, match="down for version 2"):
        newest_log_entry(store, read, owner=lambda m: m.table_uuid)
