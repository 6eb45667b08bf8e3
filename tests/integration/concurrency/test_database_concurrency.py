"""Several processes moving rows between two tables of a database while others read it, with
the settings a user gets: every snapshot holds each row in exactly one table, including while
writers are killed mid-commit."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.processes import PROCESSES, process_pool
from helpers.s3servers import new_bucket
from helpers.tables import EVENTS, events
from helpers.workers import MOVER_IDS, append_until_dropped, check_snapshots, drop_once_appended, move_rows

import castable
from castable.commit.dblog import LOG_PREFIX
from castable.commit.pointer import read_pointer
from castable.format.layout import manifest_key

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


@pytest.mark.slow
def test_processes_moving_rows_between_tables_never_show_half_a_move(db_location: tuple[str, dict | None]) -> None:
    uri, options = db_location
    expected = _two_tables(uri, options, MOVERS)
    with process_pool(MOVERS + 2) as pool:
        readers = [pool.submit(check_snapshots, uri, options, expected, 5.0) for _ in range(2)]
        movers = [pool.submit(move_rows, uri, options, w, MOVES) for w in range(MOVERS)]
        assert sum(f.result(timeout=600) for f in movers) == MOVERS * MOVES
        assert all(f.result(timeout=600) >= 3 for f in readers)
    db = castable.open_database(uri, storage_options=options)
    assert db.version == 3 + MOVERS * MOVES, "every move is one database version, none lost or doubled"
    check_snapshots(uri, options, expected, 0)


def _kill_repeatedly(uri: str, options: dict | None, rounds: int) -> None:
    """Start a mover process and SIGKILL it mid-work, once it has committed, ``rounds`` times."""
    db = castable.open_database(uri, storage_options=options)
    for r in range(rounds):
        started = db.refresh().version
        process = PROCESSES.Process(target=move_rows, args=(uri, options, 0, 1000))
        process.start()
        deadline = time.monotonic() + 120
        while db.refresh().version == started and time.monotonic() < deadline:  # past the start-up (slow
            time.sleep(0.05)  # on a loaded machine): its first commit landed
        time.sleep(0.37 * r)  # then at a different point of a commit each time
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


@pytest.mark.slow
def test_writers_racing_a_drop_land_before_it_or_are_refused(db_location: tuple[str, dict | None]) -> None:
    """Three processes append to table ``a`` while a fourth drops it: every append acknowledged
    landed before the drop, every one after it was refused (a conflict, or the table gone), the
    log holds exactly the acknowledged ones, and the other table is untouched."""
    uri, options = db_location
    _two_tables(uri, options, 1)
    with process_pool(4) as pool:
        writers = [pool.submit(append_until_dropped, uri, options, w, 200) for w in range(3)]
        drop = pool.submit(drop_once_appended, uri, options, 10)
        dropped = drop.result(timeout=600)
        records = [r for f in writers for r in f.result(timeout=600)]
    landed = {r["commit_id"]: r for r in records if r["ended"] == "landed"}
    assert landed and any(r["ended"] in ("conflict", "gone") for r in records), "the drop fell mid-race"
    assert all(r["ended"] == "gone" for f in writers for r in f.result()[-1:]), "every writer met the drop"
    db = castable.open_database(uri, storage_options=options)
    history = db.history()
    assert history[0].version == dropped == db.version and history[0].operation == "drop_table"
    appended = {h.commit_id: h.version for h in history if h.commit_id.startswith("w")}
    assert set(appended) == set(landed), "the log holds every acknowledged append, and nothing else"
    assert all(v < dropped for v in appended.values()), "no append landed after the drop"
    assert db.tables() == ["b"] and sorted(db.table("b").scan(["id"]).to_arrow().column("id").to_pylist()) == []
    member = db.store.child("a")
    assert not member.exists(manifest_key(0)) and not member.exists("_latest_manifest"), "the drop deleted the table"
    with pytest.raises(castable.VersionNotFoundError, match="dropped since"):
        db.snapshot(dropped - 1).table("a")
    db.create_table("a", EVENTS, primary_key="id").append(events(1, 2))  # the name is free again
