"""Fair turns (docs/format.md sections 2 and 7): the line of waiting writers in the pointer, how
a writer joins it, waits for its turn and leaves it, how a writer outside it holds back until
it drains, and what happens to a writer that crashed in it; on unless a table's property
``commit.fair-turns`` is false. What it costs and buys under contention is measured by
bench/concurrency/contention.py (castable-moto against castable-moto-race, and the same behind S3's
latency)."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from helpers.faults import FaultyStore
from helpers.tables import EVENTS, events

import castable
from castable.commit.pointer import LINE_LIMIT, Turn, advance_pointer, put_pointer, raise_floor, read_pointer
from castable.commit.turns import JOIN_AFTER_LOSSES, PATIENCE_SECONDS, Place
from castable.database import Database
from castable.errors import InvalidInputError
from castable.format.layout import POINTER_KEY, manifest_key
from castable.store import ObjectStore
from castable.table import Table
from castable.tables import load_table


def long_ago() -> Turn:
    """A writer that began waiting in 1970: its turn is overdue (each test's own, since a
    process's patience with a writer is kept across commits)."""
    return Turn(waiting_since=1.0, writer=f"waiting-since-1970-{uuid.uuid4().hex}")


def line_of(store: ObjectStore) -> tuple[Turn, ...]:
    return read_pointer(store).line


def set_line(store: ObjectStore, *line: Turn) -> None:
    put_pointer(store, read_pointer(store), line=tuple(sorted(line)))


@pytest.fixture
def base(table_uri: tuple[str, dict | None]) -> Table:
    """A table with default properties (so it takes fair turns), holding 10 rows at version 1."""
    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options)
    t.append(events(0, 10))
    return t


def test_the_line_is_kept_in_the_pointer_oldest_first_and_left_out_when_empty(base: Table) -> None:
    store = base.store
    assert json.loads(store.get(POINTER_KEY).data) == {"version": 1, "manifest": manifest_key(1)}
    young, old = Turn(200.5, "b"), Turn(100.0, "a")
    put_pointer(store, read_pointer(store), line=(young, old))
    doc = json.loads(store.get(POINTER_KEY).data)
    assert doc["waiting"] == [{"writer": "b", "waiting_since": 200.5}, {"writer": "a", "waiting_since": 100.0}]
    assert line_of(store) == (old, young), "read back oldest first, whatever order it was written in"
    set_line(store)
    assert json.loads(store.get(POINTER_KEY).data) == {"version": 1, "manifest": manifest_key(1)}


def test_a_malformed_line_is_read_as_advice_never_as_an_error(base: Table) -> None:
    store = base.store
    pointer = read_pointer(store)
    doc = {
        "version": 1,
        "manifest": manifest_key(1),
        "waiting": [{"writer": "ok", "waiting_since": 5}, {"writer": 7}, "x", {"writer": "t", "waiting_since": True}],
    }
    store.put(POINTER_KEY, json.dumps(doc).encode(), if_match=pointer.etag)
    assert line_of(store) == (Turn(5.0, "ok"),)
    doc["waiting"] = "not a list"
    store.put(POINTER_KEY, json.dumps(doc).encode(), if_match=read_pointer(store).etag)
    assert line_of(store) == ()
    assert load_table(store).append(events(10, 11)).version == 2


def test_advancing_the_pointer_keeps_the_line_but_takes_out_the_writer_that_committed(base: Table) -> None:
    store = base.store
    a, b = Turn(1.0, "a"), Turn(2.0, "b")
    set_line(store, a, b)
    base.append(events(10, 11))
    assert read_pointer(store).version == 2 and line_of(store) == (a, b)
    advance_pointer(store, 2, None, leaving="a")
    assert read_pointer(store).version == 2 and line_of(store) == (b,), "taken out even with the version in place"
    advance_pointer(store, 1, None)
    assert read_pointer(store).version == 2, "never backwards"
    raise_floor(store, 1, 2)
    assert read_pointer(store).oldest == 1 and line_of(store) == (b,)


def test_a_writer_that_keeps_losing_joins_the_line_and_leaves_it_when_it_lands(base: Table) -> None:
    rival = load_table(base.store)
    lines: list[tuple[Turn, ...]] = []
    losses = iter(range(JOIN_AFTER_LOSSES + 1))

    def rule(op: str, key: str) -> None:
        if op == "put" and key.startswith("manifest/"):
            lines.append(line_of(base.store))
            if next(losses, None) is not None and len(lines) <= JOIN_AFTER_LOSSES:
                rival.append(events(100 + len(lines), 101 + len(lines)))  # the writer loses this round

    writer = load_table(FaultyStore(base.store, rule))
    assert writer.append(events(10, 11)).version == 2 + JOIN_AFTER_LOSSES
    assert [len(line) for line in lines] == [0] * JOIN_AFTER_LOSSES + [1], "in line only after its losses"
    assert line_of(base.store) == (), "its landing took it out of the line"


def test_a_writer_not_first_in_line_waits_for_its_turn_in_line(base: Table) -> None:
    """With a line whose first writer has waited long, a new writer joins behind it and does not
    attempt until the first has left the line."""
    ghost = long_ago()
    set_line(base.store, ghost)
    writer = load_table(base.store)
    writer.refresh()
    done = threading.Event()

    def append() -> None:
        writer.append(events(10, 11))
        done.set()

    thread = threading.Thread(target=append)
    thread.start()
    deadline = time.monotonic() + 10
    while len(line_of(base.store)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(line_of(base.store)) == 2, "the writer joined the line, behind the older one"
    assert not done.is_set() and load_table(base.store).version == 1, "and waits: nothing committed"
    advance_pointer(base.store, 1, None, leaving=ghost.writer)  # the first writer's turn is over
    thread.join(30)
    assert done.is_set() and load_table(base.store).version == 2
    assert line_of(base.store) == ()


def test_a_writer_gone_from_the_head_of_the_line_is_taken_out_after_the_patience(base: Table) -> None:
    ghost = long_ago()
    set_line(base.store, ghost)
    writer = load_table(base.store)
    writer.refresh()
    started = time.monotonic()
    assert writer.append(events(10, 11)).version == 2
    assert time.monotonic() - started >= PATIENCE_SECONDS * 0.9, "it gave the first writer its patience"
    assert line_of(base.store) == ()


def test_a_writer_that_cannot_take_a_gone_writer_out_of_the_line_commits_all_the_same(base: Table) -> None:
    """Once its patience with the first writer has run out, a writer whose pointer writes fail
    stops waiting on it and commits (the manifest's PUT is the commit point), where it spun."""
    ghost = long_ago()
    set_line(base.store, ghost)
    writer = load_table(FaultyStore(base.store, lambda op, key: "fail" if key == POINTER_KEY and op == "put" else None))
    writer.refresh()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(writer.append(events(10, 11)).version), daemon=True)
    thread.start()
    thread.join(PATIENCE_SECONDS * 5)
    assert result == [2], "committed after the patience"
    assert line_of(base.store) == (ghost,), "the line as it was: no pointer write got through"


def test_the_second_in_line_follows_the_first_as_soon_as_its_version_lands(base: Table) -> None:
    """The second in line watches for the version after the pointer's: once the first writer's
    manifest is there, it commits on it at once, however long the pointer takes to move."""
    first = Turn(time.time() - 0.1, f"first-in-line-{uuid.uuid4().hex}")  # a writer new to this process
    rival = load_table(FaultyStore(base.store, lambda op, key: "fail" if key == POINTER_KEY and op == "put" else None))
    set_line(base.store, first)
    writer = load_table(base.store)
    writer.refresh()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(writer.append(events(10, 11)).version))
    thread.start()
    deadline = time.monotonic() + 10
    while len(line_of(base.store)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    line = line_of(base.store)
    assert len(line) == 2 and line[0] == first and not result, "joined behind the first, and waits"
    landed = time.monotonic()
    assert rival.append(events(20, 21)).version == 2, "the first writer's turn: version 2, the pointer left at 1"
    thread.join(30)
    assert result == [3] and time.monotonic() - landed < PATIENCE_SECONDS, "followed without waiting out the first"
    assert line_of(base.store) == (first,), "left the line; the first's entry is the first's to take out"


@pytest.mark.parametrize("place", [1, 2, None], ids=["second", "third", "joining-behind-two"])
def test_a_waiting_writer_watches_for_the_version_past_every_writer_ahead(base: Table, place: int | None) -> None:
    """A writer ``k`` places behind the first (one not in line joins it at the back) asks for
    the entry ``k`` versions past the pointer it knows (``peek`` is asked for the one after
    its argument), and takes its turn once that exists: the writers ahead have had theirs."""
    # writers new to this process, whose patience (kept per process and writer) has not run out
    ahead = [
        Turn(time.time() - 0.3 + i * 0.1, f"{n}-in-line-{uuid.uuid4().hex}") for i, n in enumerate(("first", "second"))
    ]
    waiting = Place(base.store)
    set_line(base.store, *(ahead if place is None else [*ahead[:place], waiting.me]))
    waiting.saw(read_pointer(base.store))
    k = len(ahead) if place is None else place
    asked: list[int] = []

    def peek(after: int) -> bool:
        asked.append(after)
        return len(asked) >= 3 and after == k

    waiting.wait_turn(peek)
    assert set(asked) == {k}, "it asked only for the version past every writer ahead"
    assert waiting.line == (waiting.me,), "its turn: first in line"


def test_a_writer_finding_the_line_full_waits_outside_it_and_commits_once_it_clears(base: Table) -> None:
    full = [Turn(time.time() + 60 + i, f"waiting-{i}-{uuid.uuid4().hex}") for i in range(LINE_LIMIT)]
    set_line(base.store, *full)
    writer = load_table(base.store)
    writer.refresh()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(writer.append(events(10, 11)).version))
    thread.start()
    time.sleep(0.5)
    assert thread.is_alive() and not result, "it waits"
    assert len(line_of(base.store)) == LINE_LIMIT, "without joining a full line"
    set_line(base.store)
    thread.join(30)
    assert result == [2] and line_of(base.store) == ()


def test_fair_turns_can_be_turned_off_per_table(table_uri: tuple[str, dict | None]) -> None:
    ghost = long_ago()
    uri, options = table_uri
    t = castable.create_table(uri, EVENTS, properties={"commit.fair-turns": "false"}, storage_options=options)
    set_line(t.store, ghost)
    t.refresh()
    assert t.append(events(0, 1)).version == 1
    assert line_of(t.store) == (ghost,), "neither waited for nor joined"
    with pytest.raises(InvalidInputError, match=r"commit\.fair-turns must be true or false"):
        castable.create_table(f"{uri}-2", EVENTS, properties={"commit.fair-turns": "maybe"}, storage_options=options)


def test_a_database_commit_waits_its_turn_in_the_database_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ghost = long_ago()
    db = castable.create_database(str(tmp_path / "db"))
    db.create_table("a", EVENTS)
    log = db.store.child("_database")
    set_line(log, ghost)
    writer = castable.open_database(str(tmp_path / "db"))
    started = time.monotonic()
    with writer.transaction() as tx:
        tx.table("a").append(events(0, 1))
    assert time.monotonic() - started >= PATIENCE_SECONDS * 0.9
    assert line_of(log) == ()


def test_a_database_writer_in_line_follows_the_first_as_soon_as_its_entry_lands(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The second in a database's line watches for the log entry after the pointer's: once the
    first writer's version is there, its transaction commits, however long the database
    pointer takes to move. (The first writer writes a table that takes no turns, so it
    commits without looking at the line.)"""
    uri = str(tmp_path / "db")
    db = castable.create_database(uri)
    db.create_table("a", EVENTS)
    db.create_table("b", EVENTS, properties={"commit.fair-turns": "false"})
    log = db.store.child("_database")
    pointer = f"_database/{POINTER_KEY}"
    rival = Database.load(FaultyStore(db.store, lambda op, key: "fail" if key == pointer and op == "put" else None))
    set_line(log, Turn(time.time() - 0.1, f"first-in-line-{uuid.uuid4().hex}"))  # a writer new to this process
    writer = castable.open_database(uri)
    done = threading.Event()

    def transaction() -> None:
        with writer.transaction() as tx:
            tx.table("a").append(events(0, 1))
        done.set()

    thread = threading.Thread(target=transaction, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while len(line_of(log)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(PATIENCE_SECONDS / 2)
    assert len(line_of(log)) == 2 and not done.is_set(), "joined behind the first, and waits"
    with rival.transaction() as tx:  # the first writer's turn: its pointer is not moved
        tx.table("b").append(events(10, 11))
    landed = time.monotonic()
    assert done.wait(PATIENCE_SECONDS / 4), "followed at once, not after the first's patience ran out"
    thread.join(30)
    assert time.monotonic() - landed < PATIENCE_SECONDS / 4
    assert sorted(castable.open_database(uri).table("a").scan(["id"]).to_arrow().column("id").to_pylist()) == [0]
