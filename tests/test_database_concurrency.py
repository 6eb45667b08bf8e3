"""Several processes moving rows between two tables of a database while others read it, with
the settings a user gets: every snapshot holds each row in exactly one table, including while
writers are killed mid-commit."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.s3servers import new_bucket
from helpers.tables import EVENTS, events
from helpers.workers import MOVER_IDS, check_snapshots, move_rows

import castable
from castable.dblog import LOG_PREFIX
from castable.layout import manifest_key
from castable.pointer import read_pointer

MOVERS = 4
MOVES = 8


@pytest.fixture(params=["local", "moto"])
def db_location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str] | None]:
    if request.param == "local":
        return str(tmp_path / "db"), None
    endpoint = request.getfixturevalue("s3_endpoint")
    return f"s3://{new_bucket(endpoint)}/dbs/moves", {"endpoint_url": endpoint, "region": "us-east-1"}


def _two_tables(uri: str, options: dict | None, movers: int) -> list[int]:
    db = castable.create_database(uri, storage_options=options)
    db.create_table("a", EVENTS, primary_key="id")
    db.create_table("b", EVENTS, primary_key="id")
    owned = [w * 1000 + i for w in range(movers) for i in range(MOVER_IDS)]
    db.table("a").append(pa.concat_tables([events(i, i + 1) for i in owned]))
    return sorted(owned)


def _spawn_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


@pytest.mark.slow
def test_processes_moving_rows_between_tables_never_show_half_a_move(db_location: tuple[str, dict | None]) -> None:
    uri, options = db_location
    expected = _two_tables(uri, options, MOVERS)
    with _spawn_pool(MOVERS + 2) as pool:
        readers = [pool.submit(check_snapshots, uri, options, expected, 5.0) for _ in range(2)]
        movers = [pool.submit(move_rows, uri, options, w, MOVES) for w in range(MOVERS)]
        assert sum(f.result(timeout=600) for f in movers) == MOVERS * MOVES
        assert all(f.result(timeout=600) >= 3 for f in readers)
    db = castable.open_database(uri, storage_options=options)
    assert db.version == 3 + MOVERS * MOVES, "every move is one database version, none lost or doubled"
    check_snapshots(uri, options, expected, 0)


def _kill_repeatedly(uri: str, options: dict | None, rounds: int) -> None:
    """Start a mover process and SIGKILL it at a random moment mid-work, ``rounds`` times."""
    ctx = multiprocessing.get_context("spawn")
    for r in range(rounds):
        process = ctx.Process(target=move_rows, args=(uri, options, 0, 1000))
        process.start()
        time.sleep(1.5 + 0.37 * r)  # past the start-up, then at a different point of a commit each time
        os.kill(process.pid, signal.SIGKILL)
        process.join()


@pytest.mark.slow
def test_writers_killed_mid_commit_leave_no_half_transaction(db_location: tuple[str, dict | None]) -> None:
    uri, options = db_location
    expected = _two_tables(uri, options, 1)
    _kill_repeatedly(uri, options, 6)
    check_snapshots(uri, options, expected, 0)
    db = castable.open_database(uri, storage_options=options)
    killed_at = db.version
    assert killed_at > 3, "the killed writers committed moves before they were killed"
    assert move_rows(uri, options, 0, 2) == 2, "writers go on after the kills"
    assert db.refresh().version == killed_at + 2
    check_snapshots(uri, options, expected, 0)
    assert read_pointer(db.store.child(LOG_PREFIX)).version == db.version, "the next commit rolled everything forward"
    for name in ("a", "b"):
        member = db.store.child(name)
        newest = db.snapshot().tables[name]
        assert member.exists(manifest_key(newest)), "the newest version of each table has its own copy"
