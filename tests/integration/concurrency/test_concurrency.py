"""Several processes committing at once, with the settings a user gets, on the local store, on
moto and on LocalStack's own S3 (both over HTTP): no commit fails, nothing is lost, nothing lands
twice, versions stay dense."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from threading import Barrier
from typing import cast

import pyarrow as pa
import pytest
from helpers.processes import PROCESSES, process_pool
from helpers.s3servers import new_bucket
from helpers.tables import EVENTS
from helpers.workers import (
    ERASABLE,
    INCREMENTED,
    UPSERT_KEYS,
    add_columns,
    append_and_delete,
    append_enforced,
    append_rows,
    append_rows_merging,
    compact_and_erase,
    expected_ids,
    increment,
    upsert_overlapping,
)

import castable
from castable.commit.pointer import read_pointer
from castable.format.layout import version_of_manifest_key
from castable.table import Table

WORKERS = 8
ROUNDS = 3
COMMITS = 25


def _stores(*where: str) -> list[object]:
    """Where a test runs: format 1 on the local store and format 2 on each S3 server in
    ``where``. The formats' rebases and exactly-once lookups differ (1 writes every file into the
    root, 2 writes segments and keeps older commit ids in one), and so do the stores' conditional
    writes; the format does not change what is sent to the store, so each pairing runs once."""
    params: list[object] = [("local", 1)]
    for server in where:
        marks = [pytest.mark.xdist_group("localstack")] if server == "localstack" else []
        params.append(pytest.param((server, 2), marks=marks))
    return params


ON_EVERY_STORE = pytest.mark.parametrize(
    "writer_uri", _stores("moto", "localstack"), indirect=True, ids=lambda p: f"{p[0]}-v{p[1]}"
)
"""For what the pointer's compare-and-swap is the subject of: every store that has one."""
ON_ONE_SERVER = pytest.mark.parametrize("writer_uri", _stores("moto"), indirect=True, ids=lambda p: f"{p[0]}-v{p[1]}")
"""For the rebase of an operation (a schema change, an upsert, an update): the local store and
one S3 server, since the race it must survive is the same on every store."""


@pytest.fixture
def writer_uri(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str] | None, int]:
    """A fresh table location on the store the test is given, and the format version to create
    the table in."""
    where, format_version = request.param
    if where == "local":
        return str(tmp_path / "table"), None, format_version
    endpoint = request.getfixturevalue("s3_endpoint" if where == "moto" else "localstack_endpoint")
    return f"s3://{new_bucket(endpoint)}/tables/t1", {"endpoint_url": endpoint, "region": "us-east-1"}, format_version


@contextmanager
def _rounds_barrier(parties: int) -> Iterator[Barrier]:
    """A barrier the workers share, so that each round of theirs starts at once and the
    commits really race (a worker that starts late would otherwise commit alone)."""
    with PROCESSES.Manager() as manager:
        yield manager.Barrier(parties)


def _assert_dense(table: Table, commits: int) -> None:
    manifests = sorted(cast(int, version_of_manifest_key(i.key)) for i in table.store.list("manifest/"))
    assert manifests == list(range(commits + 1)), "versions are dense"
    assert read_pointer(table.store).version == commits, "the pointer ends at the last version"


def _every_append_commits_once(uri: str, options: dict[str, str] | None) -> Table:
    """``WORKERS`` processes x ``COMMITS`` one-row appends, one handle each; checks every append
    has its own version, every row is there once and the versions are dense."""
    with process_pool(WORKERS) as pool:
        futures = [pool.submit(append_rows, uri, options, w, COMMITS) for w in range(WORKERS)]
        versions = [v for f in futures for v in f.result(timeout=600)]

    assert len(set(versions)) == len(versions) == WORKERS * COMMITS, "every commit has its own version"
    table = castable.open_table(uri, storage_options=options)
    got = table.scan(["id"]).to_arrow().column("id").to_pylist()
    assert sorted(got) == sorted(w * 1000 + i for w in range(WORKERS) for i in range(COMMITS))
    _assert_dense(table, WORKERS * COMMITS)
    return table


@pytest.mark.slow
@ON_EVERY_STORE
def test_many_writers_with_default_settings_never_starve(writer_uri: tuple[str, dict | None, int]) -> None:
    """8 processes x 25 one-row appends, one handle each, taking fair turns (the default):
    every append commits, once, and every writer that joined the pointer's line left it."""
    uri, options, format_version = writer_uri
    castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, format_version=format_version)
    table = _every_append_commits_once(uri, options)
    assert read_pointer(table.store).line == (), "every writer left the line"


@pytest.mark.slow
def test_writers_racing_without_fair_turns_all_commit_once(s3_endpoint: str) -> None:
    """The same on moto with ``commit.fair-turns = false``: every commit left to the race
    still commits exactly once."""
    uri, options = f"s3://{new_bucket(s3_endpoint)}/tables/race", {"endpoint_url": s3_endpoint, "region": "us-east-1"}
    castable.create_table(
        uri, EVENTS, primary_key="id", properties={"commit.fair-turns": "false"}, storage_options=options
    )
    _every_append_commits_once(uri, options)


@pytest.mark.slow
@ON_ONE_SERVER
def test_appends_on_the_old_schema_land_while_another_process_adds_columns(
    writer_uri: tuple[str, dict | None, int],
) -> None:
    """4 processes append one-row batches of the original columns while a fifth adds 5 columns,
    one commit each: every commit lands once, and each row reads each column's default. A
    format-1 table is upgraded first, so its first alter gives its columns their ids."""
    uri, options, format_version = writer_uri
    castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, format_version=format_version)
    if format_version == 1:
        castable.open_table(uri, storage_options=options).upgrade()
    with process_pool(5) as pool:
        appends = [pool.submit(append_rows_merging, uri, options, w, 15) for w in range(4)]
        alters = pool.submit(add_columns, uri, options, 5)
        versions = [v for f in appends for v in f.result(timeout=600)] + alters.result(timeout=600)
    assert len(set(versions)) == len(versions) == 4 * 15 + 5
    table = castable.open_table(uri, storage_options=options)
    assert table.schema.names == [*EVENTS.names, "c0", "c1", "c2", "c3", "c4"]
    got = table.scan().to_arrow()
    assert sorted(got.column("id").to_pylist()) == sorted(w * 1000 + i for w in range(4) for i in range(15))
    for i in range(5):
        assert set(got.column(f"c{i}").to_pylist()) <= {i, None}
    _assert_dense(table, 4 * 15 + 5 + (format_version == 1))


@pytest.mark.slow
@ON_EVERY_STORE
def test_many_processes_append_and_delete(writer_uri: tuple[str, dict | None, int]) -> None:
    uri, options, format_version = writer_uri
    castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, format_version=format_version)
    with process_pool(WORKERS) as pool:
        futures = [pool.submit(append_and_delete, uri, options, w, ROUNDS) for w in range(WORKERS)]
        results = [f.result(timeout=600) for f in futures]

    table = castable.open_table(uri, storage_options=options)
    got = table.scan(["id"]).to_arrow().column("id").to_pylist()
    assert len(got) == len(set(got)), "an append landed twice"
    expected = set().union(*(expected_ids(w, ROUNDS) for w in range(WORKERS)))
    assert set(got) == expected, f"lost: {sorted(expected - set(got))[:10]} extra: {sorted(set(got) - expected)[:10]}"

    commits = [c for r in results for c in r]
    versions = [v for _, v, _ in commits]
    assert len(set(versions)) == len(versions) == WORKERS * ROUNDS * 3, "every commit has its own version"
    _assert_dense(table, len(commits))

    history = table.history()
    assert len(history) == len(commits) + 1
    by_id = {h.commit_id: h for h in history}
    for op, version, commit_id in commits:
        assert by_id[commit_id].version == version and by_id[commit_id].operation == op


@pytest.mark.slow
@ON_ONE_SERVER
def test_racing_upserts_keep_one_row_per_key_through_compaction_and_erase(
    writer_uri: tuple[str, dict | None, int],
) -> None:
    """4 processes upsert overlapping keys while a fifth compacts and erases: every key keeps
    exactly one live row, the one of the last committed upsert that named it; nothing else is
    lost or comes back, and versions stay dense."""
    uri, options, format_version = writer_uri
    table = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, format_version=format_version)
    initial = [*range(UPSERT_KEYS), *ERASABLE]
    table.append(pa.table({"id": initial, "category": ["init"] * len(initial), "value": [-1.0] * len(initial)}))
    with process_pool(5) as pool, _rounds_barrier(4) as rounds_begin:
        upserts = [pool.submit(upsert_overlapping, uri, options, w, 8, rounds_begin) for w in range(4)]
        maintenance = pool.submit(compact_and_erase, uri, options, 6)
        commits = [c for f in upserts for c in f.result(timeout=600)]
        erased = maintenance.result(timeout=600)

    last: dict[int, float] = {}
    for _, keys, value in sorted(commits):
        last.update(dict.fromkeys(keys, value))
    rows = castable.open_table(uri, storage_options=options).scan().to_arrow().to_pylist()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "one live row per key"
    got = {r["id"]: r["value"] for r in rows}
    assert {k: got[k] for k in range(UPSERT_KEYS)} == {k: last.get(k, -1.0) for k in range(UPSERT_KEYS)}
    assert set(got) == set(initial) - set(erased)
    manifests = sorted(cast(int, version_of_manifest_key(i.key)) for i in table.store.list("manifest/"))
    assert manifests == list(range(manifests[-1] + 1)) and read_pointer(table.store).version == manifests[-1]
    history = castable.open_table(uri, storage_options=options).history()
    assert sum(h.summary["replans"] for h in history if h.operation == "upsert") > 0, "the upserts did race"


@pytest.mark.slow
@ON_ONE_SERVER
def test_racing_appends_to_an_enforced_key_never_leave_a_key_live_twice(
    writer_uri: tuple[str, dict | None, int],
) -> None:
    """4 processes append batches of keys from one small pool to a table that enforces its key,
    starting each round together: no version ever holds a key twice, every refused append named
    keys that another append had committed and left no trace, and every other append landed."""
    uri, options, format_version = writer_uri
    table = castable.create_table(
        uri,
        EVENTS,
        primary_key="id",
        storage_options=options,
        format_version=format_version,
        properties={"write.primary-key.enforce": "true"},
    )
    with process_pool(4) as pool, _rounds_barrier(4) as rounds_begin:
        appends = [pool.submit(append_enforced, uri, options, w, 6, rounds_begin) for w in range(4)]
        outcomes = [o for f in appends for o in f.result(timeout=600)]

    committed = {commit_id: (keys, version) for commit_id, keys, version, _ in outcomes if version is not None}
    refused = [(commit_id, keys, named) for commit_id, keys, version, named in outcomes if version is None]
    assert committed and refused, "the pool is small enough that appends collide"
    table = castable.open_table(uri, storage_options=options)
    history = {h.commit_id: h.version for h in table.history()}
    assert {c: v for c, (_, v) in committed.items()} == {c: history[c] for c in committed}
    for version in range(table.version + 1):
        keys = table.scan(["id"], version=version).to_arrow().column("id").to_pylist()
        assert len(keys) == len(set(keys)), f"version {version} holds a key twice"
    live = table.to_arrow().column("id").to_pylist()
    assert sorted(live) == sorted(k for keys, _ in committed.values() for k in keys)
    for commit_id, keys, named in refused:
        assert commit_id not in history and named and set(named) <= set(keys) & set(live), commit_id
    _assert_dense(table, len(committed))


@pytest.mark.slow
@ON_ONE_SERVER
def test_racing_updates_and_merges_lose_no_increment_through_compaction(
    writer_uri: tuple[str, dict | None, int],
) -> None:
    """3 processes add 1 to the same rows, by update and by merge, while a fourth compacts: every
    increment lands (each re-reads rows another commit touched), nothing else changes."""
    uri, options, format_version = writer_uri
    table = castable.create_table(uri, EVENTS, primary_key="id", storage_options=options, format_version=format_version)
    table.append(pa.table({"id": list(range(100)), "category": ["c"] * 100, "value": [0.0] * 100}, schema=EVENTS))
    with process_pool(4) as pool, _rounds_barrier(3) as rounds_begin:
        workers = [pool.submit(increment, uri, options, w, 5, rounds_begin) for w in range(3)]
        maintenance = pool.submit(compact_and_erase, uri, options, 3)
        total = sum(f.result(timeout=600) for f in workers)
        erased = set(maintenance.result(timeout=600))
    rows = castable.open_table(uri, storage_options=options).scan().to_arrow().to_pylist()
    assert len(rows) == 100 and not erased & set(range(100))
    assert {r["id"]: r["value"] for r in rows} == {k: float(total) if k < INCREMENTED else 0.0 for k in range(100)}
    history = castable.open_table(uri, storage_options=options).history()
    assert sum(h.summary.get("replans", 0) for h in history if h.operation in ("update", "merge")) > 0, "they raced"
