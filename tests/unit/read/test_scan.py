"""Scans: every way a row group's deletes are applied gives the rows a plain model gives, warm
or cold; the shared reader pool survives forks, nesting and abandoned scans."""

from __future__ import annotations

import multiprocessing
import operator
import threading
import time
from collections.abc import Callable, Generator
from functools import partial
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers.tables import FILES_ONLY

import castable
from castable.read.scan import BUNDLE_BYTES, Scan
from castable.store.readahead import WORKERS, read_ahead

ROWS = 20_000
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("value", pa.string())])


def id_rows(start: int, stop: int) -> pa.Table:
    ids = pa.array(range(start, stop), pa.int64())
    return pa.table([ids, pc.cast(ids, pa.string())], schema=SCHEMA)


@pytest.fixture
def keyed(table_uri: tuple[str, dict[str, str] | None]) -> castable.Table:
    """One file of one row group of ``ROWS`` rows, keyed by id."""
    uri, options = table_uri
    table = castable.create_table(uri, SCHEMA, primary_key="id", storage_options=options)
    table.append(id_rows(0, ROWS))
    return table


DELETES = {
    # Few deletes, long live runs between them: dropped by slicing, the ends included.
    "sparse keys": ["id IN (0, 1, 7, 9999, 19998, 19999)"],
    # So many deletes that copying the live rows once, by a mask, is cheaper than slicing.
    "dense keys": [f"id IN ({', '.join(str(i) for i in range(0, ROWS, 3))})"],
    "key range": ["id BETWEEN 100 AND 5000"],
    "by position": ["value LIKE '%7'"],
    "mixed": ["id IN (3, 4, 5)", "id BETWEEN 15000 AND 15100", "value LIKE '%42'"],
}


def _model(deleted: list[str]) -> pa.Table:
    """The live rows, worked out with pyarrow alone."""
    rows = id_rows(0, ROWS)
    ids = rows.column("id").to_pylist()
    gone = set()
    for text in deleted:
        if text.startswith("id IN"):
            gone |= {int(v) for v in text[text.index("(") + 1 : -1].split(",")}
        elif text.startswith("id BETWEEN"):
            lo, hi = (int(v) for v in text.split()[2::2])
            gone |= set(range(lo, hi + 1))
        else:
            suffix = text.split("'%")[1].rstrip("'")
            gone |= {i for i in ids if str(i).endswith(suffix)}
    return rows.filter(pa.array([i not in gone for i in ids]))


@pytest.mark.parametrize("case", list(DELETES))
def test_deletes_apply_alike_warm_and_cold_with_and_without_a_filter(keyed: castable.Table, case: str) -> None:
    for text in DELETES[case]:
        keyed.delete(text)
    model = _model(DELETES[case])
    in_range = model.filter((pc.field("id") >= 4000) & (pc.field("id") <= 16000))
    for _ in range(2):  # cold: key deletes matched against the key column; then warm, from the kept positions
        assert keyed.scan().to_arrow().equals(model)
        assert keyed.scan(["value"]).to_arrow().equals(model.select(["value"]))
        assert keyed.scan(["value"], "id BETWEEN 4000 AND 16000").to_arrow().equals(in_range.select(["value"]))
        assert keyed.count() == model.num_rows
        castable.clear_caches()
    # A filtered scan first (deletes matched against the filter's rows only), then a full one.
    assert keyed.scan(["value"], "id BETWEEN 4000 AND 16000").to_arrow().equals(in_range.select(["value"]))
    assert keyed.scan(["value"]).to_arrow().equals(model.select(["value"]))


def test_small_files_read_in_bundles_keep_their_order_deletes_and_filter(
    table_uri: tuple[str, dict[str, str] | None],
) -> None:
    """Small files are read several to a pool task: rows still come in file order, each file's
    deletes applied, around a file too large to bundle and under a byte budget of one part."""
    uri, options = table_uri
    table = castable.create_table(uri, SCHEMA, primary_key="id", properties=FILES_ONLY, storage_options=options)
    spans = [(i * 10, i * 10 + 10) for i in range(150)]
    spans.insert(70, (10_000, 10_000 + 400_000))  # more than BUNDLE_BYTES of file
    for start, stop in spans:
        table.append(id_rows(start, stop))
    assert sum(f.size >= BUNDLE_BYTES for f in table.scan().files()) == 1
    table.delete("id IN (3, 15, 719, 1499, 10000, 409999)")
    model = pa.concat_tables(id_rows(a, b) for a, b in spans)
    model = model.filter(pc.invert(pc.is_in(model.column("id"), pa.array([3, 15, 719, 1499, 10000, 409999]))))
    wanted = model.filter(pc.field("value").isin(["7", "1400", "10001"]))
    predicate = table.scan(filter="value IN ('7', '1400', '10001')").predicate
    for budget in (None, 1):
        castable.clear_caches()
        assert Scan(table.snapshot(), readahead_bytes=budget).to_arrow().equals(model)
        assert Scan(table.snapshot(), predicate=predicate, readahead_bytes=budget).to_arrow().equals(wanted)


def _in_child(queue: multiprocessing.Queue[list[int]]) -> None:
    queue.put(list(read_ahead((partial(pow, i, 2) for i in range(20)), 4)))


def test_the_pool_works_in_a_forked_child() -> None:
    assert list(read_ahead((partial(int, i) for i in range(10)), 4)) == list(range(10))  # the parent's pool is up
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[list[int]] = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    assert queue.get(timeout=30) == [i * i for i in range(20)]
    child.join(30)
    assert child.exitcode == 0


def test_tasks_that_read_ahead_themselves_do_not_wait_behind_each_other() -> None:
    """More outer tasks than the pool has threads, each reading ahead in turn: the inner tasks run
    inline on the worker, so nothing waits for a thread that is waiting for it."""

    def outer(i: int) -> int:
        return sum(read_ahead((partial(operator.add, i, j) for j in range(5)), 3))

    result: list[int] = []
    runner = threading.Thread(
        target=lambda: result.extend(read_ahead((partial(outer, i) for i in range(3 * WORKERS)), WORKERS))
    )
    runner.start()
    runner.join(60)
    assert not runner.is_alive(), "deadlocked"
    assert result == [5 * i + 10 for i in range(3 * WORKERS)]


def test_an_abandoned_read_ahead_cancels_what_has_not_started_and_waits_for_the_rest() -> None:
    started: list[int] = []
    finished: list[int] = []

    def task(i: int) -> Callable[[], int]:
        def run() -> int:
            started.append(i)
            time.sleep(0.05)
            finished.append(i)
            return i

        return run

    reader = cast(Generator[int, None, None], read_ahead((task(i) for i in range(100)), 4))  # closable
    assert next(reader) == 0
    reader.close()
    assert sorted(started) == sorted(finished), "no task is still running once the reader is closed"
    assert len(started) < 10
