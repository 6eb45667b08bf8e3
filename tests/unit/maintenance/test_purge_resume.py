"""Purge is safe to retry and never claims what it did not check: the erased values are kept in
an ``erasure/`` object before anything is deleted, a purge that stops half way is resumed (and
searched) by the next call, and ``verified`` is false while any produced object went unsearched
(issue: files the world writes)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from helpers.faults import FaultyStore, SimulatedCrash, once
from helpers.tables import FILES_ONLY, snapshot_of

import castable
from castable.format.layout import ERASURE_PREFIX
from castable.table import Table
from castable.tables import load_table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("email", pa.string())])
SECRET = "someone-private@example.com"


def table_with_secret(root: Path, properties: dict[str, str] | None = FILES_ONLY) -> Table:
    """1,000 rows, one a secret, in a data file (or kept inline, with ``properties={}``)."""
    t = castable.create_table(str(root), SCHEMA, primary_key="id", properties=properties)
    emails = [SECRET if i == 5 else f"user{i}@example.com" for i in range(1_000)]
    t.append(pa.table({"id": list(range(1_000)), "email": emails}, schema=SCHEMA))
    return t


def holders(t: Table) -> list[str]:
    return sorted(k for k, v in snapshot_of(t.store).items() if SECRET.encode() in v)


def records(t: Table) -> list[str]:
    return [info.key for info in t.store.list(ERASURE_PREFIX)]


def test_a_purge_stopped_half_way_is_resumed_and_verified(tmp_path: Path) -> None:
    t = table_with_secret(tmp_path)
    report = t.erase("id = 5")
    (old,) = report.to_purge
    crashing = load_table(FaultyStore(t.store, once("purge", old, "crash-after")))
    with pytest.raises(SimulatedCrash):
        crashing.purge_erased(report)
    assert not t.store.exists(old), "the old object went before the crash"
    assert len(records(t)) == 1, "the erased values were kept before anything was deleted"
    resumed = load_table(t.store).purge_erased(report)
    assert resumed.verified and resumed.unchecked == [] and resumed.traces == {}
    assert records(t) == [] and holders(t) == []


def test_a_purge_of_inline_rows_stopped_half_way_is_resumed_and_verified(tmp_path: Path) -> None:
    """The erased row was kept inline: the segments listing it hold it. A purge that crashes
    after deleting one of them is resumed by the next, which deletes the rest and verifies."""
    t = table_with_secret(tmp_path, properties={})
    assert any(k.startswith("segment/") for k in holders(t)) and not any(k.startswith("data/") for k in holders(t))
    report = t.erase("id = 5")
    crashing = load_table(FaultyStore(t.store, once("purge", "segment/", "crash-after")))
    with pytest.raises(SimulatedCrash):
        crashing.purge_erased(report)
    assert len(records(t)) == 1, "the erased values were kept before anything was deleted"
    resumed = load_table(t.store).purge_erased(report)
    assert resumed.verified and resumed.unchecked == [] and resumed.traces == {}
    assert records(t) == [] and holders(t) == []
    assert load_table(t.store).count() == 999


def test_a_purge_that_cannot_search_says_so(tmp_path: Path) -> None:
    t = table_with_secret(tmp_path)
    report = t.erase("id = 5")
    (old,) = report.to_purge
    t.store.delete(old)  # gone before any purge kept its rows (as a purge before records did)
    purged = t.purge_erased(report)
    assert not purged.verified
    assert purged.unchecked == report.clean_objects
    assert len(records(t)) == 1, "kept for another try; it records that the rows are unknown"
    again = t.purge_erased(report)
    assert not again.verified and again.unchecked == report.clean_objects


def test_a_verified_purge_leaves_no_record(tmp_path: Path) -> None:
    t = table_with_secret(tmp_path)
    assert holders(t)
    purged = t.erase("id = 5", purge=True).purge
    assert purged is not None and purged.verified and purged.unchecked == []
    assert records(t) == [] and holders(t) == []


def test_a_purge_deletes_what_only_the_expired_versions_referenced(tmp_path: Path) -> None:
    """A file an earlier compaction replaced (and the segments that listed it) still held the
    erased row; only expired versions referenced it, so the purge deletes it too."""
    t = table_with_secret(tmp_path)
    t.append(pa.table({"id": [2_000], "email": ["late@example.com"]}, schema=SCHEMA))
    t.compact(min_file_size=10**9)
    report = t.erase("id = 5")
    purged = t.purge_erased(report)
    assert purged.verified
    assert any(path.startswith("data/") for path in purged.unreferenced_deleted)
    assert holders(t) == []
    assert t.count() == 1_000
