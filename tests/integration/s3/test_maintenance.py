"""Compaction, snapshot expiry and garbage collection, on both stores.

The tests here need a server, a JVM, a side venv or minutes; the rest are the unit tier's
(tests/unit/maintenance/test_maintenance.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers.tables import EVENTS
from unit.maintenance.test_maintenance import ids

import castable


@pytest.mark.slow
def test_maintenance_while_processes_write(table_uri: tuple[str, dict | None]) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from helpers.workers import append_and_delete, expected_ids, maintain

    uri, options = table_uri
    castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    with ProcessPoolExecutor(5, mp_context=multiprocessing.get_context("spawn")) as pool:
        keeper = pool.submit(maintain, uri, options, 20.0)
        writers = [pool.submit(append_and_delete, uri, options, w, 3) for w in range(4)]
        for w in writers:
            w.result(timeout=600)
        done = keeper.result(timeout=600)
    assert done["compactions"] >= 1 and done["expired"] >= 1
    table = castable.open_table(uri, storage_options=options)
    expected = sorted(set().union(*(expected_ids(w, 3) for w in range(4))))
    assert ids(table) == expected
    for version in range(table.version - 4, table.version + 1):
        table.scan(version=version).count()  # every retained version is still readable
    table.gc(orphan_grace=timedelta(0))
    for version in range(table.version - 4, table.version + 1):
        table.scan(version=version).count()
    assert ids(table) == expected
