"""Compaction, snapshot expiry and garbage collection, on both stores."""

from __future__ import annotations

from datetime import timedelta

import pyarrow.parquet as pq
import pytest
from helpers.faults import FaultyStore, SimulatedCrash, before_first, once
from helpers.tables import EVENTS, FILES_ONLY, events

import castable
from castable.errors import VersionNotFoundError
from castable.format.workplans import PLAN_PREFIXES, read_plan, write_plan
from castable.store import LocalStore
from castable.table import Table
from castable.tables import load_table

SMALL = {"write.target-file-size-bytes": 200_000, "write.row-group-size-bytes": 20_000}


@pytest.fixture
def table(table_uri: tuple[str, dict | None]) -> Table:
    uri, options = table_uri
    return castable.create_table(uri, EVENTS, primary_key="id", properties=SMALL, storage_options=options)


def ids(t: Table, **kwargs: object) -> list[int]:
    return sorted(t.scan(["id"], **kwargs).to_arrow().column("id").to_pylist())


def churn(t: Table, rounds: int = 12) -> list[int]:
    """Small appends and deletes; returns the expected ids."""
    for i in range(rounds):
        t.append(events(i * 100, i * 100 + 100))
        t.delete(f"id = {i * 100 + 7}")
        t.delete(f"category = 'b' AND id BETWEEN {i * 100} AND {i * 100 + 20}")
    return [i for i in range(rounds * 100) if i % 100 != 7 and not (i % 4 == 1 and i % 100 <= 20)]


def test_compaction_bin_packs_and_drops_deleted_rows(table: Table) -> None:
    expected = churn(table)
    before = table.version
    files, tombstones = len(table.manifest.data_files), len(table.manifest.tombstones)
    assert files == 12 and tombstones > 12
    report = table.compact()
    assert len(report.files_rewritten) == 12 and len(report.files_written) == 1
    assert report.rows_dropped == 1200 - len(expected)
    assert table.manifest.tombstones == ()
    assert ids(table) == expected
    assert ids(table, version=before) == expected, "time travel still reads the old files"
    table.delete("id = 500")
    assert ids(table) == [i for i in expected if i != 500]
    assert table.history()[1].operation == "compact"


def test_compaction_sorts_each_output_file(table: Table) -> None:
    for i in range(5):
        table.append(events(1000 - (i + 1) * 100, 1000 - i * 100))
    table.compact(sort_by="id")
    (f,) = table.manifest.data_files
    written = pq.read_table(table.store.open_input(f.path, size=f.size, etag=f.etag)).column("id").to_pylist()
    assert written == sorted(written) == list(range(500, 1000))


def test_delete_ratio_threshold(table: Table) -> None:
    table.append(events(0, 1000))
    table.delete("id < 100")
    assert table.compact(min_file_size=1, delete_ratio=0.2).files_rewritten == []
    table.delete("id < 300")
    report = table.compact(min_file_size=1, delete_ratio=0.2)
    assert len(report.files_rewritten) == 1 and report.rows_dropped == 300
    assert ids(table) == list(range(300, 1000))


def test_tombstones_of_kept_files_are_coalesced(table: Table) -> None:
    table.append(events(0, 3000))
    for k in range(0, 3000, 250):
        table.delete(f"id = {k} OR id = {k + 1}")
    table.delete("id BETWEEN 2000 AND 2010")
    n = len(table.manifest.tombstones)
    report = table.compact(min_file_size=1, delete_ratio=1.0)
    assert report.files_rewritten == [] and report.tombstones_coalesced == n
    assert len(table.manifest.tombstones) == 1
    gone = {*range(0, 3000, 250), *range(1, 3000, 250), *range(2000, 2011)}
    assert ids(table) == [i for i in range(3000) if i not in gone]


def test_nothing_to_compact_commits_nothing(table: Table) -> None:
    table.append(events(0, 10))
    assert table.compact().version == table.version == 1


def test_compaction_commit_id_is_idempotent(table: Table) -> None:
    churn(table, rounds=3)
    first = table.compact(commit_id="nightly")
    table.append(events(9000, 9001))
    again = load_table(table.store).compact(commit_id="nightly")
    assert again.version == first.version and again.files_written == []


def test_delete_during_compaction_is_not_lost(table: Table) -> None:
    expected = churn(table, rounds=4)
    other = load_table(table.store)
    meanwhile = before_first("put", lambda: other.delete("id BETWEEN 300 AND 310"), key_prefix="manifest/")
    compactor = load_table(FaultyStore(table.store, meanwhile))
    report = compactor.compact()
    assert report.replans == 1
    assert ids(load_table(table.store)) == [i for i in expected if not 300 <= i <= 310]


def test_append_during_compaction_is_kept(table: Table) -> None:
    expected = churn(table, rounds=4)
    other = load_table(table.store)
    meanwhile = before_first("put", lambda: other.append(events(5000, 5010)), key_prefix="manifest/")
    report = load_table(FaultyStore(table.store, meanwhile)).compact()
    assert report.replans == 0
    assert ids(load_table(table.store)) == [*expected, *range(5000, 5010)]


def test_expire_by_count_and_age(table: Table) -> None:
    for i in range(6):
        table.append(events(i, i + 1))
    report = table.expire(retain_versions=3)
    assert report.versions_expired == [0, 1, 2, 3] and report.versions_retained == 3
    with pytest.raises(VersionNotFoundError):
        table.scan(version=2)
    assert ids(table, version=4) == [0, 1, 2, 3]
    assert [h.version for h in table.history()] == [6, 5, 4]
    assert table.expire(retain_for=timedelta(days=1)).versions_expired == []
    assert table.expire(retain_versions=1, retain_for=timedelta(0)).versions_expired == [4, 5]
    assert ids(table) == list(range(6))
    with pytest.raises(castable.InvalidInputError):
        table.expire(retain_versions=0)


@pytest.mark.parametrize(("properties", "orphans"), [(FILES_ONLY, ["data", "segment"]), ({}, ["segment"])])
def test_gc_collects_orphans_after_the_grace_period_only(
    table_uri: tuple[str, dict | None], properties: dict[str, str], orphans: list[str]
) -> None:
    """A crashed append leaves its data file and the segment listing it, or the segment alone
    (the rows kept inline in it): gc removes them once past the grace period."""
    uri, options = table_uri
    table = castable.create_table(
        uri, EVENTS, primary_key="id", properties={**SMALL, **properties}, storage_options=options
    )
    table.append(events(0, 10))
    crashing = load_table(FaultyStore(table.store, once("put", "manifest/", "crash-before")))
    before = {o.key for o in table.store.list("")}
    with pytest.raises(SimulatedCrash):
        crashing.append(events(10, 20))
    left = sorted({o.key for o in table.store.list("")} - before)
    assert [k.split("/")[0] for k in left] == orphans
    orphans = left
    assert table.gc(orphan_grace=timedelta(hours=1)).objects == []
    dry = table.gc(orphan_grace=timedelta(0), dry_run=True)
    assert sorted(dry.objects) == orphans and table.store.head(orphans[0])
    report = table.gc(orphan_grace=timedelta(0))
    assert sorted(report.objects) == orphans and report.bytes > 0
    assert ids(table) == list(range(10))


def test_gc_removes_work_plans_after_the_grace_period_only(table: Table) -> None:
    """The workflows' plans (file names for a Distributed Map) are scratch: swept like orphans."""
    table.append(events(0, 10))
    plans = sorted(
        write_plan(table.store, prefix, "run-1", [{"file": f.path} for f in table.manifest.data_files])
        for prefix in PLAN_PREFIXES
    )
    assert read_plan(table.store, plans[0]) == [{"file": table.manifest.data_files[0].path}]
    assert table.gc(orphan_grace=timedelta(hours=1)).objects == []
    assert sorted(table.gc(orphan_grace=timedelta(0)).objects) == plans
    assert not any(table.store.exists(k) for k in plans) and ids(table) == list(range(10))


def test_gc_after_expire_removes_old_files_but_nothing_referenced(table: Table) -> None:
    expected = churn(table, rounds=5)
    table.compact()
    referenced = {f.path for f in table.manifest.data_files} | {t.path for t in table.manifest.tombstones}
    assert table.gc(orphan_grace=timedelta(0)).objects == [], "retained versions still reference every file"
    table.expire(retain_versions=1)
    report = table.gc(orphan_grace=timedelta(0))
    assert len(report.objects) >= 5
    left = {o.key for o in table.store.list("data/")} | {o.key for o in table.store.list("tombstone/")}
    assert left == referenced
    assert ids(table) == expected


def test_gc_aborts_stale_multipart_uploads(table: Table) -> None:
    upload = table.store.create_multipart("data/2026/01/01/00/abandoned.parquet")
    table.store.upload_part("data/2026/01/01/00/abandoned.parquet", upload, 1, b"x" * 100)
    if isinstance(table.store, LocalStore):
        # moto reports a fixed 2010 "Initiated" time for every upload, so only the local store
        # can show that a young upload survives the grace period.
        assert table.gc(orphan_grace=timedelta(hours=1)).uploads_aborted == []
    assert table.gc(orphan_grace=timedelta(0)).uploads_aborted == ["data/2026/01/01/00/abandoned.parquet"]
    assert list(table.store.list_multipart_uploads()) == []


def test_bad_maintenance_arguments(table: Table) -> None:
    with pytest.raises(castable.InvalidInputError):
        table.compact(sort_by="nope")
    with pytest.raises(castable.InvalidInputError):
        table.gc(orphan_grace=timedelta(seconds=-1))


@pytest.mark.parametrize("pointer_puts", ["work", "fail"])
def test_stale_writer_cannot_commit_into_an_expired_slot(table: Table, pointer_puts: str) -> None:
    """Even when it cannot move the pointer, a writer checks the floor before it reports success."""
    table.append(events(0, 10))
    stale = load_table(table.store)
    for i in range(1, 9):
        table.append(events(i * 10, i * 10 + 10))
    table.expire(retain_versions=2)
    assert table.store.get("_latest_manifest").data.count(b'"oldest"') == 1
    if pointer_puts == "fail":
        failing = FaultyStore(table.store, lambda op, key: "fail" if (op, key) == ("put", "_latest_manifest") else None)
        stale = Table.standalone(failing, stale.manifest)
    version = stale.append(events(500, 510)).version
    assert version == table.refresh().version == 10
    with pytest.raises(VersionNotFoundError):
        table.scan(version=2)
    assert ids(table) == [*range(90), *range(500, 510)]
    assert [h.version for h in table.history()] == [10, 9, 8]


def test_reader_racing_expiry_follows_the_pointer(table: Table) -> None:
    for i in range(5):
        table.append(events(i, i + 1))
    stale_pointer = table.store.get("_latest_manifest").data
    table.append(events(5, 6))
    table.expire(retain_versions=1)
    assert load_table(table.store).version == 6
    assert stale_pointer != table.store.get("_latest_manifest").data


def test_planned_groups_compact_independently(table: Table) -> None:
    expected = churn(table, rounds=6)
    groups = table.plan_compaction(min_file_size=10**9)
    assert sum(len(g) for g in groups) == 6 and all(groups)
    small = castable.create_table(
        table.uri + "-grouped",
        EVENTS,
        primary_key="id",
        properties={"write.target-file-size-bytes": 6_000},
        storage_options=_options(table),
    )
    churn(small, rounds=6)
    split = small.plan_compaction(min_file_size=10**9)
    assert len(split) > 1, "a small target size splits the work"
    for group in split:
        load_table(small.store).compact(files=group, min_file_size=10**9)
    assert ids(load_table(small.store)) == expected
    assert len(load_table(small.store).manifest.data_files) <= len(split) * 2


def _options(t: Table) -> dict | None:
    from castable.store import S3Store

    if isinstance(t.store, S3Store):
        return {"endpoint_url": t.store.client.meta.endpoint_url, "region": "us-east-1"}
    return None


def test_gc_collects_temporary_files_of_killed_writers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A writer killed mid-append leaves a dot-file beside the object it was writing; gc removes
    it once older than the grace period, like any orphan, and never a live table file."""
    import os
    import time

    t = castable.create_table(str(tmp_path / "t"), EVENTS, primary_key="id")
    t.append(events(0, 10))
    store = t.store
    assert isinstance(store, LocalStore)
    old = store._temp_beside(store.root / "data/2026/11/23/01/dead.parquet")
    fresh = store._temp_beside(store.root / "manifest/v00000000000000000002.json")
    for path in (old, fresh):
        path.write_bytes(b"half a file")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    preview = t.gc(orphan_grace=timedelta(minutes=30), dry_run=True)
    assert preview.temporaries == [old.relative_to(store.root).as_posix()] and old.exists()
    report = t.gc(orphan_grace=timedelta(minutes=30))
    assert report.temporaries == preview.temporaries and report.summary()["temporaries_removed"] == 1
    assert not old.exists() and fresh.exists()
    assert t.count() == 10
